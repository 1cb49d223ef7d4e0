/** svc on queue storage with `prefetch: 500`, matched to the peers' tuned settings (500 jobs fetched ahead). */
import SvcSystem from "./svc.ts";
export { load } from "./svc.ts";

export default class SvcPrefetchSystem extends SvcSystem {
  override readonly name: string = "svc_prefetch";
  override readonly label: string = "svc, prefetch 500";
  override readonly prefetch: number = 500;
}
