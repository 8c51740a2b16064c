import { join } from 'node:path';
import { PunkError } from '../errors.js';
import type { Logger } from '../log.js';
import { streamAppendWaits, streamPending, streamPendingLimit, streamPendingPeak } from '../metrics/bus.js';
import { copyJsonValue } from './json-copy.js';
import { StreamJournal } from './stream-journal.js';
import { runInHeaderContext, withTraceContext } from '../tracing/propagation.js';
import {
  DEFAULT_MAX_PAYLOAD_BYTES,
  encodePayload,
  subjectMatches,
  type AppendAck,
  type BatchHandler,
  type Bus,
  type BusConsumer,
  type BusHeaders,
  type BusSubscription,
  type ConsumeOptions,
  type KvBucketConfig,
  type KvChange,
  type KvEntry,
  type KvStore,
  type KvWatchHandler,
  type ReadStreamOptions,
  type MessageHandler,
  type RequestHandler,
  type RequestOptions,
  type ServeOptions,
  type StreamConfig,
  type StreamMessage,
} from './bus.js';

interface Responder {
  subject: string;
  queue: string | undefined;
  handler: RequestHandler;
}

interface Subscriber {
  pattern: string;
  queue: string | undefined;
  handler: MessageHandler;
}

interface StoredMessage {
  seq: number;
  subject: string;
  msgId: string;
  payload: string;
  /** The value appended by this process (delivered as it is, without a parse of `payload`); absent for a journal's replay. */
  value?: unknown;
  headers: BusHeaders;
  storedAt: number;
}

interface MemoryStream {
  config: StreamConfig;
  messages: StoredMessage[];
  lastSeq: number;
  /** msgId -> [seq, storedAt] within the duplicate window. */
  recentIds: Map<string, { seq: number; storedAt: number }>;
  consumers: Map<string, MemoryConsumerState>;
  /** Appends waiting for every running consumer to acknowledge their message, in `seq` order of arrival. */
  ackWaiters: AckWaiter[];
  /** Appends waiting for room below `maxPending`, first come first served. */
  roomWaiters: Array<() => void>;
  /** The most messages ever pending at once (appended, not yet acknowledged by every running consumer). */
  peakPending: number;
  /** With `journalDir`: the file every append is written to before it resolves (stream-journal.ts). */
  journal: StreamJournal | undefined;
  /** Up to this sequence the consumers hand over at once, without a group-commit wait ({@link MemoryBus.caughtUp}). */
  flushUntil: number;
}

interface AckWaiter {
  seq: number;
  resolve(): void;
  reject(error: PunkError): void;
}

interface MemoryConsumerState {
  /** Highest acknowledged sequence. */
  ackFloor: number;
  deliveries: Map<number, number>;
  running: boolean;
  /** Set by stop(): deliver what the stream holds, then end. */
  draining: boolean;
  wake: (() => void) | undefined;
  loop: Promise<void> | undefined;
}

const REDELIVERY_BACKOFF_MS = [100, 250, 500, 1000, 2000, 5000];
const DRAIN_TIMEOUT_MS = 10_000;
/** Default of {@link MemoryBusOptions.maxPending}. */
export const DEFAULT_MAX_PENDING = 1000;
/** How long an append waits for room and for its acknowledgement unless it passes `timeoutMs`, in milliseconds. */
const DEFAULT_APPEND_TIMEOUT_MS = 30_000;

