/**
 * Runs work inside a span: the span is the active one while the work runs (so bus hand-offs, upstream requests
 * and log lines carry it), ends when the work settles, and records a failure as `error.type` with status
 * ERROR (OpenTelemetry "Recording errors"). With tracing off the span is a no-op.
 */
import { context, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type SpanKind } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';
import { PunkError } from '../errors.js';
import { withRequestLogFields, type RequestLogFields } from './log-fields.js';

/** Instrumentation scope of every Punk span. */
export const TRACER_NAME = '@punk/lib';

/** How a span starts. */
export interface SpanStart {
  kind: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /** Parent context (default: the active one). */
  parent?: Context;
  /** Request fields log lines written inside the span carry. */
  logFields?: RequestLogFields;
  /** `error.type` of a thrown error, when the default ({@link recordFailure}) does not fit; undefined keeps the default. */
  errorType?: (error: unknown) => string | undefined;
}

/** The tracer of Punk's spans (the global provider's; a no-op one with tracing off). */
export function punkTracer() {
  return trace.getTracer(TRACER_NAME);
}

/**
 * Marks `span` failed: `error.type` (a `PunkError`'s code, else the error's class name) unless `type` names
 * it, and status ERROR with the error's message.
 */
export function recordFailure(span: Span, error: unknown, type?: string): void {
  const errorType = type ?? (error instanceof PunkError ? error.code : error instanceof Error ? error.name : '_OTHER');
  span.setAttribute(ATTR_ERROR_TYPE, errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/**
 * Runs `work` in a new span `name` (a child of `start.parent` or the active context), active while it runs.
 * `work` may set attributes on the span; a throw is recorded with {@link recordFailure} and rethrown.
 */
export async function inSpan<T>(name: string, start: SpanStart, work: (span: Span) => Promise<T>): Promise<T> {
  const parent = start.parent ?? context.active();
  const span = punkTracer().startSpan(
    name,
    { kind: start.kind, ...(start.attributes && { attributes: start.attributes }), ...(start.links && { links: start.links }) },
    parent,
  );
  const active = trace.setSpan(start.logFields ? withRequestLogFields(start.logFields, parent) : parent, span);
  try {
    return await context.with(active, () => work(span));
  } catch (error) {
    recordFailure(span, error, start.errorType?.(error));
    throw error;
  } finally {
    span.end();
  }
}
