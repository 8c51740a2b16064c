/**
 * The bus: the only way Punk's services talk to each other.
 *
 * One interface, two implementations: in-process (embedded mode, one process)
 * and NATS with JetStream (every replica count). Callers never see which one
 * they hold. Payloads are JSON values; they are encoded on send and decoded on
 * receipt, so nothing is shared by reference even in-process. Requests, replies,
 * broadcasts and appends may be as large as the bus's limit (`PUNK_MAX_RESULT_BYTES`,
 * default 32 MiB) on both; bucket values must fit one NATS message.
 *
 * Subject, stream, consumer and queue names are never spelled outside
 * `contracts.ts`.
 */
import { PunkError } from '../errors.js';

/**
 * Optional message headers. Both implementations write the active trace context into every request, publish
 * and append (W3C `traceparent`, `tracestate`, `baggage`; nothing with tracing off), and run responders and
 * subscribers in the context their message carries; durable consumers get it in `StreamMessage.headers`.
 */
export type BusHeaders = Record<string, string>;

/** A live subscription or responder; `unsubscribe` stops delivery. */
export interface BusSubscription {
  unsubscribe(): Promise<void>;
}

/** Options of a request. */
export interface RequestOptions {
  /** Deadline in milliseconds; past it the request rejects with `BusTimeout`. */
  timeoutMs: number;
  headers?: BusHeaders;
}

/** Options of a responder. */
export interface ServeOptions {
  /** Queue group: each request goes to one member of the group. */
  queue?: string;
}

/** What a responder or subscriber learns about a received message. */
export interface BusMessageInfo {
  subject: string;
  headers: BusHeaders;
  /**
   * True when the message comes from this process's own typed code (the in-process bus): the receiver need not
   * validate it, as the sender built it to its type (validation once, at the edge: messages off the network are
   * validated by their receiver; `receivedMessage` in contracts.ts).
   */
  local?: boolean;
}

/**
 * Answers requests on a subject. The returned value is the reply; a thrown
 * `PunkError` reaches the requester as a `PunkError` with the same code and
 * message; any other thrown value reaches it as `BusHandlerFailed`.
 */
export type RequestHandler = (data: unknown, info: BusMessageInfo) => Promise<unknown>;

/** Receives broadcast messages. Errors it throws are logged, never propagated. */
export type MessageHandler = (data: unknown, info: BusMessageInfo) => void | Promise<void>;

/** A message stored in a stream, as delivered to a durable consumer. */
export interface StreamMessage {
  /** Position in the stream, starting at 1. */
  seq: number;
  subject: string;
  /** The `msgId` it was appended with. */
  msgId: string;
  data: unknown;
  headers: BusHeaders;
  /** How many times it has been delivered to this consumer (1 on first delivery). */
  deliveryCount: number;
  /** True when it was appended by this process's own typed code, as {@link BusMessageInfo.local} says. */
  local?: boolean;
}

/** Result of a durable append. */
export interface AppendAck {
  /** Stream sequence of the stored message (of the earlier copy when `duplicate`). */
  seq: number;
  /** True when a message with the same `msgId` was already stored: nothing was stored twice. */
  duplicate: boolean;
}

/**
 * Handles a batch of stream messages. Resolving acknowledges every message of
 * the batch; throwing leaves them unacknowledged so they are delivered again
 * (after a back-off), in order.
 */
export type BatchHandler = (messages: StreamMessage[]) => Promise<void>;

/** Options of a durable consumer. */
export interface ConsumeOptions {
  /** Most messages handed to one handler call. */
  maxBatch?: number;
}

/** A running durable consumer. */
export interface BusConsumer {
  /**
   * Stops delivery; resolves once the handler call in progress, if any, has
   * finished. The in-process bus first delivers what its stream still holds,
   * since that stream does not outlive the process.
   */
  stop(): Promise<void>;
}

/** Description of a stream, created idempotently by `ensureStream`. */
export interface StreamConfig {
  name: string;
  subjects: string[];
  /** Window in milliseconds within which a repeated `msgId` is recognised as a duplicate. */
  duplicateWindowMs: number;
  /** Messages older than this are discarded, in milliseconds (kept until acknowledged when absent). */
  maxAgeMs?: number;
}