/** Options of the in-process bus. */
export interface MemoryBusOptions {
  /**
   * Most messages of one stream that may be appended and not yet acknowledged by its running consumers (default
   * {@link DEFAULT_MAX_PENDING}); an append past it waits for room (back-pressure), so nothing piles up in memory.
   */
  maxPending?: number;
  /**
   * A directory (`punk up`'s data directory) where each stream keeps a journal, `<stream>.journal`: an append then
   * resolves once its message is written there, without waiting for the consumers, and the next start hands the
   * messages no consumer acknowledged to them again (stream-journal.ts). Without it, an append to a consumed stream
   * resolves once the consumers acknowledged it (unless `ephemeral`).
   */
  journalDir?: string | undefined;
  /**
   * With `journalDir`: how long (ms) a consumer of a journaled stream waits, once a message is pending, for more to
   * hand over in the same batch (default {@link DEFAULT_GROUP_COMMIT_MS}; 0 hands over at once). Appends resolve at
   * their journal write, so the wait delays no caller: it makes the ledger's transactions fewer and larger.
   */
  groupCommitMs?: number;
  /**
   * Without `journalDir`, for a process whose streams keep nothing past it (`punk up --ephemeral`): an append resolves
   * once the stream holds it, as with a journal, instead of once its consumers acknowledged it, and the consumers
   * group-commit as they do with a journal. A reader that must see every earlier append awaits {@link MemoryBus.caughtUp}.
   */
  ephemeral?: boolean;
  /** Largest request, reply, broadcast or stored message, as JSON in UTF-8 bytes (`PUNK_MAX_RESULT_BYTES`, default 32 MiB). */
  maxPayloadBytes?: number;
}

/**
 * Message ids an in-process stream remembers for duplicate detection, at most (besides its duplicate window): the
 * ledger's 10 minutes at a few hundred calls a second would otherwise hold hundreds of thousands. A repeat comes
 * from a retried append, moments after the first; the ledger dedupes by event id in its table as well.
 */
const MAX_RECENT_IDS = 10_000;

/**
 * Group-commit window of a journaled stream's consumer (ms). A transaction of the embedded ledger costs about 2 ms of
 * CPU whatever it holds, and each event about 65 µs more (bench/ledger-append.mjs): at 900 calls a second (two
 * events each), 20 ms made batches of about 18 calls and 230 µs of CPU per call, 100 ms makes about 90 and 150 µs.
 * The journal holds the events meanwhile, so the window delays no caller, only when runs show in the ledger's API.
 */
export const DEFAULT_GROUP_COMMIT_MS = 100;

/** Wire form of a payload the in-process bus keeps (stream messages, bucket entries). */
function encode(data: unknown): string {
  const text = JSON.stringify(data);
  if (text === undefined) throw new PunkError('BusInvalidPayload', 'bus payload must be a JSON value');
  return text;
}

/**
 * The in-process bus of embedded mode: one process, no network. It keeps the
 * semantics of the NATS implementation (queue groups, deadlines, durable
 * streams with duplicate detection and at-least-once consumers) so callers
 * behave the same on both, the NATS bus's payload limit among them (a payload past
 * `maxPayloadBytes` is refused with `PayloadTooLarge`; an oversized reply reaches
 * the requester as that error at once). Stream contents live in memory only, so "stored
 * durably" means "handled by the stream's consumers": while a stream has a
 * running durable consumer, `append` resolves once every running consumer has
 * acknowledged the message (the ledger's acknowledges after its commit), and
 * at most `maxPending` messages wait for that at once; further appends wait
 * for room. Appends made meanwhile are handed to the consumer together, up to
 * its `maxBatch` (one transaction for all of them: group commit). A stream
 * without a running consumer acknowledges at once, as before.
 */
export class MemoryBus implements Bus {
  private readonly responders: Responder[] = [];
  private readonly subscribers: Subscriber[] = [];
  private readonly streams = new Map<string, MemoryStream>();
  private readonly queueCursor = new Map<string, number>();
  private readonly buckets = new Map<string, MemoryKv>();
  private closed = false;
  private readonly maxPayloadBytes: number;
  private readonly maxPending: number;
  private readonly journalDir: string | undefined;
  private readonly groupCommitMs: number;
  private readonly ephemeral: boolean;

  constructor(
    private readonly log?: Logger,
    options: MemoryBusOptions = {},
  ) {
    this.maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
    this.maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
    this.journalDir = options.journalDir;
    this.groupCommitMs = options.groupCommitMs ?? DEFAULT_GROUP_COMMIT_MS;
    this.ephemeral = options.ephemeral ?? false;
    if (!Number.isInteger(this.maxPending) || this.maxPending < 1) {
      throw new PunkError(
        'InvalidConfig',
        `maxPending of the in-process bus must be a positive integer, got ${String(options.maxPending)}`,
      );
    }
  }

