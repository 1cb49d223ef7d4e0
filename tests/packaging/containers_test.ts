/**
 * The container images of examples/containers/ and the Kubernetes example of examples/kubernetes/.
 * No container engine runs here, so the images are not built; what can be checked is checked:
 *
 * - each Dockerfile's build stage runs the task that writes the file its runtime stage copies (the
 *   task's default output), from a context `.dockerignore` does not strip of the build's inputs; its
 *   entrypoint is that copy, and its commands (CMD `svc serve`, HEALTHCHECK `svc health`) are run with
 *   the Node single executable placed as in the image, from an empty folder with nothing on PATH;
 * - the manifests parse; the migrate Job's and the serve Deployment's arguments are run with that
 *   executable (the ports they name are svc serve's default), and their probe paths answer 200 there;
 *   the worker Deployment's probes name the health listener's port and paths, its grace is longer
 *   than the drain timeout it gives, and examples/kubernetes/worker.ts, run with its environment,
 *   answers both probes, turns unready on SIGTERM while a job finishes, and exits 0.
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { buildProgram } from "../../cli.ts";
import { createClient } from "../../src/client/client.ts";
import { DATABASE_URL, dropSchema, freshSchema, waitFor } from "../helpers/db.ts";
import { closedPort } from "../helpers/http.ts";
import {
  checkServeAnswersUi,
  IN_CI,
  mustRun,
  onPath,
  PACKAGING_IGNORED,
  ROOT,
  runCommand,
  startService,
  withTempDir,
} from "../helpers/packaging.ts";
import { seaBinary } from "../helpers/single_binary.ts";
import { DEFAULT_OUTPUT } from "../../tools/compile.ts";
import { DEFAULT_SEA_OUTPUT } from "../../tools/sea.ts";

const HAVE_NODE = onPath("node") && onPath("npm");
const IGNORED = PACKAGING_IGNORED || (!HAVE_NODE && !IN_CI);

/** One instruction of a Dockerfile: its keyword and the rest of its line (continuations joined). */
interface Instruction {
  op: string;
  args: string;
}

/** The instructions of a Dockerfile, by stage (a stage starts at FROM). */
function parseDockerfile(text: string): Instruction[][] {
  const stages: Instruction[][] = [];
  const logical = text.replace(/\\\n/g, " ").split("\n").map((l) => l.trim()).filter((l) =>
    l && !l.startsWith("#")
  );
  for (const line of logical) {
    const [, op, args] = /^(\w+)\s+(.*)$/.exec(line) ?? [];
    assert.ok(op, `a Dockerfile instruction: ${line}`);
    if (op.toUpperCase() === "FROM") stages.push([]);
    assert.ok(stages.length, `${line} comes after a FROM`);
    stages.at(-1)!.push({ op: op.toUpperCase(), args: args.trim() });
  }
  return stages;
}

/** The values of one instruction in a stage. */
function all(stage: Instruction[], op: string): string[] {
  return stage.filter((i) => i.op === op).map((i) => i.args);
}

/** The one value of an instruction in a stage. */
function one(stage: Instruction[], op: string): string {
  const values = all(stage, op);
  assert.equal(values.length, 1, `one ${op}: ${JSON.stringify(values)}`);
  return values[0];
}

/** The default value of an option of a `svc` command, as the CLI defines it. */
function cliDefault(command: string, flag: string): unknown {
  const cmd = buildProgram().commands.find((c) => c.name() === command)!;
  return cmd.options.find((o) => o.long === flag)!.defaultValue;
}

/** `args` with the value after `flag` replaced (a test cannot bind 0.0.0.0:3000). */
function withFlag(args: string[], flag: string, value: string): string[] {
  const i = args.indexOf(flag);
  assert.ok(i >= 0 && i + 1 < args.length, `${flag} in ${JSON.stringify(args)}`);
  return [...args.slice(0, i + 1), value, ...args.slice(i + 2)];
}

/** The Node single executable placed at `path` inside a folder standing for an image's file system. */
async function placeBinary(root: string, path: string): Promise<string> {
  const target = `${root}${path}`;
  await Deno.mkdir(target.slice(0, target.lastIndexOf("/")), { recursive: true });
  await Deno.copyFile(await seaBinary(), target);
  return target;
}

