import { PunkError } from '../errors.js';
import type { Logger } from '../log.js';
import { runInHeaderContext, withTraceContext } from '../tracing/propagation.js';
import {
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

/** Wire round trip of a payload: the in-process bus shares nothing by reference. */
function encode(data: unknown): string {
  const text = JSON.stringify(data);
  if (text === undefined) throw new PunkError('BusInvalidPayload', 'bus payload must be a JSON value');
  return text;
}

/**
 * The in-process bus of embedded mode: one process, no network. It keeps the
 * semantics of the NATS implementation (queue groups, deadlines, durable
 * streams with duplicate detection and at-least-once consumers) so callers
 * behave the same on both. Stream contents live in memory only.
 */
export class MemoryBus implements Bus {
  private readonly responders: Responder[] = [];
  private readonly subscribers: Subscriber[] = [];
  private readonly streams = new Map<string, MemoryStream>();
  private readonly queueCursor = new Map<string, number>();
  private readonly buckets = new Map<string, MemoryKv>();
  private closed = false;

  constructor(private readonly log?: Logger) {}

  async request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    this.assertOpen();
    const payload = encode(data);
    const candidates = this.responders.filter((r) => r.subject === subject);
    if (candidates.length === 0) {
      throw new PunkError('BusNoResponders', `no service answers requests on ${subject}`);
    }
    const responder = this.pickResponder(subject, candidates);
    const info = { subject, headers: { ...withTraceContext(options.headers) } };
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new PunkError('BusTimeout', `request on ${subject} got no reply within ${options.timeoutMs} ms`)),
        options.timeoutMs,
      );
    });
    const reply = (async () => {
      try {
        const result = await runInHeaderContext(info.headers, () => responder.handler(JSON.parse(payload), info));
        return { ok: true as const, body: result === undefined ? null : (JSON.parse(encode(result)) as unknown) };
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

  async serve(subject: string, handler: RequestHandler, options: ServeOptions = {}): Promise<BusSubscription> {
    this.assertOpen();
    const responder: Responder = { subject, queue: options.queue, handler };
    this.responders.push(responder);
    return { unsubscribe: async () => remove(this.responders, responder) };
  }

  async publish(subject: string, data: unknown, published?: BusHeaders): Promise<void> {
    this.assertOpen();
    const payload = encode(data);
    const headers = withTraceContext(published) ?? {};
    const matching = this.subscribers.filter((s) => subjectMatches(s.pattern, subject));
    for (const subscriber of this.oneOfEachQueue(subject, matching)) {
      // Delivery is asynchronous, as over the network: the publisher never waits for subscribers.
      queueMicrotask(() => {
        Promise.resolve()
          .then(() => runInHeaderContext(headers, () => subscriber.handler(JSON.parse(payload), { subject, headers: { ...headers } })))
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
      this.streams.set(config.name, { config, messages: [], lastSeq: 0, recentIds: new Map(), consumers: new Map() });
    }
  }

  async append(subject: string, data: unknown, options: { msgId: string; headers?: BusHeaders }): Promise<AppendAck> {
    this.assertOpen();
    const stream = [...this.streams.values()].find((s) => s.config.subjects.some((p) => subjectMatches(p, subject)));
    if (!stream) throw new PunkError('BusStreamNotFound', `no stream captures subject ${subject}`);
    const payload = encode(data);
    const now = Date.now();
    for (const [id, entry] of stream.recentIds) {
      if (now - entry.storedAt > stream.config.duplicateWindowMs) stream.recentIds.delete(id);
      else break;
    }
    const earlier = stream.recentIds.get(options.msgId);
    if (earlier) return { seq: earlier.seq, duplicate: true };
    if (stream.config.maxAgeMs !== undefined) {
      const oldest = now - stream.config.maxAgeMs;
      const keep = stream.messages.findIndex((m) => m.storedAt >= oldest);
      stream.messages.splice(0, keep === -1 ? stream.messages.length : keep);
    }
    const seq = ++stream.lastSeq;
    stream.messages.push({ seq, subject, msgId: options.msgId, payload, headers: { ...withTraceContext(options.headers) }, storedAt: now });
    stream.recentIds.set(options.msgId, { seq, storedAt: now });
    for (const consumer of stream.consumers.values()) consumer.wake?.();
    return { seq, duplicate: false };
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
      while (consumer.running) {
        const pending = stream.messages.filter((m) => m.seq > consumer.ackFloor).slice(0, maxBatch);
        if (pending.length === 0) {
          if (consumer.draining) break;
          await new Promise<void>((resolve) => (consumer.wake = resolve));
          consumer.wake = undefined;
          continue;
        }
        const batch: StreamMessage[] = pending.map((m) => {
          const count = (consumer.deliveries.get(m.seq) ?? 0) + 1;
          consumer.deliveries.set(m.seq, count);
          return {
            seq: m.seq,
            subject: m.subject,
            msgId: m.msgId,
            data: JSON.parse(m.payload) as unknown,
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
      },
    };
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
    if (this.entries.delete(key)) this.notify({ operation: 'delete', key });
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