/** A key-value bucket, created idempotently by `keyValue`. */
export interface KvBucketConfig {
  name: string;
  /** Entries expire this long after their last write, in milliseconds; 0: they never expire. */
  ttlMs: number;
}

/** One stored value and its revision (for compare-and-set). */
export interface KvEntry {
  value: unknown;
  revision: number;
}

/** One change of a watched bucket. */
export type KvChange =
  /** The key holds `value` at `revision` (a live entry at the start of the watch, or a write). */
  | { operation: 'put'; key: string; value: unknown; revision: number }
  /**
   * The key no longer holds a value: it was deleted (`revision`: the bucket's revision of the delete), or it expired
   * (bucket time to live; no `revision`).
   */
  | { operation: 'delete'; key: string; revision?: number };

/**
 * Receives the changes of a watched bucket, one call at a time, in the order they happened. Errors it throws are
 * logged, never propagated: the next change is still delivered.
 */
export type KvWatchHandler = (change: KvChange) => void | Promise<void>;

/** A key-value bucket shared by every replica (NATS KV; a map in-process). */
export interface KvStore {
  /** The live value, or undefined when absent, deleted or expired. */
  get(key: string): Promise<KvEntry | undefined>;
  /** Writes a value (renewing its time to live); resolves with the new revision. */
  put(key: string, value: unknown): Promise<number>;
  /**
   * Writes only if the key holds no live value.
   * @throws PunkError `KvConflict` when it does.
   */
  create(key: string, value: unknown): Promise<number>;
  /**
   * Writes only if the key is still at `revision` (compare-and-set).
   * @throws PunkError `KvConflict` when another write came first.
   */
  update(key: string, value: unknown, revision: number): Promise<number>;
  /** Removes the key; a no-op when absent. */
  delete(key: string): Promise<void>;
  /** Every key holding a live value, in no particular order. */
  keys(): Promise<string[]>;
  /**
   * How many keys were written within the bucket's time to live, in one cheap read (no per-key reads):
   * live values plus, on NATS, deleted keys whose delete marker has not aged out yet (an upper bound).
   */
  size(): Promise<number>;
  /**
   * Watches the bucket: hands `handler` every live entry first (as `put`, oldest write first; the returned promise
   * resolves once they are all handled), then each later `put` and `delete` in order, including the `delete` of an
   * entry that expires. Over NATS the watch follows reconnects and resumes where it was; expiry is reported from
   * each entry's last write plus the bucket's time to live, as the server discards it. `unsubscribe` stops it.
   */
  watch(handler: KvWatchHandler): Promise<BusSubscription>;
}

/** Options of a stream read. */
export interface ReadStreamOptions {
  /** Only messages whose subject matches this pattern. */
  subject: string;
  /** Only messages after this stream sequence (0 for all). */
  afterSeq: number;
  /** Most messages returned (default 1000). */
  limit?: number;
}

/** The bus every Punk component depends on. */
export interface Bus {
  /**
   * Sends a request and waits for one reply.
   * @throws PunkError `BusTimeout` past `timeoutMs`, `BusNoResponders` when nobody serves the subject,
   *   `PayloadTooLarge` when the request or its reply is past the bus's limit (`PUNK_MAX_RESULT_BYTES`),
   *   or the responder's error (same code and message).
   */
  request(subject: string, data: unknown, options: RequestOptions): Promise<unknown>;
  /** Serves requests on a subject, optionally as one member of a queue group. */
  serve(subject: string, handler: RequestHandler, options?: ServeOptions): Promise<BusSubscription>;
  /**
   * Broadcasts a message to every subscriber of the subject (at most once, no acknowledgement).
   * @throws PunkError `PayloadTooLarge` past the bus's limit.
   */
  publish(subject: string, data: unknown, headers?: BusHeaders): Promise<void>;
  /**
   * Subscribes to a subject; `*` matches one token and `>` the rest, as in NATS.
   * With `queue`, each message goes to one member of the queue group instead of every subscriber.
   */
  subscribe(subject: string, handler: MessageHandler, options?: ServeOptions): Promise<BusSubscription>;
  /** Creates a stream if it does not exist; a no-op when it does. */
  ensureStream(config: StreamConfig): Promise<void>;
  /**
   * Appends a message to a stream and resolves once it is stored durably.
   * A repeated `msgId` within the stream's duplicate window is acknowledged
   * without being stored again.
   * @throws PunkError `BusStreamNotFound` when no stream captures the subject; `BusTimeout` when storage does not answer in time;
   *   `PayloadTooLarge` past the bus's limit.
   */
  append(subject: string, data: unknown, options: { msgId: string; headers?: BusHeaders; timeoutMs?: number }): Promise<AppendAck>;
  /**
   * Starts (or resumes) a durable consumer: every message appended to the stream
   * is handed to `handler` at least once, in order, until acknowledged.
   */
  consume(stream: string, durable: string, handler: BatchHandler, options?: ConsumeOptions): Promise<BusConsumer>;
  /**
   * Reads stored messages of a stream in order, without a durable consumer
   * (replay of SSE events after a `Last-Event-ID`).
   * @throws PunkError `BusStreamNotFound` when the stream does not exist.
   */
  readStream(stream: string, options: ReadStreamOptions): Promise<StreamMessage[]>;
  /** Opens (creating if needed) a key-value bucket. */
  keyValue(config: KvBucketConfig): Promise<KvStore>;
  /** True while the bus can carry messages (a NATS connection is up). */
  isConnected(): boolean;
  /** Stops every subscription and consumer and releases the connection. */
  close(): Promise<void>;
}

