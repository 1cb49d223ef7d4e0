/**
 * Traces: a producer's span → the attempt's span (its parent is the context stored at enqueue) → the
 * HTTP function request's span, whose `traceparent` the function endpoint (a real HTTP server on
 * 127.0.0.1) receives. A tiny tracer provider and context manager of the test are registered through
 * `@opentelemetry/api` (no SDK).
 */
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import {
  type Context,
  context,
  type ContextManager,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  type SpanOptions,
  trace,
  type Tracer,
  type TracerProvider,
} from "npm:@opentelemetry/api@1.10.0";
import { testClient, waitFor } from "../helpers/db.ts";
import { startWorker } from "../helpers/worker.ts";
import { serveTest } from "../helpers/http.ts";

/** A span the test tracer made. */
interface Recorded {
  name: string;
  context: SpanContext;
  parent: SpanContext | undefined;
  attributes: Record<string, unknown>;
  ended: boolean;
  status?: { code: number; message?: string };
}

const spans: Recorded[] = [];
const hex = (bytes: number) =>
  [...crypto.getRandomValues(new Uint8Array(bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");

class TestTracer implements Tracer {
  startSpan(name: string, options: SpanOptions = {}, ctx: Context = context.active()): Span {
    const parent = trace.getSpanContext(ctx);
    const rec: Recorded = {
      name,
      context: { traceId: parent?.traceId ?? hex(16), spanId: hex(8), traceFlags: 1 },
      parent,
      attributes: { ...options.attributes },
      ended: false,
    };
    spans.push(rec);
    const span: Span = {
      spanContext: () => rec.context,
      setAttribute: (k, v) => (rec.attributes[k] = v, span),
      setAttributes: (a) => (Object.assign(rec.attributes, a), span),
      addEvent: () => span,
      addLink: () => span,
      addLinks: () => span,
      setStatus: (s) => (rec.status = s, span),
      updateName: (n) => (rec.name = n, span),
      end: () => void (rec.ended = true),
      isRecording: () => !rec.ended,
      recordException: () => {},
    };
    return span;
  }
  // deno-lint-ignore no-explicit-any
  startActiveSpan(name: string, ...args: any[]): any {
    const fn = args[args.length - 1];
    const span = this.startSpan(name, typeof args[0] === "object" ? args[0] : {});
    return context.with(trace.setSpan(context.active(), span), () => fn(span));
  }
}

class TestProvider implements TracerProvider {
  readonly tracer = new TestTracer();
  getTracer(): Tracer {
    return this.tracer;
  }
}

/** The context manager an SDK would register (AsyncLocalStorage). */
class AlsContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

// Registered once for this test file's process.
assert.ok(trace.setGlobalTracerProvider(new TestProvider()), "no other tracer provider in this process");
assert.ok(context.setGlobalContextManager(new AlsContextManager()), "no other context manager");

Deno.test("traces: producer span → attempt span → the function request's traceparent", async () => {
  const { client, drop } = await testClient();
  let seen: string | null = null;
  const fn = serveTest((req) => {
    seen = req.headers.get("traceparent");
    return new Response(null, { status: 202 });
  });
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const kind = "traced_fn";
    w = await startWorker(client, {
      queues: { traced: { maxWorkers: 2 } },
      httpWorkers: {
        [kind]: {
          mode: "async",
          url: `${fn.url}/run?token=secret`,
          callbackBaseUrl: "http://127.0.0.1:9",
        },
      },
    });
    const producer = new TestTracer().startSpan("producer");
    const job = await context.with(
      trace.setSpan(ROOT_CONTEXT, producer),
      () => client.enqueue(kind, { n: 1 }, { queue: "traced" }),
    );
    producer.end();
    await waitFor(() => seen !== null, 15_000, "the function request");

    const p = producer.spanContext();
    const attempt = (await waitFor(() =>
      spans.find((s) => s.name === `svc.job ${kind}` && s.ended), 15_000))!;
    assert.equal(attempt.parent?.spanId, p.spanId, "the attempt's parent is the producer's span");
    assert.equal(attempt.parent?.traceId, p.traceId);
    assert.equal(attempt.parent?.isRemote, true, "restored from the trace_context column");
    assert.deepEqual(attempt.attributes, {
      "svc.job.kind": kind,
      "svc.job.queue": "traced",
      "svc.job.id": job.id,
      "svc.job.attempt": 1,
    });
    const request = spans.find((s) => s.name === "POST" && s.parent?.spanId === attempt.context.spanId);
    assert.ok(request, "a request span, child of the attempt's");
    assert.equal(request.attributes["url.full"], `${fn.url}/run`, "no query string in the span");
    assert.equal(request.attributes["http.response.status_code"], 202);
    assert.equal(
      seen,
      `00-${p.traceId}-${request.context.spanId}-01`,
      "the function got the request's traceparent",
    );
  } finally {
    await w?.stop();
    await fn.close();
    await drop();
  }
});

Deno.test("traces: an explicit traceparent option wins; a handler sees its attempt's traceparent", async () => {
  const { client, drop } = await testClient();
  let w: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    const given = `00-${hex(16)}-${hex(8)}-01`;
    let inHandler: string | null = null;
    let active: SpanContext | undefined;
    w = await startWorker(client, {
      handlers: {
        traced_local: (_job, ctx) => {
          inHandler = ctx.traceparent;
          active = trace.getSpanContext(context.active());
          return 1;
        },
      },
    });
    const job = await client.enqueue("traced_local", {}, { traceparent: given });
    await waitFor(async () => (await client.getJob(job.id))?.state === "completed", 15_000);
    const attempt = spans.find((s) =>
      s.name === "svc.job traced_local" && s.attributes["svc.job.id"] === job.id
    )!;
    assert.equal(`00-${attempt.parent!.traceId}-${attempt.parent!.spanId}-01`, given);
    assert.equal(inHandler, `00-${attempt.context.traceId}-${attempt.context.spanId}-01`);
    assert.equal(active?.spanId, attempt.context.spanId, "the handler runs in the attempt's context");
    await assert.rejects(() => client.enqueue("x", {}, { traceparent: "00-zz" }), /traceparent/);
  } finally {
    await w?.stop();
    await drop();
  }
});
