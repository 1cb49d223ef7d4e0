/**
 * pg-boss adapter, configured for speed as its documentation describes: LISTEN/NOTIFY on
 * (`useListenNotify` on the instance, `notify: true` on the queue), batch `work` (`batchSize`,
 * the handler receives an array of jobs and they are completed together when it resolves),
 * `burstWhenBatchFull` so a worker fetches again at once while batches come back full, and
 * `localConcurrency` pollers. With `{ defaults: true }`: pg-boss's defaults except `localConcurrency`
 * (batch size 1, polling every 2 s, no LISTEN/NOTIFY). Runs under Deno's Node compatibility (npm:
 * specifiers) or, bundled, under Node (bench/node.ts).
 */
import { PgBoss } from "pg-boss";
import process from "node:process";
import { BaseSystem, type BenchPayload, type JobHandler, type Variant } from "./base.ts";

const QUEUE = "bench";

/** Jobs fetched per `work` poll (the prefetch the issue's own measurement used). */
const BATCH_SIZE = Number(process.env.BENCH_PGBOSS_BATCH ?? 500);

/** Pollers (`localConcurrency`) for a given concurrency. */
function pollers(concurrency: number): number {
  const env = process.env.BENCH_PGBOSS_POLLERS;
  if (env) return Number(env);
  return Math.max(2, Math.round(concurrency / 5));
}

export default class PgBossSystem extends BaseSystem {
  readonly name = "pgboss";
  readonly label = "pg-boss";
  readonly schemas = ["pgboss"];
  private boss: PgBoss | null = null;
  private workId: string | null = null;

  constructor(private readonly variant: Variant = {}) {
    super();
  }

  describe(concurrency: number, poolSize: number): string {
    if (this.variant.defaults) {
      return `pg-boss 12.35.0 at its defaults: new PgBoss({ max: ${poolSize} }), createQueue('${QUEUE}'), ` +
        `work('${QUEUE}', { localConcurrency: ${concurrency} }) (batch size 1, polling every 2 s)`;
    }
    return `pg-boss 12.35.0: new PgBoss({ useListenNotify: true, max: ${poolSize} }), ` +
      `createQueue('${QUEUE}', { notify: true }), work('${QUEUE}', { batchSize: ${BATCH_SIZE}, ` +
      `localConcurrency: ${pollers(concurrency)}, burstWhenBatchFull: true }); the batch handler runs the ` +
      `no-op for each job of its batch; send() for single enqueue, insert() for batches`;
  }

  protected async install(): Promise<void> {
    const d = this.variant.defaults === true;
    const boss = new PgBoss({
      connectionString: this.url,
      max: this.opts.poolSize,
      application_name: "bench-pgboss",
      ...(d ? {} : { useListenNotify: true }),
    });
    boss.on("error", (e: unknown) => console.error("  pg-boss error:", (e as Error)?.message ?? e));
    boss.on("warning", () => {});
    await boss.start();
    await boss.createQueue(QUEUE, d ? {} : { notify: true });
    this.boss = boss;
  }

  protected async uninstall(): Promise<void> {
    if (this.boss) await this.boss.stop({ graceful: true, close: true, timeout: 10_000 });
    this.boss = null;
  }

  protected async enqueueOne(payload: BenchPayload): Promise<void> {
    await this.boss!.send(QUEUE, payload);
  }

  protected async enqueueMany(payloads: BenchPayload[]): Promise<void> {
    await this.boss!.insert(QUEUE, payloads.map((data) => ({ data })));
  }

  protected async startWorkers(concurrency: number, onJob: JobHandler): Promise<void> {
    this.workId = await this.boss!.work<BenchPayload>(
      QUEUE,
      this.variant.defaults
        ? { localConcurrency: concurrency }
        : { batchSize: BATCH_SIZE, localConcurrency: pollers(concurrency), burstWhenBatchFull: true },
      async (jobs) => {
        for (const job of jobs) onJob(job.data);
        await Promise.resolve();
      },
    );
  }

  protected async stopWorkers(): Promise<void> {
    await this.boss!.offWork(QUEUE, { wait: true });
    this.workId = null;
  }

  protected async unfinished(): Promise<number> {
    const [{ n }] = await this.sql`
      select count(*)::int as n from pgboss.job where name = ${QUEUE} and state < 'completed'`;
    return n;
  }
}
