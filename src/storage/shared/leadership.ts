/**
 * The leadership row's statements (src/worker/leader.ts runs the election): the fence every duty's
 * transaction starts with, renewal, taking the next term, and resigning. One row per schema (`leadership`,
 * a singleton); a term is held by one runtime id at a time.
 */
import type { Db } from "../../db/connection.ts";
import type { SchemaNames } from "../../db/names.ts";

/**
 * The fence of a duty's transaction (`tx`): whether `holder` still holds `term`, taking the row `for key
 * share` (a challenger's take skips it while the duty runs). It also bounds the transaction: idle in it for
 * ttlMs, a statement for twice ttlMs, and on PostgreSQL 17+ the whole transaction for twice ttlMs and a second.
 */
export async function fenceTerm(
  tx: Db,
  names: SchemaNames,
  holder: string,
  term: number,
  ttlMs: number,
): Promise<boolean> {
  const ok = await tx.query(
    `select set_config('idle_in_transaction_session_timeout', $3, true) as t,
            set_config('statement_timeout', $4, true) as s,
            case when current_setting('server_version_num')::integer >= 170000
                 then set_config('transaction_timeout', $5, true) end as x
       from ${names.q}.leadership where holder = $1 and term = $2 for key share`,
    [
      holder,
      term,
      String(Math.ceil(ttlMs)),
      String(Math.ceil(2 * ttlMs)),
      String(Math.ceil(2 * ttlMs) + 1_000),
    ],
  );
  return ok.length > 0;
}

/** Renews the term: false when `holder` no longer holds `term`. */
export async function renewTerm(db: Db, names: SchemaNames, holder: string, term: number): Promise<boolean> {
  const rows = await db.query(
    `update ${names.q}.leadership set renewed_at = now()
      where holder = $1 and term = $2 returning term`,
    [holder, term],
  );
  return rows.length > 0;
}

/** A term just taken, and the holder it was taken from. */
export interface TakenTerm {
  term: number;
  previous: string | null;
  previousTerm: number | null;
  /** Whether the previous holder had renewed within the TTL (it was its own, or it resigned). */
  fresh: boolean;
  /** Seconds since the previous holder's last renewal (null: never renewed). */
  ageSeconds: number | null;
}

/**
 * Takes the next term when the row has no holder, is `holder`'s own, or was not renewed for `ttlMs`; skips
 * the row while a duty of the holder is in flight (it holds the row `for key share`). Null: not taken.
 */
export async function takeTerm(
  db: Db,
  names: SchemaNames,
  holder: string,
  ttlMs: number,
): Promise<TakenTerm | null> {
  const q = names.q;
  const [r] = await db.query(
    `with c as (
       select holder, term, renewed_at is not null and renewed_at >= now() - $2::bigint * interval '1 millisecond' as fresh,
              extract(epoch from now() - renewed_at)::float8 as age
         from ${q}.leadership
        where singleton and (holder is null or holder = $1 or renewed_at is null
                             or renewed_at < now() - $2::bigint * interval '1 millisecond')
          for update skip locked)
     update ${q}.leadership l set holder = $1, term = c.term + 1, renewed_at = now()
       from c where l.singleton
     returning l.term, c.holder as previous, c.term as previous_term, c.fresh, c.age`,
    [holder, ttlMs],
  );
  if (!r) return null;
  return {
    term: Number(r.term),
    previous: r.previous,
    previousTerm: r.previous_term === null ? null : Number(r.previous_term),
    fresh: Boolean(r.fresh),
    ageSeconds: r.age === null ? null : Number(r.age),
  };
}

/** Gives the term back, so that another process takes it at its next election. */
export async function resignTerm(db: Db, names: SchemaNames, holder: string, term: number): Promise<void> {
  await db.query(
    `update ${names.q}.leadership set holder = null, renewed_at = null where holder = $1 and term = $2`,
    [holder, term],
  );
}