const DOCKERFILES = [
  { file: "svc.Dockerfile", task: "compile", run: "deno task compile", output: DEFAULT_OUTPUT },
  {
    file: "svc-node.Dockerfile",
    task: "sea",
    run: `npx --yes deno@${Deno.version.deno} task sea`,
    output: DEFAULT_SEA_OUTPUT,
  },
];

Deno.test({
  name:
    "Dockerfiles: the build runs the task that writes the copied binary; CMD and HEALTHCHECK are valid svc commands",
  ignore: IGNORED,
  fn: () =>
    withTempDir("svc-docker-", async (dir) => {
      const tasks = JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).tasks;
      const ignored = (await Deno.readTextFile(`${ROOT}/.dockerignore`)).split("\n").map((l) => l.trim())
        .filter((l) => l && !l.startsWith("#"));
      // What the builds read: the sources, the build tools (deno task sea runs with deno.contrib.json), and the
      // README of the npm build.
      const inputs = [
        "deno.json",
        "deno.lock",
        "deno.contrib.json",
        "deno.contrib.lock",
        "cli.ts",
        "mod.ts",
        "dnt.ts",
        "src",
        "tools",
        "docs/guide/node.md",
      ];
      for (const pattern of ignored) {
        for (const input of inputs) {
          assert.ok(
            !`${input}/`.startsWith(`${pattern.replace(/\/$/, "")}/`),
            `.dockerignore keeps ${input}`,
          );
        }
      }
      assert.ok(ignored.includes("dist"), ".dockerignore leaves out dist/ (a binary built outside)");

      const schema = freshSchema("dock");
      const port = String(cliDefault("serve", "--port"));
      try {
        for (const d of DOCKERFILES) {
          const [build, runtime, ...more] = parseDockerfile(
            await Deno.readTextFile(`${ROOT}/examples/containers/${d.file}`),
          );
          assert.equal(more.length, 0, `${d.file}: two stages`);
          assert.match(one(build, "FROM"), /\sAS build$/i, d.file);
          assert.ok(tasks[d.task], `deno.json has the task ${d.task}`);
          const workdir = one(build, "WORKDIR");
          assert.deepEqual(all(build, "COPY"), [". ."], `${d.file}: the whole context`);
          assert.equal(one(build, "RUN"), d.run, d.file);
          if (d.task === "sea") {
            const major = Number(/^node:(\d+)/.exec(one(build, "FROM"))?.[1]);
            assert.ok(major >= 22, `${d.file}: built on a Node that is still maintained (${major})`);
          } else {
            assert.match(
              one(build, "FROM"),
              new RegExp(`^denoland/deno:${Deno.version.deno.replaceAll(".", "\\.")} `),
            );
          }
          // The runtime stage copies what the task writes by default, and runs it.
          const [, from, to] = /^--from=build\s+(\S+)\s+(\S+)$/.exec(one(runtime, "COPY")) ?? [];
          assert.equal(from, `${workdir}/${d.output}`, `${d.file} copies the task's output`);
          assert.deepEqual(JSON.parse(one(runtime, "ENTRYPOINT")), [to]);
          assert.equal(one(runtime, "STOPSIGNAL"), "SIGTERM");
          assert.equal(one(runtime, "EXPOSE"), port, `${d.file}: svc serve's default port`);
          const cmd: string[] = JSON.parse(one(runtime, "CMD"));
          assert.deepEqual(cmd.slice(0, 1), ["serve"]);
          assert.equal(cmd[cmd.indexOf("--port") + 1], port);
          const health = /^(?:--\S+\s+)*CMD\s+(\[.*\])$/.exec(one(runtime, "HEALTHCHECK"))?.[1];
          const healthCmd: string[] = JSON.parse(health!);
          assert.equal(healthCmd[0], to, "the health check runs the binary");

          // The image's commands, with the Node single executable where the image has its binary.
          const root = `${dir}/${d.task}`;
          const binary = await placeBinary(root, to);
          const work = `${root}/work`;
          await Deno.mkdir(work);
          const env = { DATABASE_URL, SERVICE_SCHEMA: schema, PATH: work };
          const opts = { cwd: work, env, timeoutMs: 120_000 };
          const unready = await runCommand(binary, healthCmd.slice(1), opts);
          assert.equal(unready.code, 1, "svc health fails before svc migrate");
          assert.match(unready.stdout, /^ready: no$/m);
          await mustRun(binary, ["migrate"], opts); // docker run --rm IMAGE migrate
          const ready = await mustRun(binary, healthCmd.slice(1), opts);
          assert.match(ready.stdout, /^ready: yes$/m);
          const serveArgs = withFlag(withFlag(cmd, "--host", "127.0.0.1"), "--port", "0");
          await checkServeAnswersUi(startService(binary, serveArgs, opts));
          await dropSchema(schema);
        }
      } finally {
        await dropSchema(schema);
      }
    }),
});

