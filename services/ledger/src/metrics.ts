/**
 * The ledger's Prometheus metrics (docs/observability.md "Metrics"): events durably written by type, how long
 * after they happened they were written (append lag), and messages set aside as malformed.
 */
import type { LedgerEvent } from '@punk/lib';
import { Counter, Histogram } from 'prom-client';

/**
 * `punk_ledger_events_appended_total` (counter; label `type`: the ledger event type, e.g. `tool.called`,
 * `governance.decision`): events newly written to `ledger.events` (committed; a redelivered duplicate is not
 * counted again). Its rate is the append rate.
 */
export const eventsAppended = new Counter({
  name: 'punk_ledger_events_appended_total',
  help: 'Ledger events newly written to the database (committed), by event type.',
  labelNames: ['type'] as const,
});

/**
 * `punk_ledger_append_lag_seconds` (histogram, seconds): from an event's `occurredAt` to the commit that stored it
 * (bus transit, batching and the transaction together; clock skew between hosts included).
 */
export const appendLag = new Histogram({
  name: 'punk_ledger_append_lag_seconds',
  help: "Seconds from a ledger event's occurredAt to the commit that stored it.",
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
});

/** `punk_ledger_rejected_messages_total` (counter): stream messages newly recorded in `ledger.rejected_messages` (malformed or refused by the database). */
export const rejectedMessages = new Counter({
  name: 'punk_ledger_rejected_messages_total',
  help: 'Ledger stream messages set aside in ledger.rejected_messages (malformed, or refused by the database).',
});

/** Records one committed append: its new events (by type, with their lag from `occurredAt` to now) and its newly rejected messages. */
export function recordAppend(events: readonly LedgerEvent[], rejected: number): void {
  const now = Date.now();
  for (const event of events) {
    eventsAppended.inc({ type: event.type });
    // A clock behind the event's host would give a negative lag: count it as none.
    appendLag.observe(Math.max(0, now - Date.parse(event.occurredAt)) / 1000);
  }
  if (rejected > 0) rejectedMessages.inc(rejected);
}
