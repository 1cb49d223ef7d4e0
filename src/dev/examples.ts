/**
 * What `svc dev` runs to show the whole system: example handlers (one succeeds, one retries then
 * succeeds, one fails for good), a job kind pushed to a built-in function endpoint over HTTP (it
 * answers 202 and calls the receiver back), one cron schedule, and the batch of jobs it enqueues.
 * Everything lives in the queue `dev`, so `svc dev` on a shared database never claims other jobs.
 */
import { TerminalError } from "../errors.ts";
import { SIGNATURE_HEADER } from "../contract/signature.ts";
import type { CronDefinition } from "../cron/definition.ts";
import type { EnqueueItem } from "../types.ts";
import type { HandlerEntry } from "../worker/handlers.ts";
import type { FunctionRequest } from "../worker/http_worker.ts";

/** The queue of every example job. */
export const DEV_QUEUE = "dev";

/** The kinds, by what they show. */
export const DEV_KINDS = {
  succeeds: "dev.greet",
  retriesThenSucceeds: "dev.flaky",
  failsForGood: "dev.reject",
  httpCallback: "dev.http_greet",
  cron: "dev.cron_tick",
} as const;

/** The cron schedule (every 10 seconds). */
export const DEV_CRON: Record<string, CronDefinition> = {
  "dev.every_10s": { schedule: "*/10 * * * * *", kind: DEV_KINDS.cron, queue: DEV_QUEUE, maxAttempts: 3 },
};

const NAMES = ["Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia"];

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });

/** The in-process handlers (the HTTP kind is an HTTP worker, see `exampleFunction`). */
export function exampleHandlers(): Record<string, HandlerEntry> {
  return {
    [DEV_KINDS.succeeds]: async (job, ctx) => {
      await pause(100 + Math.random() * 400, ctx.signal); // long enough to be seen running in the UI
      return { greeting: `hello, ${job.args.name ?? "world"}` };
    },
    [DEV_KINDS.retriesThenSucceeds]: {
      handler: (job) => {
        if (job.attempt < 3) throw new Error(`attempt ${job.attempt} failed on purpose (attempt 3 succeeds)`);
        return { succeededOnAttempt: job.attempt };
      },
      backoff: () => 1000,
    },
    [DEV_KINDS.failsForGood]: () => {
      throw new TerminalError("this job always fails: TerminalError fails it at once, without retries");
    },
    [DEV_KINDS.cron]: (job) => ({ firedAt: job.metadata.cron_fire_at ?? null }),
  };
}

/** One job of each example kind. */
export function exampleBatch(n: number): EnqueueItem[] {
  const name = NAMES[n % NAMES.length];
  const base = { queue: DEV_QUEUE, tags: ["example"] };
  return [
    { ...base, kind: DEV_KINDS.succeeds, args: { name } },
    { ...base, kind: DEV_KINDS.retriesThenSucceeds, args: {} },
    { ...base, kind: DEV_KINDS.failsForGood, args: {}, maxAttempts: 3 },
    { ...base, kind: DEV_KINDS.httpCallback, args: { name } },
  ];
}

/** The built-in function endpoint: a fetch handler, and `close` to stop its pending callbacks. */
export interface ExampleFunction {
  fetch(req: Request): Promise<Response>;
  /** Cancels the callbacks not started yet and waits for those under way. */
  close(): Promise<void>;
}

/**
 * The function endpoint the HTTP worker pushes `dev.http_greet` jobs to (mode async): it answers 202
 * at once, works for `workMs`, then POSTs `{payload}` to the job's `callback_url`, forwarding the
 * signature header unchanged (as examples/function_endpoint.ts does in a process of its own).
 */
export function exampleFunction(log: (line: string) => void, workMs = 300): ExampleFunction {
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const calls = new Set<Promise<void>>();
  const callBack = async (job: FunctionRequest, signature: string | null) => {
    try {
      const res = await fetch(job.callback_url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(signature ? { [SIGNATURE_HEADER]: signature } : {}),
        },
        body: JSON.stringify({
          payload: { greeting: `hello from the function, ${job.args.name ?? "world"}` },
        }),
      });
      await res.body?.cancel();
      log(`svc dev: function endpoint called back for job ${job.job_id} (${job.kind}): ${res.status}`);
    } catch (e) {
      log(`svc dev: function endpoint could not call back for job ${job.job_id}: ${(e as Error).message}`);
    }
  };
  return {
    async fetch(req) {
      if (req.method !== "POST") {
        return new Response("the svc dev example function takes POST requests from the HTTP worker\n", {
          status: 405,
          headers: { allow: "POST" },
        });
      }
      const job = await req.json() as FunctionRequest;
      const signature = req.headers.get(SIGNATURE_HEADER);
      const t = setTimeout(() => {
        timers.delete(t);
        const p = callBack(job, signature).finally(() => calls.delete(p));
        calls.add(p);
      }, workMs);
      timers.add(t);
      return new Response(null, { status: 202 });
    },
    async close() {
      timers.forEach(clearTimeout);
      timers.clear();
      await Promise.allSettled([...calls]);
    },
  };
}