/** The manifests of examples/kubernetes/, parsed. */
async function manifests(): Promise<any[]> {
  const out: any[] = [];
  for await (const e of Deno.readDir(`${ROOT}/examples/kubernetes`)) {
    if (!e.name.endsWith(".yaml")) continue;
    for (const doc of parseAllDocuments(await Deno.readTextFile(`${ROOT}/examples/kubernetes/${e.name}`))) {
      assert.deepEqual(doc.errors, [], `${e.name} parses`);
      out.push(doc.toJS());
    }
  }
  return out;
}

/** The one object of a kind with the component label. */
function component(objects: any[], kind: string, name: string): any {
  const found = objects.filter((o) =>
    o.kind === kind && o.metadata?.labels?.["app.kubernetes.io/component"] === name
  );
  assert.equal(found.length, 1, `one ${kind} ${name}`);
  return found[0];
}

/** The container's literal env values, and the names of those that come from a Secret. */
function envOf(container: any): { values: Record<string, string>; secrets: string[] } {
  const values: Record<string, string> = {};
  const secrets: string[] = [];
  for (const e of container.env ?? []) {
    if (e.valueFrom?.secretKeyRef) secrets.push(e.name);
    else values[e.name] = String(e.value);
  }
  return { values, secrets };
}

/** A probe's path and its port (a container port's name resolved to its number). */
function probe(container: any, which: "livenessProbe" | "readinessProbe"): { path: string; port: number } {
  const get = container[which]?.httpGet;
  assert.ok(get, `${container.name} has an HTTP ${which}`);
  const port = typeof get.port === "number"
    ? get.port
    : container.ports.find((p: any) => p.name === get.port)?.containerPort;
  assert.ok(port, `${container.name}: the ${which}'s port ${get.port} is a container port`);
  return { path: get.path, port };
}