/** Default of `PUNK_MAX_RESULT_BYTES`, the largest payload the bus carries: 32 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 32 * 1024 * 1024;

/**
 * Room the bus carries above its limit for what it wraps a payload in (a call's reply around the tool result, a
 * reply's `{ok, body}`, a stored event around its message), in bytes. The gateway checks a result against the limit
 * itself (`oversizedBy`), so a result it lets through, even one byte under the limit, is never refused again on its
 * way back in its envelope (a client would get a protocol error for a call the ledger records as a success).
 */
export const ENVELOPE_ALLOWANCE_BYTES = 64 * 1024;

/**
 * The refusal of a payload past the bus's limit: code `PayloadTooLarge`, a sentence naming what, its size, the
 * limit and the variable that sets it, details `{ bytes, limit }`.
 */
export function payloadTooLarge(what: string, bytes: number, limit: number): PunkError {
  return new PunkError(
    'PayloadTooLarge',
    `${what} is ${bytes} bytes, past the limit of ${limit} bytes (PUNK_MAX_RESULT_BYTES); raise PUNK_MAX_RESULT_BYTES to carry it`,
    { bytes, limit },
  );
}

/**
 * The JSON text of a bus payload, checked against `limit` (UTF-8 bytes) and the {@link ENVELOPE_ALLOWANCE_BYTES}
 * above it.
 * @throws PunkError `BusInvalidPayload` when `data` is no JSON value, `PayloadTooLarge` ({@link payloadTooLarge},
 *   naming `limit`) past `limit` plus the allowance.
 */
export function encodePayload(data: unknown, limit: number, what: string): string {
  const text = JSON.stringify(data);
  if (text === undefined) throw new PunkError('BusInvalidPayload', 'bus payload must be a JSON value');
  const carried = limit + ENVELOPE_ALLOWANCE_BYTES;
  // A UTF-8 byte is at most 3 per UTF-16 unit: most payloads are known to fit without counting.
  if (text.length * 3 > carried) {
    const bytes = Buffer.byteLength(text);
    if (bytes > carried) throw payloadTooLarge(what, bytes, limit);
  }
  return text;
}

/**
 * The size in UTF-8 bytes of a value's JSON when it is past `limit`, else undefined: lets a responder answer an
 * oversized result with an error of its own before the bus refuses it.
 */
export function oversizedBy(data: unknown, limit: number): number | undefined {
  const text = JSON.stringify(data) ?? '';
  if (text.length * 3 <= limit) return undefined;
  const bytes = Buffer.byteLength(text);
  return bytes > limit ? bytes : undefined;
}

/** Tests a NATS-style subject pattern (`*` one token, `>` one or more trailing tokens) against a subject. */
export function subjectMatches(pattern: string, subject: string): boolean {
  // A literal pattern (most subscriptions) matches only itself: no tokens to compare.
  if (!pattern.includes('*') && !pattern.includes('>')) return pattern === subject;
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === '>') return s.length > i;
    if (i >= s.length) return false;
    if (token !== '*' && token !== s[i]) return false;
  }
  return p.length === s.length;
}
