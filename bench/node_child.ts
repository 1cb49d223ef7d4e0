/**
 * The benchmark's child under Node 22: bench/node.ts bundles this file (with the peers' adapters and the
 * harness) into bench/tmp/node22/child.mjs, next to a node_modules of the same pinned peer versions.
 *   node child.mjs --child NAME --run N --out FILE [--quick]
 */
import process from "node:process";
import { runChild, type SystemModule } from "./child.ts";
import { COUNTS } from "./config.ts";
import * as svcModule from "../mod.ts";
import { useModule } from "./systems/svc.ts";

const argv = process.argv.slice(2);
const opt = (name: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
useModule(svcModule);
const adapters: Record<string, () => Promise<SystemModule>> = {
  svc: () => import("./systems/svc.ts") as Promise<SystemModule>,
  svc_prefetch: () => import("./systems/svc_prefetch.ts") as Promise<SystemModule>,
  pgboss: () => import("./systems/pgboss.ts") as Promise<SystemModule>,
  graphile_worker: () => import("./systems/graphile_worker.ts") as Promise<SystemModule>,
};
await runChild(
  opt("child")!,
  Number(opt("run") ?? 1),
  opt("out")!,
  COUNTS[argv.includes("--quick") ? "quick" : "full"],
  (base) => adapters[base]?.() ?? Promise.reject(new Error(`${base} does not run under Node here`)),
);
process.exit(0);
