/**
 * The ledger's spans: one CONSUMER span `ledger persist {event type}` per stream message of a batch, child of
 * the context the message was appended in (its headers: the span of governance or the gateway that produced
 * the event), covering the batch's write to Postgres (OpenTelemetry messaging conventions, "process" spans).
 */
import { context, SpanKind, trace } from '@opentelemetry/api';
import {
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_TYPE,
} from '@opentelemetry/semantic-conventions/incubating';
import type { StreamMessage } from '../bus/bus.js';
import { PUNK_TENANT } from './mcp-attributes.js';
import { extractTraceContext } from './propagation.js';
import { punkTracer, recordFailure } from './spans.js';

/** Punk's attribute: the ledger event's `type` (e.g. `tool.called`). */
export const PUNK_LEDGER_EVENT_TYPE = 'punk.ledger.event_type';

/**
 * Runs `write` (the durable write of `messages`) inside one span per message; a throw marks every span failed
 * and is rethrown. With a single message its span is active during the write, so the write's log lines carry it.
 */
export async function traceLedgerBatch(messages: StreamMessage[], write: () => Promise<void>): Promise<void> {
  const spans = messages.map((message) => {
    const event = (typeof message.data === 'object' && message.data !== null ? message.data : {}) as { type?: unknown; tenant?: unknown };
    const type = typeof event.type === 'string' ? event.type : 'unknown';
    const attributes = {
      [ATTR_MESSAGING_OPERATION_TYPE]: 'process',
      [ATTR_MESSAGING_DESTINATION_NAME]: message.subject,
      [ATTR_MESSAGING_MESSAGE_ID]: message.msgId,
      [PUNK_LEDGER_EVENT_TYPE]: type,
      ...(typeof event.tenant === 'string' && { [PUNK_TENANT]: event.tenant }),
    };
    return punkTracer().startSpan(`ledger persist ${type}`, { kind: SpanKind.CONSUMER, attributes }, extractTraceContext(message.headers));
  });
  try {
    await (spans.length === 1 ? context.with(trace.setSpan(context.active(), spans[0]!), write) : write());
  } catch (error) {
    for (const span of spans) recordFailure(span, error);
    throw error;
  } finally {
    for (const span of spans) span.end();
  }
}
