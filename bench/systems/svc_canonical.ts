/** svc on its `canonical` storage engine (the older line's jobs table), beside svc on queue storage. */
import SvcSystem from "./svc.ts";
export { load } from "./svc.ts";

export default class SvcCanonicalSystem extends SvcSystem {
  override readonly name: string = "svc_canonical";
  override readonly label: string = "svc (canonical)";
  override readonly engine = "canonical" as const;
}
