/**
 * Carries the active trace context across process boundaries with the registered propagators (W3C Trace
 * Context `traceparent`/`tracestate` and W3C Baggage `baggage`): in bus message headers, and in MCP
 * `params._meta` as the OpenTelemetry MCP semantic conventions say ("Context propagation",
 * docs/gen-ai/mcp.md). With tracing off the propagators are no-ops: nothing is written, nothing is read.
 * A malformed incoming value is ignored (W3C Trace Context, "Processing Model"): the work starts a new trace.
 */
import { context, propagation, ROOT_CONTEXT, type Context, type TextMapGetter } from '@opentelemetry/api';
import type { BusHeaders } from '../bus/bus.js';

/** Reads string values only: `_meta` is client-supplied JSON, where a key may hold anything. */
const stringGetter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const value = carrier[key];
    return typeof value === 'string' ? value : undefined;
  },
};

/**
 * `fields` (bus message headers, or an MCP request's `_meta`) with the active context written into them:
 * `traceparent`, `tracestate`, `baggage`, replacing what was there under those keys. `fields` itself when
 * tracing adds nothing (off, or no active span).
 */
export function withTraceContext<T extends Record<string, unknown>>(fields: T | undefined): T | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return Object.keys(carrier).length === 0 ? fields : ({ ...fields, ...carrier } as T);
}

/** Runs `fn` with the context a received message's headers carry as the active context. */
export function runInHeaderContext<T>(headers: BusHeaders | undefined, fn: () => T): T {
  return context.with(extractTraceContext(headers), fn);
}

/**
 * The context `fields` carry (received bus headers, or an MCP request's `params._meta`), relative to `base`:
 * `base` itself when they carry none, or a malformed one.
 */
export function extractTraceContext(fields: unknown, base: Context = ROOT_CONTEXT): Context {
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) return base;
  return propagation.extract(base, fields as Record<string, unknown>, stringGetter);
}
