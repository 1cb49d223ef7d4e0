/**
 * A worker warns at start when the queue-storage ring turns over in less than twice rescueAfter: a killed
 * worker's attempts pin their slots until they are rescued, so such a ring can run short of slots.
 */
import assert from "node:assert/strict";
import { TEST_ENGINE, testClient } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import type { Logger } from "../../mod.ts";

Deno.test({
  name: "worker start: a ring that turns over within 2 x rescueAfter is warned about; the defaults are not",
  ignore: TEST_ENGINE !== "queue_storage",
  fn: async () => {
    const { client, drop } = await testClient();
    const warnings: string[] = [];
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      error: () => {},
      warn: (m) => warnings.push(String(m)),
    };
    try {
      // 8 slots of 30 s with nothing retained: 180 s, against a rescue window of 10 minutes.
      const short = await startWorker(client, { logger, rescueAfter: 600_000, retention: { completed: 0 } });
      await short.stop();
      assert.equal(warnings.filter((w) => /ring turns over in 180 s/.test(w)).length, 1, warnings.join("\n"));
      warnings.length = 0;
      // The default completed retention (24 h) keeps the ring turning over in a day.
      const defaults = await startWorker(client, { logger, rescueAfter: 600_000 });
      await defaults.stop();
      assert.deepEqual(warnings.filter((w) => /ring turns over/.test(w)), []);
    } finally {
      await drop();
    }
  },
});
