#!/usr/bin/env -S deno run -A
/**
 * `@svc/cli`: the `svc` command (`deno run -A jsr:@svc/cli --help`). The commands live in `@svc/queue/cli`.
 *
 * @module
 */
import { main } from "@svc/queue/cli";

export { main };

if (import.meta.main) Deno.exit(await main(Deno.args));