  async request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    this.assertOpen();
    const payload = copyJsonValue(data, this.maxPayloadBytes, `the request on ${subject}`);
    const candidates = this.responders.filter((r) => r.subject === subject);
    if (candidates.length === 0) {
      throw new PunkError('BusNoResponders', `no service answers requests on ${subject}`);
    }
    const responder = this.pickResponder(subject, candidates);
    const info = { subject, headers: { ...withTraceContext(options.headers) }, local: true };
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new PunkError('BusTimeout', `request on ${subject} got no reply within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
    });
    const reply = (async () => {
      try {
        const result = await runInHeaderContext(info.headers, () => responder.handler(payload, info));
        return { ok: true as const, body: result === undefined ? null : this.copyReply(result, subject) };
      } catch (error) {
        if (error instanceof PunkError) {
          return { ok: false as const, code: error.code, message: error.message, details: error.details };
        }
        this.log?.error({ err: error, subject }, 'bus request handler failed');
        return {
          ok: false as const,
          code: 'BusHandlerFailed',
          message: `the service answering ${subject} failed: ${(error as Error)?.message ?? String(error)}`,
          details: undefined,
        };
      }
    })();
    try {
      const outcome = await Promise.race([reply, deadline]);
      if (outcome.ok) return outcome.body;
      throw new PunkError(outcome.code, outcome.message, outcome.details);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A copy of a reply; an oversized one is logged and refused, so its requester gets the error at once. */
  private copyReply(result: unknown, subject: string): unknown {
    try {
      return copyJsonValue(result, this.maxPayloadBytes, `the reply on ${subject}`);
    } catch (error) {
      this.log?.error({ err: (error as Error).message, subject }, 'could not send a bus reply');
      throw error;
    }
  }

  async serve(subject: string, handler: RequestHandler, options: ServeOptions = {}): Promise<BusSubscription> {
    this.assertOpen();
    const responder: Responder = { subject, queue: options.queue, handler };
    this.responders.push(responder);
    return { unsubscribe: async () => remove(this.responders, responder) };
  }

  async publish(subject: string, data: unknown, published?: BusHeaders): Promise<void> {
    this.assertOpen();
    const payload = copyJsonValue(data, this.maxPayloadBytes, `the message on ${subject}`);
    const headers = withTraceContext(published) ?? {};
    const matching = this.subscribers.filter((s) => subjectMatches(s.pattern, subject));
    for (const subscriber of this.oneOfEachQueue(subject, matching)) {
      // Delivery is asynchronous, as over the network: the publisher never waits for subscribers.
      queueMicrotask(() => {
        Promise.resolve()
          .then(() =>
            runInHeaderContext(headers, () =>
              subscriber.handler(copyJsonValue(payload), { subject, headers: { ...headers }, local: true }),
            ),
          )
          .catch((error: unknown) => this.log?.error({ err: error, subject }, 'bus subscriber failed'));
      });
    }
  }

  async subscribe(subject: string, handler: MessageHandler, options: ServeOptions = {}): Promise<BusSubscription> {
    this.assertOpen();
    const subscriber: Subscriber = { pattern: subject, queue: options.queue, handler };
    this.subscribers.push(subscriber);
    return { unsubscribe: async () => remove(this.subscribers, subscriber) };
  }

  async ensureStream(config: StreamConfig): Promise<void> {
    this.assertOpen();
    if (!this.streams.has(config.name)) {
      const opened =
        this.journalDir === undefined ? undefined : StreamJournal.open(join(this.journalDir, `${config.name}.journal`), this.log);
      const stream: MemoryStream = {
        config,
        messages: [],
        lastSeq: 0,
        recentIds: new Map(),
        consumers: new Map(),
        ackWaiters: [],
        roomWaiters: [],
        peakPending: 0,
        journal: opened?.journal,
        flushUntil: 0,
      };
      // What an earlier process appended and no consumer acknowledged is the stream's again.
      const now = Date.now();
      for (const entry of opened?.entries ?? []) {
        const seq = ++stream.lastSeq;
        stream.messages.push({ seq, ...entry, storedAt: now });
        stream.recentIds.set(entry.msgId, { seq, storedAt: now });
      }
      if (stream.messages.length > 0)
        this.log?.info({ stream: config.name, messages: stream.messages.length }, 'journaled messages handed to the consumers again');
      this.streams.set(config.name, stream);
      streamPendingLimit.set({ stream: config.name }, this.maxPending);
    }
  }

  async append(subject: string, data: unknown, options: { msgId: string; headers?: BusHeaders; timeoutMs?: number }): Promise<AppendAck> {
    this.assertOpen();
    const stream = [...this.streams.values()].find((s) => s.config.subjects.some((p) => subjectMatches(p, subject)));
    if (!stream) throw new PunkError('BusStreamNotFound', `no stream captures subject ${subject}`);
    const payload = encodePayload(data, this.maxPayloadBytes, `the message appended on ${subject}`);
    const deadline = Date.now() + (options.timeoutMs ?? DEFAULT_APPEND_TIMEOUT_MS);
    let earlier = this.earlierCopy(stream, options.msgId);
    if (!earlier && this.pending(stream) >= this.maxPending) {
      await this.room(stream, subject, deadline);
      this.assertOpen();
      earlier = this.earlierCopy(stream, options.msgId);
    }
    if (earlier) {
      if (!stream.journal && !this.ephemeral) await this.acknowledged(stream, earlier.seq, subject, deadline);
      return { seq: earlier.seq, duplicate: true };
    }
    const now = Date.now();
    if (stream.config.maxAgeMs !== undefined) {
      const oldest = now - stream.config.maxAgeMs;
      const keep = stream.messages.findIndex((m) => m.storedAt >= oldest);
      stream.messages.splice(0, keep === -1 ? stream.messages.length : keep);
    }
    const seq = ++stream.lastSeq;
    const headers = { ...withTraceContext(options.headers) };
    // In the journal's write of this turn (in order): once this append resolves, it survives a crash. A consumer taking
    // the message before that write replays nothing twice: the ledger stores each id once.
    const written = stream.journal?.write({ subject, msgId: options.msgId, payload, headers });
    stream.messages.push({ seq, subject, msgId: options.msgId, payload, value: data, headers, storedAt: now });
    stream.recentIds.set(options.msgId, { seq, storedAt: now });
    this.recordPending(stream);
    if (stream.recentIds.size > MAX_RECENT_IDS) stream.recentIds.delete(stream.recentIds.keys().next().value!);
    for (const consumer of stream.consumers.values()) consumer.wake?.();
    if (written) await written;
    else if (!this.ephemeral) await this.acknowledged(stream, seq, subject, deadline);
    return { seq, duplicate: false };
  }

  /** The stored copy of `msgId` within the stream's duplicate window, if any (expired ids are forgotten on the way). */
  private earlierCopy(stream: MemoryStream, msgId: string): { seq: number } | undefined {
    const now = Date.now();
    for (const [id, entry] of stream.recentIds) {
      if (now - entry.storedAt > stream.config.duplicateWindowMs) stream.recentIds.delete(id);
      else break;
    }
    return stream.recentIds.get(msgId);
  }

  /** Ack floor of the stream's running consumers: the highest `seq` all of them acknowledged; `undefined` with none running. */
  private floor(stream: MemoryStream): number | undefined {
    let floor: number | undefined;
    for (const consumer of stream.consumers.values()) {
      if (consumer.running) floor = Math.min(floor ?? Infinity, consumer.ackFloor);
    }
    return floor;
  }

  /** Messages appended and not yet acknowledged by every running consumer (0 without one: nothing waits). */
  private pending(stream: MemoryStream): number {
    const floor = this.floor(stream);
    return floor === undefined ? 0 : stream.lastSeq - floor;
  }

  private recordPending(stream: MemoryStream): void {
    const pending = this.pending(stream);
    if (pending > stream.peakPending) {
      stream.peakPending = pending;
      streamPendingPeak.set({ stream: stream.config.name }, pending);
    }
    streamPending.set({ stream: stream.config.name }, pending);
  }

  /**
   * Waits until the stream has room for one more pending message.
   * @throws PunkError `BusTimeout` at `deadline`, `BusClosed` when the bus closes meanwhile.
   */
  private async room(stream: MemoryStream, subject: string, deadline: number): Promise<void> {
    streamAppendWaits.inc({ stream: stream.config.name });
    while (this.pending(stream) >= this.maxPending) {
      await this.waitFor(stream, subject, deadline, 'room', (wake) => {
        stream.roomWaiters.push(wake);
        return () => remove(stream.roomWaiters, wake);
      });
    }
  }

  /**
   * Resolves once every running consumer of the stream has acknowledged `seq` (at once without a running consumer).
   * @throws PunkError `BusTimeout` at `deadline`; `BusConsumerStopped` when the last consumer stops before that (the
   *   message stays in the stream, in memory only); `BusClosed` when the bus closes.
   */
  private async acknowledged(stream: MemoryStream, seq: number, subject: string, deadline: number): Promise<void> {
    const floor = this.floor(stream);
    if (floor === undefined || floor >= seq) return;
    await this.waitFor(stream, subject, deadline, 'acknowledgement', (wake, fail) => {
      const waiter: AckWaiter = { seq, resolve: wake, reject: fail };
      stream.ackWaiters.push(waiter);
      return () => remove(stream.ackWaiters, waiter);
    });
  }

  /** One wait of an append: `register` files the waker and returns how to withdraw it; the deadline withdraws it too. */
  private waitFor(
    stream: MemoryStream,
    subject: string,
    deadline: number,
    what: 'room' | 'acknowledgement',
    register: (wake: () => void, fail: (error: PunkError) => void) => () => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let withdraw = () => {};
      const timer = setTimeout(
        () => {
          withdraw();
          reject(
            new PunkError(
              'BusTimeout',
              what === 'room'
                ? `append on ${subject} found no room in stream ${stream.config.name} in time: ${this.maxPending} messages wait for its consumer`
                : `append on ${subject} was not acknowledged in time: the consumer of stream ${stream.config.name} has not handled it (it stays queued)`,
            ),
          );
        },
        Math.max(0, deadline - Date.now()),
      );
      withdraw = register(
        () => {
          clearTimeout(timer);
          resolve();
        },
        (error) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /**
   * After a consumer acknowledged or stopped: resolves the appends now acknowledged by every running consumer and
   * lets waiting appends in while there is room. With no consumer left running, appends still waiting fail.
   */
  private settle(stream: MemoryStream): void {
    const floor = this.floor(stream);
    const waiters = stream.ackWaiters;
    stream.ackWaiters = [];
    for (const waiter of waiters) {
      if (floor === undefined) {
        waiter.reject(
          new PunkError(
            'BusConsumerStopped',
            `the consumer of stream ${stream.config.name} stopped before it handled message ${waiter.seq}; it stays in memory only`,
          ),
        );
      } else if (floor >= waiter.seq) waiter.resolve();
      else stream.ackWaiters.push(waiter);
    }
    let room = this.maxPending - this.pending(stream);
    while (room-- > 0 && stream.roomWaiters.length > 0) stream.roomWaiters.shift()!();
    this.recordPending(stream);
    if (stream.journal && stream.consumers.size > 0) {
      const acked = journalFloor(stream);
      const unacked = () => stream.messages.filter((m) => m.seq > acked);
      stream.journal.acknowledged(stream.lastSeq - acked, () =>
        unacked().map(({ subject, msgId, payload, headers }) => ({ subject, msgId, payload, headers })),
      );
    }
  }

  async consume(streamName: string, durable: string, handler: BatchHandler, options: ConsumeOptions = {}): Promise<BusConsumer> {
    this.assertOpen();
    const stream = this.streams.get(streamName);
    if (!stream) throw new PunkError('BusStreamNotFound', `stream ${streamName} does not exist`);
    let state = stream.consumers.get(durable);
    if (state?.running) throw new PunkError('BusConsumerBusy', `consumer ${durable} of ${streamName} is already running in this process`);
    if (!state) {
      state = { ackFloor: 0, deliveries: new Map(), running: false, draining: false, wake: undefined, loop: undefined };
      stream.consumers.set(durable, state);
    }
    const consumer = state;
    consumer.running = true;
    consumer.draining = false;
    const maxBatch = options.maxBatch ?? 100;
    consumer.loop = (async () => {
      let failures = 0;
      let gathered = false;
      while (consumer.running) {
        const pending = stream.messages.filter((m) => m.seq > consumer.ackFloor).slice(0, maxBatch);
        if (pending.length === 0) {
          if (consumer.draining) break;
          await new Promise<void>((resolve) => (consumer.wake = resolve));
          consumer.wake = undefined;
          continue;
        }
        const flush = () => consumer.draining || !consumer.running || consumer.ackFloor < stream.flushUntil;
        if ((stream.journal || this.ephemeral) && this.groupCommitMs > 0 && !gathered && !flush() && pending.length < maxBatch) {
          // Group commit: the appends resolved at their journal write (or, ephemeral, at once), so waiting for more
          // delays no caller; a reader waiting in caughtUp ends the wait.
          gathered = true;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, this.groupCommitMs);
            consumer.wake = () => {
              if (!flush()) return;
              clearTimeout(timer);
              resolve();
            };
          });
          consumer.wake = undefined;
          continue;
        }
        gathered = false;
        const batch: StreamMessage[] = pending.map((m) => {
          const count = (consumer.deliveries.get(m.seq) ?? 0) + 1;
          consumer.deliveries.set(m.seq, count);
          return {
            seq: m.seq,
            subject: m.subject,
            msgId: m.msgId,
            // This process's own value is handed over as it is (its sender no longer touches it); a replayed one is read.
            ...('value' in m ? { data: m.value, local: true } : { data: JSON.parse(m.payload) as unknown }),
            headers: { ...m.headers },
            deliveryCount: count,
          };
        });
        try {
          await handler(batch);
          failures = 0;
          const last = pending[pending.length - 1]!.seq;
          consumer.ackFloor = last;
          for (const m of pending) consumer.deliveries.delete(m.seq);
          this.trim(stream);
          this.settle(stream);
        } catch (error) {
          const delay = REDELIVERY_BACKOFF_MS[Math.min(failures++, REDELIVERY_BACKOFF_MS.length - 1)]!;
          this.log?.warn({ err: error, stream: streamName, durable, delayMs: delay }, 'consumer batch failed; will redeliver');
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, delay);
            consumer.wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          consumer.wake = undefined;
        }
      }
    })();
    return {
      // The in-process stream does not outlive the process: deliver what it
      // still holds (bounded by DRAIN_TIMEOUT_MS) before stopping.
      stop: async () => {
        consumer.draining = true;
        consumer.wake?.();
        let timer: NodeJS.Timeout | undefined;
        const drained = await Promise.race([
          consumer.loop!.then(() => true),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), DRAIN_TIMEOUT_MS))),
        ]);
        clearTimeout(timer);
        if (!drained)
          this.log?.error(
            { stream: streamName, durable },
            'consumer did not drain the in-process stream in time; undelivered messages are lost',
          );
        consumer.running = false;
        consumer.wake?.();
        await consumer.loop;
        this.settle(stream);
      },
    };
  }

  /**
   * Resolves once every running consumer of `streamName` acknowledged what the stream held when called (what a reader
   * of the consumers' output needs to see every earlier append: the ledger's API in `punk up`); a consumer in its
   * group-commit wait hands over at once. Resolves at once for an unknown stream or one without a running consumer.
   * @throws PunkError `BusTimeout` after `timeoutMs` (default 30 s) when a consumer has not caught up.
   */
  async caughtUp(streamName: string, timeoutMs = DEFAULT_APPEND_TIMEOUT_MS): Promise<void> {
    const stream = this.streams.get(streamName);
    if (!stream) return;
    const seq = stream.lastSeq;
    const floor = this.floor(stream);
    if (floor === undefined || floor >= seq) return;
    stream.flushUntil = Math.max(stream.flushUntil, seq);
    for (const consumer of stream.consumers.values()) consumer.wake?.();
    await this.acknowledged(stream, seq, `stream ${streamName}`, Date.now() + timeoutMs);
  }

  async readStream(streamName: string, options: ReadStreamOptions): Promise<StreamMessage[]> {
    this.assertOpen();
    const stream = this.streams.get(streamName);
    if (!stream) throw new PunkError('BusStreamNotFound', `stream ${streamName} does not exist`);
    // Read-only streams keep every message here (trim needs a consumer), so replay sees them all.
    return stream.messages
      .filter((m) => m.seq > options.afterSeq && subjectMatches(options.subject, m.subject))
      .slice(0, options.limit ?? 1000)
      .map((m) => ({
        seq: m.seq,
        subject: m.subject,
        msgId: m.msgId,
        data: JSON.parse(m.payload) as unknown,
        headers: { ...m.headers },
        deliveryCount: 1,
      }));
  }

  async keyValue(config: KvBucketConfig): Promise<KvStore> {
    this.assertOpen();
    let bucket = this.buckets.get(config.name);
    if (!bucket) {
      bucket = new MemoryKv(config.ttlMs, this.log);
      this.buckets.set(config.name, bucket);
    }
    return bucket;
  }

  isConnected(): boolean {
    return !this.closed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const loops: Promise<void>[] = [];
    for (const stream of this.streams.values()) {
      for (const consumer of stream.consumers.values()) {
        consumer.running = false;
        consumer.wake?.();
        if (consumer.loop) loops.push(consumer.loop);
      }
    }
    this.responders.length = 0;
    this.subscribers.length = 0;
    await Promise.all(loops);
    for (const stream of this.streams.values()) {
      for (const waiter of stream.ackWaiters.splice(0)) waiter.reject(new PunkError('BusClosed', 'the bus is closed'));
      for (const wake of stream.roomWaiters.splice(0)) wake();
      stream.journal?.close(stream.consumers.size > 0 && journalFloor(stream) === stream.lastSeq);
    }
  }

  /** Drops messages every consumer has acknowledged (streams without consumers keep everything). */
  private trim(stream: MemoryStream): void {
    if (stream.consumers.size === 0) return;
    const floor = Math.min(...[...stream.consumers.values()].map((c) => c.ackFloor));
    const index = stream.messages.findIndex((m) => m.seq > floor);
    stream.messages.splice(0, index === -1 ? stream.messages.length : index);
  }

  /** Plain subscribers all receive a message; a queue group's members take turns. */
  private oneOfEachQueue(subject: string, matching: Subscriber[]): Subscriber[] {
    const groups = new Map<string, Subscriber[]>();
    const out: Subscriber[] = [];
    for (const s of matching) {
      if (s.queue === undefined) out.push(s);
      else groups.set(s.queue, [...(groups.get(s.queue) ?? []), s]);
    }
    for (const [queue, members] of groups) {
      const key = `${queue}\u0000${subject}`;
      const cursor = this.queueCursor.get(key) ?? 0;
      this.queueCursor.set(key, cursor + 1);
      out.push(members[cursor % members.length]!);
    }
    return out;
  }

  private pickResponder(subject: string, candidates: Responder[]): Responder {
    // Plain subscribers each get the request in NATS; the first reply wins. With one
    // reply path here, prefer round-robin inside the queue group (the shape we use).
    const cursor = this.queueCursor.get(subject) ?? 0;
    this.queueCursor.set(subject, cursor + 1);
    return candidates[cursor % candidates.length]!;
  }

  private assertOpen(): void {
    if (this.closed) throw new PunkError('BusClosed', 'the bus is closed');
  }
}

function remove<T>(list: T[], item: T): void {
  const index = list.indexOf(item);
  if (index !== -1) list.splice(index, 1);
}

/** An in-process key-value bucket with per-entry expiry. */
class MemoryKv implements KvStore {
  private readonly entries = new Map<string, { payload: string; revision: number; expiresAt: number }>();
  private readonly watchers = new Set<MemoryKvWatcher>();
  /** One timer per key while watched: reports the entry's expiry as a delete. */
  private readonly expiryTimers = new Map<string, NodeJS.Timeout>();
  private revision = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly log?: Logger,
  ) {}

  async get(key: string): Promise<KvEntry | undefined> {
    const entry = this.live(key);
    return entry && { value: JSON.parse(entry.payload), revision: entry.revision };
  }

  async put(key: string, value: unknown): Promise<number> {
    const revision = ++this.revision;
    const payload = encode(value);
    this.entries.set(key, { payload, revision, expiresAt: this.ttlMs > 0 ? Date.now() + this.ttlMs : Infinity });
    this.notify({ operation: 'put', key, value: JSON.parse(payload), revision });
    return revision;
  }

  async create(key: string, value: unknown): Promise<number> {
    if (this.live(key)) throw new PunkError('KvConflict', `key ${key} already exists`);
    return this.put(key, value);
  }

  async update(key: string, value: unknown, revision: number): Promise<number> {
    const entry = this.live(key);
    if (!entry || entry.revision !== revision) throw new PunkError('KvConflict', `key ${key} changed since revision ${revision}`);
    return this.put(key, value);
  }

  async delete(key: string): Promise<void> {
    if (this.entries.delete(key)) this.notify({ operation: 'delete', key, revision: ++this.revision });
  }

  async keys(): Promise<string[]> {
    return [...this.entries.keys()].filter((key) => this.live(key));
  }

  async size(): Promise<number> {
    return (await this.keys()).length;
  }

  async watch(handler: KvWatchHandler): Promise<BusSubscription> {
    const live = [...this.entries.keys()].flatMap((key) => {
      const entry = this.live(key);
      return entry ? [{ key, entry }] : [];
    });
    const watcher = new MemoryKvWatcher(handler, this.log);
    // Registered before the snapshot is delivered: a write made meanwhile queues behind it, in order.
    this.watchers.add(watcher);
    for (const { key, entry } of live.sort((a, b) => a.entry.revision - b.entry.revision)) {
      watcher.push({ operation: 'put', key, value: JSON.parse(entry.payload), revision: entry.revision });
      this.scheduleExpiry(key);
    }
    await watcher.idle();
    return {
      unsubscribe: async () => {
        watcher.stopped = true;
        this.watchers.delete(watcher);
        if (this.watchers.size === 0) {
          for (const timer of this.expiryTimers.values()) clearTimeout(timer);
          this.expiryTimers.clear();
        }
      },
    };
  }

  private notify(change: KvChange): void {
    if (this.watchers.size === 0) return;
    for (const watcher of this.watchers) watcher.push(change);
    if (change.operation === 'put') this.scheduleExpiry(change.key);
    else {
      clearTimeout(this.expiryTimers.get(change.key));
      this.expiryTimers.delete(change.key);
    }
  }

  /** While watched, an entry that reaches its expiry without a newer write is reported deleted. */
  private scheduleExpiry(key: string): void {
    const entry = this.entries.get(key);
    if (!entry || entry.expiresAt === Infinity) return;
    clearTimeout(this.expiryTimers.get(key));
    const timer = setTimeout(
      () => {
        this.expiryTimers.delete(key);
        if (this.entries.get(key) !== entry) return;
        // Timers run on a monotonic clock and may fire a moment before Date.now() reaches the expiry: try again then.
        if (entry.expiresAt > Date.now()) {
          this.scheduleExpiry(key);
          return;
        }
        this.live(key); // removes the expired entry and reports its delete
      },
      Math.max(0, entry.expiresAt - Date.now()),
    );
    timer.unref();
    this.expiryTimers.set(key, timer);
  }

  private live(key: string) {
    const entry = this.entries.get(key);
    if (entry && entry.expiresAt <= Date.now()) {
      this.entries.delete(key);
      this.notify({ operation: 'delete', key });
      return undefined;
    }
    return entry;
  }
}

/** One watcher of an in-process bucket: hands changes to its handler one at a time, in order. */
class MemoryKvWatcher {
  private chain: Promise<void> = Promise.resolve();
  /** Set on unsubscribe: changes still queued are dropped. */
  stopped = false;

  constructor(
    private readonly handler: KvWatchHandler,
    private readonly log?: Logger,
  ) {}

  push(change: KvChange): void {
    this.chain = this.chain.then(async () => {
      if (this.stopped) return;
      try {
        await this.handler(change);
      } catch (error) {
        this.log?.error({ err: error, key: change.key }, 'bucket watcher failed');
      }
    });
  }

  /** Resolves once every change pushed so far has been handled. */
  idle(): Promise<void> {
    return this.chain;
  }
}

/** What a stream's journal may forget: the last sequence acknowledged by every consumer, running or not. */
function journalFloor(stream: MemoryStream): number {
  return Math.min(...[...stream.consumers.values()].map((c) => c.ackFloor));
}
