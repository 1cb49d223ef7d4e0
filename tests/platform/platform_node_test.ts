/**
 * The two platform modules export the same names with the same types (the npm build puts
 * `platform_node.ts` in the place of `platform.ts`), and each serves HTTP alike: both are run here, the
 * Node one through Deno's `node:` modules (the npm smoke test runs it on Node itself).
 */
import assert from "node:assert/strict";
import * as deno from "../../src/platform/platform.ts";
import * as node from "../../src/platform/platform_node.ts";

// Type-checked: the Node module can stand wherever the Deno module is imported.
const asDeno: typeof deno = node;

Deno.test("runtime: the Node module exports exactly the names of the Deno one", () => {
  assert.deepEqual(Object.keys(node).sort(), Object.keys(deno).sort());
  assert.equal(asDeno.pid(), Deno.pid);
  // Not a single executable here (the single executables' own tests see true: tests/packaging/).
  assert.equal(deno.singleBinary(), false);
  assert.equal(node.singleBinary(), false);
});

for (const [name, rt] of [["deno", deno], ["node", node]] as const) {
  Deno.test(`runtime (${name}): serveHttp converts requests and responses both ways`, async () => {
    let seen: { method: string; url: string; header: string | null; body: string } | undefined;
    const server = await rt.serveHttp({ hostname: "127.0.0.1", port: 0 }, async (req) => {
      const url = new URL(req.url);
      if (url.pathname === "/boom") throw new Error("handler failure (expected in this test)");
      seen = {
        method: req.method,
        url: url.pathname + url.search,
        header: req.headers.get("x-a"),
        body: await req.text(),
      };
      const headers = new Headers({ "content-type": "application/json", "x-b": "2" });
      headers.append("set-cookie", "a=1");
      headers.append("set-cookie", "b=2");
      return new Response(JSON.stringify({ ok: true }), { status: 201, headers });
    });
    const errors: unknown[] = [];
    const origError = console.error;
    console.error = (...a: unknown[]) => errors.push(a);
    try {
      assert.ok(server.addr.port > 0);
      const base = `http://127.0.0.1:${server.addr.port}`;
      const big = "x".repeat(200_000);
      const res = await fetch(`${base}/p?q=1`, { method: "POST", headers: { "x-a": "1" }, body: big });
      assert.equal(res.status, 201);
      assert.equal(res.headers.get("x-b"), "2");
      assert.deepEqual(res.headers.getSetCookie(), ["a=1", "b=2"]);
      assert.deepEqual(await res.json(), { ok: true });
      assert.deepEqual(seen, { method: "POST", url: "/p?q=1", header: "1", body: big });

      const head = await fetch(`${base}/h`, { method: "HEAD" });
      assert.equal(head.status, 201);
      assert.equal(await head.text(), "");

      const boom = await fetch(`${base}/boom`);
      assert.equal(boom.status, 500);
      await boom.body?.cancel();

      // The port is taken: a second server rejects.
      await assert.rejects(
        rt.serveHttp({ hostname: "127.0.0.1", port: server.addr.port }, () => new Response()),
      );
    } finally {
      console.error = origError;
      await server.close();
    }
    // Deno logs a failed handler itself; the Node module with console.error.
    if (name === "node") assert.ok(errors.length >= 1, "the handler failure is logged");
    await assert.rejects(fetch(`http://127.0.0.1:${server.addr.port}/`), "closed: nothing listens");
  });

  Deno.test(`runtime (${name}): lockDirectory holds one lock per folder until released`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "svc-lock-" });
    try {
      const unlock = await rt.lockDirectory(`${dir}/sub`, "svc.lock");
      assert.ok(unlock, "taken");
      assert.equal(await rt.lockDirectory(`${dir}/sub`, "svc.lock"), null, "held");
      await unlock();
      const again = await rt.lockDirectory(`${dir}/sub`, "svc.lock");
      assert.ok(again, "taken again after release");
      await again();
      assert.ok(await rt.pathExists(`${dir}/sub`));
      await rt.removeDir(`${dir}/sub`);
      assert.equal(await rt.pathExists(`${dir}/sub`), false);
      await rt.removeDir(`${dir}/sub`); // nothing there: no error
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("runtime (node): a lock file left by a process that is gone is taken over", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svc-lock-" });
  try {
    // A process that ran and exited: its id is free now.
    const gone = new Deno.Command("true").spawn();
    await gone.status;
    await Deno.writeTextFile(`${dir}/svc.lock`, `${gone.pid}\n`);
    const unlock = await node.lockDirectory(dir, "svc.lock");
    assert.ok(unlock, "taken over");
    assert.equal(await Deno.readTextFile(`${dir}/svc.lock`), `${Deno.pid}\n`);
    await unlock();
    // A live process's lock is respected.
    const live = new Deno.Command("sleep", { args: ["30"] }).spawn();
    try {
      await Deno.writeTextFile(`${dir}/svc.lock`, `${live.pid}\n`);
      assert.equal(await node.lockDirectory(dir, "svc.lock"), null);
    } finally {
      live.kill("SIGKILL");
      await live.status;
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runtime (node): env, hostname, args, readBytes", async () => {
  assert.equal(node.env("SVC_SURELY_UNSET_VARIABLE"), undefined);
  assert.equal(node.env("PATH"), Deno.env.get("PATH"));
  assert.equal(node.hostname(), Deno.hostname());
  assert.ok(Array.isArray(node.args()));
  const bytes = await node.readBytes(new URL(import.meta.url));
  assert.match(new TextDecoder().decode(bytes), /runtime \(node\): env, hostname/);
  await node.nextMacrotask();
});
