/**
 * What every log line learns from the active context: the trace and span ids of the active span (OpenTelemetry
 * "Trace Context in non-OTLP Log Formats": `trace_id`, `span_id`, `trace_flags`, lowercase hex), and the request
 * id and tenant of the work in progress, set where a request enters a service.
 */
import { context, createContextKey, isSpanContextValid, trace, type Context } from '@opentelemetry/api';

/** Request fields a service attaches to its log lines while it handles a request. */
export interface RequestLogFields {
  /** The JSON-RPC id of the client's request (mcp-front). */
  requestId?: string;
  /** Punk's id of one forwarded call (`runId` of the gateway and governance messages). */
  runId?: string;
  tenant?: string;
}

const REQUEST_FIELDS = createContextKey('punk request log fields');

/** `ctx` (default: the active context) with `fields` added to the request fields log lines carry. */
export function withRequestLogFields(fields: RequestLogFields, ctx: Context = context.active()): Context {
  const defined = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
  return ctx.setValue(REQUEST_FIELDS, { ...(ctx.getValue(REQUEST_FIELDS) as RequestLogFields | undefined), ...defined });
}

/**
 * The fields of the active context for a log line: `trace_id`, `span_id` and `trace_flags` when a valid span
 * is active (never with tracing off), and the request fields set with {@link withRequestLogFields}.
 */
export function activeLogFields(): Record<string, string> {
  const active = context.active();
  const fields: Record<string, string> = { ...(active.getValue(REQUEST_FIELDS) as RequestLogFields | undefined) };
  const span = trace.getSpanContext(active);
  if (span && isSpanContextValid(span)) {
    fields['trace_id'] = span.traceId;
    fields['span_id'] = span.spanId;
    fields['trace_flags'] = `0${span.traceFlags.toString(16)}`.slice(-2);
  }
  return fields;
}
