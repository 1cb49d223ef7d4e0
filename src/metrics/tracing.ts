/**
 * Traces through `@opentelemetry/api` only (no SDK dependency): the producer's context is captured at
 * enqueue as a W3C `traceparent` (the `trace_context` column), each attempt runs in a span whose parent
 * is that context, and the HTTP worker sends the `traceparent` of its request span to the function
 * endpoint. With no tracer provider registered the spans record nothing, and a producer's context still
 * reaches the function endpoint (the API's non-recording spans carry their parent's context).
 */
import {
  type Context,
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from "npm:@opentelemetry/api@1.10.0";
import type { Job } from "../types.ts";
import { describeThrown } from "../describe.ts";
import { storableText } from "../validation.ts";

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The tracer of svc (the global provider's, looked up when a span starts). */
export function tracer(): Tracer {
  return trace.getTracer("svc");
}

/** The provider the API delegates to while none is registered. */
const NO_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * Whether a tracer provider is registered with the API now. Without one every span is a non-recording span
 * that carries only its parent's context, so an attempt whose job has no producer context needs no span.
 */
export function tracerRegistered(): boolean {
  const p = trace.getTracerProvider();
  return !(p instanceof ProxyTracerProvider) || p.getDelegate() !== NO_PROVIDER;
}

/** A span context as a W3C traceparent. */
export function formatTraceparent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** The traceparent of a context's span, or null when it has no valid one. */
export function traceparentOf(ctx: Context): string | null {
  const sc = trace.getSpanContext(ctx);
  return sc && isSpanContextValid(sc) ? formatTraceparent(sc) : null;
}

/** The traceparent of the active span (a producer's), or null. */
export function activeTraceparent(): string | null {
  return traceparentOf(context.active());
}

/** A context whose (remote) span is the one a traceparent names; the root context when it names none. */
export function contextOf(traceparent: string | null | undefined): Context {
  const m = traceparent ? TRACEPARENT.exec(traceparent) : null;
  if (!m || m[1] === "ff") return ROOT_CONTEXT;
  const sc: SpanContext = { traceId: m[2], spanId: m[3], traceFlags: parseInt(m[4], 16) & 1, isRemote: true };
  return isSpanContextValid(sc) ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

/** An attempt's span and the context handlers run in. */
export interface AttemptTrace {
  span: Span;
  context: Context;
  /** The span's traceparent (the producer's when nothing records), or null. */
  traceparent: string | null;
}

/** Starts the span of an attempt, child of the context captured at enqueue. */
export function startAttemptSpan(job: Job, kindLabel: string): AttemptTrace {
  const parent = contextOf(job.traceContext);
  const span = tracer().startSpan(`svc.job ${kindLabel}`, {
    kind: SpanKind.CONSUMER,
    attributes: {
      "svc.job.kind": kindLabel,
      "svc.job.queue": job.queue,
      "svc.job.id": job.id,
      "svc.job.attempt": job.attempt,
    },
  }, parent);
  const ctx = trace.setSpan(parent, span);
  return { span, context: ctx, traceparent: traceparentOf(ctx) };
}

/** Ends an attempt's span with its outcome: `error` is whatever the handler threw (any value). */
export function endAttemptSpan(t: AttemptTrace, failed: boolean, error?: unknown): void {
  if (failed) {
    t.span.setStatus({ code: SpanStatusCode.ERROR, message: storableText(describeThrown(error), 4096) });
  }
  t.span.end();
}

/** The contexts of attempts by their handler context (for the HTTP worker's request span). */
const attemptContexts = new WeakMap<object, Context>();

/** Remembers the attempt context of a handler context. */
export function bindAttemptContext(handlerCtx: object, ctx: Context): void {
  attemptContexts.set(handlerCtx, ctx);
}

/** The attempt context of a handler context (the root context when none was bound). */
export function attemptContext(handlerCtx: object): Context {
  return attemptContexts.get(handlerCtx) ?? ROOT_CONTEXT;
}

/** Runs `fn` with `ctx` active (for spans a handler starts; needs a context manager, as SDKs register). */
export function withContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}

/** Starts the span of an HTTP function request, child of the attempt's span. */
export function startRequestSpan(
  parent: Context,
  url: string,
  job: Job,
): { span: Span; traceparent: string | null } {
  const span = tracer().startSpan("POST", {
    kind: SpanKind.CLIENT,
    attributes: { "http.request.method": "POST", "url.full": url, "svc.job.id": job.id },
  }, parent);
  return { span, traceparent: traceparentOf(trace.setSpan(parent, span)) };
}

/** Ends a request span: the response status, or the error when there was no response. */
export function endRequestSpan(span: Span, status: number | null, error?: string): void {
  if (status !== null) span.setAttribute("http.response.status_code", status);
  if (error !== undefined || (status !== null && status >= 400)) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error ?? `HTTP ${status}` });
  }
  span.end();
}
