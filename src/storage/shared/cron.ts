/**
 * The SQL of the `cron_schedules` table (in the svc schema, shared by both storage engines): sync
 * (upsert, never delete), list, pause/resume, remove, and the leader's compare-and-swap fire. Jobs are
 * inserted through the schema's `enqueue()` SQL function, which routes them to the engine the storage
 * state names. `CronStore` binds them to a pool; every engine exposes one as `engine.cron`.
 */
import type { Db, Row } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";
import type { NormalizedCron } from "../../cron/definition.ts";

/** Rows with the database clock beside them. */
export interface CronRows {
  rows: Row[];
  now: Date;
}

/**
 * Upserts schedules by name. The definition is replaced; `paused`, `last_fire_at` and
 * `evaluate_from` are kept, so a redeploy neither re-fires nor un-pauses. Rows of other names are
 * never touched: deployments that declare different schedules share the table.
 */
export async function upsertCron(
  db: Db,
  n: SchemaNames,
  defs: NormalizedCron[],
  declaredBy: string,
): Promise<Row[]> {
  if (defs.length === 0) return [];
  return await db.query(
    `insert into ${n.q}.cron_schedules as c
       (name, schedule, timezone, kind, args, queue, priority, max_attempts, tags, metadata, catch_up, declared_by)
     select d.name, d.schedule, d.timezone, d.kind, d.args, d.queue, d.priority, d.max_attempts,
            coalesce(d.tags, '{}'), d.metadata, d.catch_up, $2
       from jsonb_to_recordset($1::text::jsonb) as d(name text, schedule text, timezone text, kind text, args jsonb,
            queue text, priority smallint, max_attempts integer, tags text[], metadata jsonb, catch_up integer)
     on conflict (name) do update set
       schedule = excluded.schedule, timezone = excluded.timezone, kind = excluded.kind, args = excluded.args,
       queue = excluded.queue, priority = excluded.priority, max_attempts = excluded.max_attempts,
       tags = excluded.tags, metadata = excluded.metadata, catch_up = excluded.catch_up,
       declared_by = excluded.declared_by, synced_at = now(),
       updated_at = case
         when (c.schedule, c.timezone, c.kind, c.args, c.queue, c.priority, c.max_attempts, c.tags, c.metadata,
               c.catch_up)
           is distinct from
              (excluded.schedule, excluded.timezone, excluded.kind, excluded.args, excluded.queue, excluded.priority,
               excluded.max_attempts, excluded.tags, excluded.metadata, excluded.catch_up)
         then now() else c.updated_at end
     returning c.*, now() as now`,
    [
      JSON.stringify(
        defs.map(({ maxAttempts, catchUp, ...d }) => ({
          ...d,
          max_attempts: maxAttempts,
          catch_up: catchUp,
        })),
      ),
      declaredBy,
    ],
  );
}

/** Every schedule, by name. */
export async function listCronRows(db: Db, n: SchemaNames): Promise<CronRows> {
  const rows = await db.query(`select c.*, now() as now from ${n.q}.cron_schedules c order by c.name`);
  return { rows, now: rows[0]?.now ?? await dbNow(db) };
}

/** One schedule, or null. */
export async function getCronRow(db: Db, n: SchemaNames, name: string): Promise<Row | null> {
  const rows = await db.query(`select c.*, now() as now from ${n.q}.cron_schedules c where c.name = $1`, [
    name,
  ]);
  return rows[0] ?? null;
}

/**
 * Pauses or resumes; null when there is no such schedule. Resuming a paused schedule moves
 * `evaluate_from` to now: fire times that passed while it was paused are not enqueued.
 */
export async function setCronPaused(
  db: Db,
  n: SchemaNames,
  name: string,
  paused: boolean,
): Promise<Row | null> {
  const rows = await db.query(
    `update ${n.q}.cron_schedules c set paused = $2, updated_at = now(),
            evaluate_from = case when c.paused and not $2 then now() else c.evaluate_from end
      where c.name = $1 returning c.*, now() as now`,
    [name, paused],
  );
  return rows[0] ?? null;
}

/** Deletes a schedule; false when there was none. */
export async function removeCronRow(db: Db, n: SchemaNames, name: string): Promise<boolean> {
  const rows = await db.query(`delete from ${n.q}.cron_schedules where name = $1 returning name`, [name]);
  return rows.length > 0;
}

/** The schedules the leader evaluates (not paused), with the database clock. */
export async function activeCronRows(db: Db, n: SchemaNames): Promise<CronRows> {
  const rows = await db.query(
    `select c.name, c.schedule, c.timezone, c.catch_up, c.last_fire_at, c.evaluate_from, now() as now
       from ${n.q}.cron_schedules c where not c.paused order by c.name`,
  );
  return { rows, now: rows[0]?.now ?? new Date() };
}

/**
 * The at-most-once fire: moves `last_fire_at` from `expected` (the value the caller read) to
 * `newest`, and in the same statement enqueues one job per fire time. When another leader (or a
 * pause) got there first the update matches no row and nothing is inserted. Returns the job ids.
 */
export async function fireCron(
  db: Db,
  n: SchemaNames,
  name: string,
  expected: Date | null,
  newest: Date,
  fireTimes: Date[],
): Promise<number[]> {
  const rows = await db.query(
    `with cas as (
       update ${n.q}.cron_schedules c set last_fire_at = $3::timestamptz
        where c.name = $1 and c.last_fire_at is not distinct from $2::timestamptz and not c.paused
        returning c.kind, c.args, c.queue, c.priority, c.max_attempts, c.tags, c.metadata)
     select e.id
       from cas cross join unnest($4::text[]) with ordinality as f(t, i)
            cross join lateral ${n.q}.enqueue(cas.kind, cas.args, jsonb_build_object(
              'queue', cas.queue, 'priority', cas.priority, 'max_attempts', cas.max_attempts,
              'tags', to_jsonb(cas.tags), 'run_at', f.t,
              'metadata', cas.metadata || jsonb_build_object('cron', $1::text, 'cron_fire_at', f.t))) as e
      order by f.i`,
    [name, expected?.toISOString() ?? null, newest.toISOString(), fireTimes.map((d) => d.toISOString())],
  );
  return rows.map((r) => Number(r.id));
}

async function dbNow(db: Db): Promise<Date> {
  const [r] = await db.query(`select now() as now`);
  return r.now;
}

/** The cron table of one schema, bound to a pool. */
export class CronStore {
  constructor(private readonly db: Db, private readonly names: SchemaNames) {}
  upsert(defs: NormalizedCron[], declaredBy: string): Promise<Row[]> {
    return upsertCron(this.db, this.names, defs, declaredBy);
  }
  list(): Promise<CronRows> {
    return listCronRows(this.db, this.names);
  }
  get(name: string): Promise<Row | null> {
    return getCronRow(this.db, this.names, name);
  }
  setPaused(name: string, paused: boolean): Promise<Row | null> {
    return setCronPaused(this.db, this.names, name, paused);
  }
  remove(name: string): Promise<boolean> {
    return removeCronRow(this.db, this.names, name);
  }
  active(): Promise<CronRows> {
    return activeCronRows(this.db, this.names);
  }
  fire(name: string, expected: Date | null, newest: Date, fireTimes: Date[]): Promise<number[]> {
    return fireCron(this.db, this.names, name, expected, newest, fireTimes);
  }
}
