/**
 * The order of a queue-storage claim's rows (`inClaimOrder` in src/storage/queue_storage/engine.ts): the claim
 * returns them without a final sort, and the engine puts rows that come out of order into claim order
 * (priority, then lane position), in which held jobs start. No database.
 */
import assert from "node:assert/strict";
import { inClaimOrder } from "../../src/storage/queue_storage/engine.ts";

const row = (priority: number, seq: number) => ({ priority, seq, job_id: priority * 1000 + seq });

Deno.test("claim order: rows out of order are sorted by priority, then lane position", () => {
  const rows = [row(2, 30), row(1, 50), row(2, 10), row(1, 40), row(3, 1)];
  inClaimOrder(rows);
  assert.deepEqual(rows.map((r) => [r.priority, r.seq]), [[1, 40], [1, 50], [2, 10], [2, 30], [3, 1]]);
});

Deno.test("claim order: rows already in claim order are left as they are", () => {
  const a = row(1, 5), b = row(1, 6), c = row(2, 1);
  const rows = [a, b, c];
  inClaimOrder(rows);
  assert.equal(rows[0], a);
  assert.equal(rows[1], b);
  assert.equal(rows[2], c);
  const empty: ReturnType<typeof row>[] = [];
  inClaimOrder(empty);
  assert.equal(empty.length, 0);
});
