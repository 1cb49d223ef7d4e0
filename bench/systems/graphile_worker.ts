/**
 * graphile-worker adapter. Tuned (the default here), as its performance documentation recommends for speed: the
 * local queue (`localQueue.size` 500: the pool fetches and locks a batch of jobs and hands them
 * to its workers without a round trip each) and batched completion and failure
 * (`completeJobBatchDelay: 0`, `failJobBatchDelay: 0`). Jobs are added with WorkerUtils `addJob`
 * (single) and `addJobs` (batch). With `{ defaults: true }`: graphile-worker's defaults except
 * `concurrency` (no local queue, completions one by one). graphile-worker deletes a job when it completes.
 * Runs under Deno's Node compatibility (npm: specifiers) or, bundled, under Node (bench/node.ts).
 */
import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from "graphile-worker";
import process from "node:process";
import { BaseSystem, type BenchPayload, type JobHandler, type Variant } from "./base.ts";

const TASK = "bench_noop";
const LOCAL_QUEUE_SIZE = Number(process.env.BENCH_GW_LOCAL_QUEUE ?? 500);
const silent = new Logger(() => () => {});

export default class GraphileWorkerSystem extends BaseSystem {
  readonly name = "graphile_worker";
  readonly label = "graphile-worker";
  readonly schemas = ["graphile_worker"];
  private utils: WorkerUtils | null = null;
  private runner: Runner | null = null;

  constructor(private readonly variant: Variant = {}) {
    super();
  }

  describe(concurrency: number, poolSize: number): string {
    if (this.variant.defaults) {
      return `graphile-worker 0.18.0 at its defaults: run({ concurrency: ${concurrency}, maxPoolSize: ${poolSize} })`;
    }
    return `graphile-worker 0.18.0: run({ concurrency: ${concurrency}, maxPoolSize: ${poolSize}, ` +
      `preset: { worker: { localQueue: { size: ${LOCAL_QUEUE_SIZE} }, completeJobBatchDelay: 0, ` +
      `failJobBatchDelay: 0 } } }); WorkerUtils.addJob() for single enqueue, addJobs() for batches`;
  }

  protected async install(): Promise<void> {
    this.utils = await makeWorkerUtils({ connectionString: this.url, logger: silent });
    await this.utils.migrate();
  }

  protected async uninstall(): Promise<void> {
    if (this.runner) await this.stopWorkers();
    await this.utils?.release();
    this.utils = null;
  }

  protected async enqueueOne(payload: BenchPayload): Promise<void> {
    await this.utils!.addJob(TASK, payload);
  }

  protected async enqueueMany(payloads: BenchPayload[]): Promise<void> {
    await this.utils!.addJobs(payloads.map((payload) => ({ identifier: TASK, payload })));
  }

  protected async startWorkers(concurrency: number, onJob: JobHandler): Promise<void> {
    this.runner = await run({
      connectionString: this.url,
      concurrency,
      maxPoolSize: this.opts.poolSize,
      noHandleSignals: true,
      logger: silent,
      taskList: {
        [TASK]: async (payload) => {
          onJob(payload as BenchPayload);
          await Promise.resolve();
        },
      },
      ...(this.variant.defaults ? {} : {
        preset: {
          worker: {
            localQueue: { size: LOCAL_QUEUE_SIZE },
            completeJobBatchDelay: 0,
            failJobBatchDelay: 0,
          },
        },
      }),
    });
  }

  protected async stopWorkers(): Promise<void> {
    const r = this.runner;
    this.runner = null;
    if (r) await r.stop();
  }

  protected async unfinished(): Promise<number> {
    const [{ n }] = await this.sql`select count(*)::int as n from graphile_worker._private_jobs`;
    return n;
  }
}