Deno.test({
  name:
    "Kubernetes example: the migrate Job, svc serve and the worker run as written, and answer their probes",
  ignore: IGNORED,
  fn: (t) =>
    withTempDir("svc-k8s-", async (dir) => {
      const objects = await manifests();
      const job = component(objects, "Job", "migrate");
      const serve = component(objects, "Deployment", "serve");
      const worker = component(objects, "Deployment", "worker");
      for (const o of [job, serve, worker]) {
        const [c] = o.spec.template.spec.containers;
        assert.equal(c.command, undefined, `${o.metadata.name}: the image's entrypoint runs`);
        assert.ok(
          envOf(c).secrets.includes("DATABASE_URL"),
          `${o.metadata.name}: DATABASE_URL from a Secret`,
        );
      }
      const schema = freshSchema("k8s");
      const svc = await placeBinary(`${dir}/image`, "/usr/local/bin/svc");
      const work = `${dir}/work`;
      await Deno.mkdir(work);
      const base = { DATABASE_URL, SERVICE_SCHEMA: schema, PATH: work };
      const client = createClient({ databaseUrl: DATABASE_URL, schema, maxConnections: 2 });
      try {
        await t.step("the migrate Job migrates, and does nothing when run again", async () => {
          assert.equal(job.spec.template.spec.restartPolicy, "Never");
          const [c] = job.spec.template.spec.containers;
          const opts = { cwd: work, env: base, timeoutMs: 120_000 };
          assert.match(
            (await mustRun(svc, c.args, opts)).stdout,
            new RegExp(`^migrated schema ${schema} from version 0`),
          );
          assert.match((await mustRun(svc, c.args, opts)).stdout, /already at version \d+; nothing to do/);
        });

        await t.step(
          "svc serve on svc serve's default port; its probe paths answer without the token",
          async () => {
            const [c] = serve.spec.template.spec.containers;
            const port = cliDefault("serve", "--port");
            assert.equal(c.args[0], "serve");
            assert.equal(Number(c.args[c.args.indexOf("--port") + 1]), port);
            const live = probe(c, "livenessProbe");
            const ready = probe(c, "readinessProbe");
            assert.equal(live.port, port);
            assert.equal(ready.port, port);
            const service = objects.find((o) =>
              o.kind === "Service" && o.metadata.name === serve.metadata.name
            );
            assert.equal(service?.spec.ports[0].targetPort, "http");
            const { secrets } = envOf(c);
            const env: Record<string, string> = {
              ...base,
              ...Object.fromEntries(
                secrets.filter((s) => s !== "DATABASE_URL").map((s) => [s, "ab".repeat(32)]),
              ),
            };
            assert.ok(
              "SERVICE_CALLBACK_HMAC_SECRET" in env && "SERVICE_AUTH_TOKEN" in env,
              JSON.stringify(secrets),
            );
            const proc = startService(svc, withFlag(withFlag(c.args, "--host", "127.0.0.1"), "--port", "0"), {
              cwd: work,
              env,
            });
            try {
              const line = await proc.waitLine(/svc serve: open http:\/\/127\.0\.0\.1:\d+\//);
              const url = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(line)![1];
              assert.match(line, /callbacks signed; .*token required/);
              for (const path of [live.path, ready.path]) {
                const r = await fetch(url + path);
                await r.body?.cancel();
                assert.equal(r.status, 200, `GET ${path}`);
              }
              const guarded = await fetch(`${url}/api/queues`);
              await guarded.body?.cancel();
              assert.equal(guarded.status, 401, "the token guards the API");
              assert.equal(await proc.stop(), 0, proc.lines.join("\n"));
            } finally {
              await proc.kill();
            }
          },
        );

        await t.step("the worker: probes on the health listener, a grace longer than the drain", async () => {
          const spec = worker.spec.template.spec;
          const [c] = spec.containers;
          const { values } = envOf(c);
          const [, host, listenPort] = /^(.*):(\d+)$/.exec(values.SERVICE_HEALTH_ADDR) ?? [];
          assert.equal(host, "0.0.0.0", "the listener binds the pod address");
          const live = probe(c, "livenessProbe");
          const ready = probe(c, "readinessProbe");
          assert.deepEqual([live.path, ready.path], ["/healthz", "/readyz"]);
          assert.equal(live.port, Number(listenPort));
          assert.equal(ready.port, Number(listenPort));
          const drainMs = Number(values.DRAIN_TIMEOUT_MS);
          assert.ok(drainMs > 0, "the drain timeout is given");
          // shutdown() may take the drain plus the stuck grace (5 s by default) for handlers that ignore their abort.
          assert.ok(
            spec.terminationGracePeriodSeconds * 1000 > drainMs + 5_000,
            `grace ${spec.terminationGracePeriodSeconds} s > drain ${drainMs} ms + stuck grace 5 s`,
          );

          const healthPort = closedPort();
          const proc = startService(Deno.execPath(), ["run", "-A", `${ROOT}/examples/kubernetes/worker.ts`], {
            cwd: work,
            env: {
              ...values,
              ...base,
              PATH: Deno.env.get("PATH") ?? "",
              SERVICE_HEALTH_ADDR: `127.0.0.1:${healthPort}`,
            },
          });
          try {
            await proc.waitLine(new RegExp(`^worker: started \\(drain timeout ${drainMs} ms\\)$`));
            const health = `http://127.0.0.1:${healthPort}`;
            const status = async (path: string) => {
              const r = await fetch(health + path);
              await r.body?.cancel();
              return r.status;
            };
            assert.equal(await status(live.path), 200);
            await waitFor(async () => (await status(ready.path)) === 200, 20_000, "/readyz 200");
            const job = await client.enqueue("example.wait", { ms: 3000 });
            await waitFor(
              async () => (await client.getJob(job.id))?.state === "running",
              20_000,
              "job running",
            );
            Deno.kill(proc.pid, "SIGTERM");
            await proc.waitLine(/^worker: SIGTERM, draining/);
            await waitFor(
              async () => (await status(ready.path)) === 503,
              5_000,
              "/readyz 503 while draining",
            );
            assert.equal(await status(live.path), 200, "/healthz stays 200 while draining");
            assert.equal(await proc.stop(), 0, proc.lines.join("\n"));
            assert.ok(proc.lines.includes("worker: stopped"), proc.lines.join("\n"));
            const done = (await client.getJob(job.id))!;
            assert.equal(done.state, "completed", "the running job finished within the drain");
            assert.deepEqual(done.result, { waited: 3000 });
          } finally {
            await proc.kill();
          }
        });
      } finally {
        await client.close();
        await dropSchema(schema);
      }
    }),
});
