/**
 * Metrics of the bus as its users see it: request/reply latency and failures per subject family, durable
 * appends, and requests being answered. Recorded by {@link TrackedBus} (service/tracked-bus.ts), which every
 * service process and `punk up` talk through.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { subjectMatches } from '../bus/bus.js';
import { subjects } from '../contracts.js';
import { errorTypeOf, FAST_BUCKETS, NO_ERROR, OTHER, secondsSince } from './labels.js';

/** Stands for one id token while the subject patterns are derived from `subjects` (letters only: survives `subjectToken`). */
const ID_TOKEN = 'punkmetricsid';

/**
 * Every subject of contracts.ts as a NATS pattern, an id token replaced by `*`
 * (`punk.client-request.*.answer`, `punk.gateway.instance.*.call`, …): the bounded `subject` label values.
 */
const SUBJECT_FAMILIES: readonly string[] = Object.values(subjects).map((subject) =>
  typeof subject === 'string' ? subject : subject(ID_TOKEN, ID_TOKEN).replaceAll(ID_TOKEN, '*'),
);

/**
 * The subject family of a subject: the pattern of contracts.ts it matches with its ids as `*`
 * (`punk.client-request.7f…/answer` → `punk.client-request.*.answer`), or `_OTHER` for a subject Punk does not define.
 */
export function subjectFamily(subject: string): string {
  return SUBJECT_FAMILIES.find((pattern) => subjectMatches(pattern, subject)) ?? OTHER;
}

/**
 * `punk_bus_request_duration_seconds` (histogram, seconds; labels `subject`: the subject family, `error_type`:
 * empty on success, else the PunkError code such as `BusTimeout`, `BusNoResponders` or the responder's own code):
 * one bus request from send to reply, as the requester saw it. Errors and timeouts are its series with an `error_type`.
 */
export const busRequestDuration = new Histogram({
  name: 'punk_bus_request_duration_seconds',
  help: 'Duration of bus request/reply calls as the requester saw them, by subject family and error type (empty on success).',
  labelNames: ['subject', 'error_type'] as const,
  buckets: [...FAST_BUCKETS],
});

/**
 * `punk_bus_append_duration_seconds` (histogram, seconds; labels `subject`, `error_type`): one durable append to a
 * stream (the ledger's events, 2025 sessions' SSE events) until the stream acknowledged it.
 */
export const busAppendDuration = new Histogram({
  name: 'punk_bus_append_duration_seconds',
  help: 'Duration of durable stream appends until acknowledged, by subject family and error type (empty on success).',
  labelNames: ['subject', 'error_type'] as const,
  buckets: [...FAST_BUCKETS],
});

/** `punk_bus_served_requests_in_flight` (gauge): bus requests this process received and has not answered yet. */
export const busServedInFlight = new Gauge({
  name: 'punk_bus_served_requests_in_flight',
  help: 'Bus requests this process is answering now (received, not yet replied to).',
});

/**
 * `punk_bus_stream_pending_messages` (gauge; label `stream`): messages of an in-process stream (`punk up`) appended and
 * not yet acknowledged by its running consumers, i.e. for the ledger stream, events not yet committed. Each such
 * append is still waiting: its caller has no answer yet.
 */
export const streamPending = new Gauge({
  name: 'punk_bus_stream_pending_messages',
  help: 'Messages of an in-process stream appended and not yet acknowledged by its consumers (ledger: events not yet committed).',
  labelNames: ['stream'] as const,
});

/** `punk_bus_stream_pending_peak_messages` (gauge; label `stream`): the most messages ever pending at once in an in-process stream since the process started. */
export const streamPendingPeak = new Gauge({
  name: 'punk_bus_stream_pending_peak_messages',
  help: 'The most messages of an in-process stream ever pending at once (appended, not yet acknowledged) since start.',
  labelNames: ['stream'] as const,
});

/** `punk_bus_stream_pending_limit_messages` (gauge; label `stream`): the bound on pending messages of an in-process stream (`PUNK_LEDGER_MAX_PENDING`). */
export const streamPendingLimit = new Gauge({
  name: 'punk_bus_stream_pending_limit_messages',
  help: 'Most messages of an in-process stream that may be pending at once; appends past it wait (PUNK_LEDGER_MAX_PENDING).',
  labelNames: ['stream'] as const,
});

/** `punk_bus_stream_append_waits_total` (counter; label `stream`): appends to an in-process stream that waited for room (back-pressure). */
export const streamAppendWaits = new Counter({
  name: 'punk_bus_stream_append_waits_total',
  help: 'Appends to an in-process stream that waited for room because the pending bound was reached (back-pressure).',
  labelNames: ['stream'] as const,
});

/**
 * Times one bus operation (a request or an append) into `histogram`, labelled with the subject family and, when
 * it rejects, its error type. Returns the same promise.
 */
export function observeBusCall<T>(histogram: typeof busRequestDuration, subject: string, call: Promise<T>): Promise<T> {
  const startedAt = performance.now();
  const family = subjectFamily(subject);
  return call.then(
    (value) => {
      histogram.observe({ subject: family, error_type: NO_ERROR }, secondsSince(startedAt));
      return value;
    },
    (error: unknown) => {
      histogram.observe({ subject: family, error_type: errorTypeOf(error) }, secondsSince(startedAt));
      throw error;
    },
  );
}
