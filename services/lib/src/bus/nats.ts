/**
 * The bus over NATS (every replica count): core request/reply and
 * broadcast, JetStream for durable streams and consumers, NATS KV for
 * buckets. Same semantics as the in-process bus; callers cannot tell them
 * apart. Reconnects forever; `isConnected` reports the link for readiness.
 * A request, reply, broadcast or append past the server's `max_payload` travels
 * in parts (nats-parts.ts), up to `maxPayloadBytes`; past that it is refused with
 * `PayloadTooLarge`, and a reply refused so reaches its requester as that error.
 */
import {
  connect,
  Empty,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { Kvm, type KV, type KvWatchEntry } from '@nats-io/kv';
import { runInHeaderContext, withTraceContext } from '../tracing/propagation.js';
import { PunkError, errorMessage } from '../errors.js';
import { parseNatsUrl } from './nats-url.js';
import { NatsParts, PART_OF_HEADER } from './nats-parts.js';
import { NatsReplies, NoReplyError } from './nats-replies.js';
import { DEFAULT_MAX_PAYLOAD_BYTES, encodePayload } from './bus.js';
import type { Logger } from '../log.js';
import type {
  AppendAck,
  BatchHandler,
  Bus,
  BusConsumer,
  BusHeaders,
  BusSubscription,
  ConsumeOptions,
  KvBucketConfig,
  KvChange,
  KvEntry,
  KvStore,
  KvWatchHandler,
  MessageHandler,
  ReadStreamOptions,
  RequestHandler,
  RequestOptions,
  ServeOptions,
  StreamConfig,
  StreamMessage,
} from './bus.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const REDELIVERY_DELAYS_MS = [250, 500, 1000, 2000, 5000, 10_000];
/** Reply envelope on request subjects: errors cross the wire as `{ ok: false, code, message }`. */
type Reply = { ok: true; body: unknown } | { ok: false; code: string; message: string; details?: Record<string, unknown> };

function encode(data: unknown): Uint8Array {
  const text = JSON.stringify(data);
  if (text === undefined) throw new PunkError('BusInvalidPayload', 'bus payload must be a JSON value');
  return encoder.encode(text);
}

/** Longest a receiver waits for the parts of a request or broadcast, and a sender offers a reply's or broadcast's, in milliseconds. */
const PARTS_TIMEOUT_MS = 30_000;

/** Decodes a JSON payload; a payload that is not JSON becomes a PunkError `InvalidMessage`. */
function decode(data: Uint8Array, subject: string): unknown {
  try {
    return JSON.parse(decoder.decode(data));
  } catch {
    throw new PunkError('InvalidMessage', `message on ${subject} is not valid JSON`);
  }
}

function toNatsHeaders(source: BusHeaders | undefined): MsgHdrs | undefined {
  if (!source || Object.keys(source).length === 0) return undefined;
  const h = natsHeaders();
  for (const [key, value] of Object.entries(source)) h.set(key, value);
  return h;
}

function fromNatsHeaders(source: MsgHdrs | undefined): BusHeaders {
  const out: BusHeaders = {};
  if (!source) return out;
  for (const key of source.keys()) out[key] = source.get(key);
  return out;
}

/** Longest a subscription's drain may take when it is stopped, in milliseconds; then it is simply unsubscribed. */
const DRAIN_TIMEOUT_MS = 2000;

/** Longest `close` waits for the connection to drain, in milliseconds; then it closes at once. */
const CLOSE_DRAIN_TIMEOUT_MS = 5000;

/** Options of {@link NatsBus.connect}. */
export interface NatsBusOptions {
  /**
   * NATS server URL(s), comma-separated (`nats://127.0.0.1:4222`); credentials in the userinfo
   * (`nats://user:password@host:4222`, `nats://token@host:4222`) are used to authenticate and never shown.
   */
  url: string;
  /** Connection name shown by the server (`punk-gateway-<pid>`). */
  name: string;
  log: Logger;
  /** Largest request, reply, broadcast or append, as JSON in UTF-8 bytes (`PUNK_MAX_RESULT_BYTES`, default 32 MiB). */
  maxPayloadBytes?: number;
}

/** The NATS implementation of {@link Bus}. */
export class NatsBus implements Bus {
  private readonly subscriptions = new Set<Subscription>();
  private readonly consumers = new Set<{ stop(): Promise<void> }>();
  private connected = true;
  private closed = false;
  private readonly parts: NatsParts;
  private readonly replies: NatsReplies;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private readonly log: Logger,
    private readonly maxPayloadBytes: number,
  ) {
    this.parts = new NatsParts(nc, maxPayloadBytes);
    this.replies = new NatsReplies(nc);
    void this.watchStatus();
  }

  /**
   * Connects to NATS and JetStream.
   * @throws PunkError `BusUnavailable` naming the URL when NATS cannot be reached or JetStream is not enabled.
   */
  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    const { servers, credentials, shown } = parseNatsUrl(options.url);
    let nc: NatsConnection;
    try {
      // noAsyncTraces: nats.js would otherwise build an Error (a stack capture) for every request, JetStream publish,
      // acknowledgement and timer just in case it fails; our errors name the subject instead (a hot-path cost).
      nc = await connect({
        servers,
        ...credentials,
        name: options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 500,
        timeout: 5000,
        noAsyncTraces: true,
      });
    } catch (error) {
      throw new PunkError('BusUnavailable', `cannot connect to NATS at ${shown}: ${errorMessage(error)}`, undefined, { cause: error });
    }
    try {
      const jsm = await jetstreamManager(nc, { timeout: 5000 });
      return new NatsBus(nc, jsm, jetstream(nc, { timeout: 5000 }), options.log, options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES);
    } catch (error) {
      await nc.close();
      throw new PunkError(
        'BusUnavailable',
        `NATS at ${shown} has no JetStream (start nats-server with -js): ${errorMessage(error)}`,
        undefined,
        { cause: error },
      );
    }
  }

  async request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    this.assertOpen();
    const started = Date.now();
    let payload = this.encode(data, `the request on ${subject}`);
    let hdrs = toNatsHeaders(withTraceContext(options.headers));
    let withdraw: (() => void) | undefined;
    if (this.parts.needsParts(payload)) {
      hdrs ??= natsHeaders();
      withdraw = this.parts.offer(payload, hdrs, options.timeoutMs, true);
      payload = Empty;
    }
    let msg: Msg;
    try {
      msg = await this.replies.request(subject, payload, options.timeoutMs, hdrs);
    } catch (error) {
      withdraw?.();
      if (error instanceof NoReplyError && error.reason === 'no-responders') {
        throw new PunkError('BusNoResponders', `no service answers requests on ${subject}`);
      }
      if (error instanceof NoReplyError && error.reason === 'timeout') {
        throw new PunkError('BusTimeout', `request on ${subject} got no reply within ${options.timeoutMs} ms`);
      }
      throw new PunkError('BusUnavailable', `request on ${subject} failed: ${errorMessage(error)}`, undefined, { cause: error });
    }
    const what = `the reply on ${subject}`;
    const left = Math.max(1, options.timeoutMs - (Date.now() - started));
    const reply = decode(await this.parts.payloadOf(msg, left, what), subject) as Reply;
    if (reply && reply.ok) return reply.body;
    if (reply && !reply.ok) throw new PunkError(reply.code, reply.message, reply.details);
    throw new PunkError('InvalidMessage', `reply on ${subject} is not a bus reply envelope`);
  }

  async serve(subject: string, handler: RequestHandler, options: ServeOptions = {}): Promise<BusSubscription> {
    return this.listen(subject, options, (msg) => void this.answer(subject, handler, msg));
  }

  async publish(subject: string, data: unknown, headers?: BusHeaders): Promise<void> {
    this.assertOpen();
    let payload = this.encode(data, `the message on ${subject}`);
    let hdrs = toNatsHeaders(withTraceContext(headers));
    if (this.parts.needsParts(payload)) {
      hdrs ??= natsHeaders();
      this.parts.offer(payload, hdrs, PARTS_TIMEOUT_MS, false);
      payload = Empty;
    }
    this.nc.publish(subject, payload, hdrs ? { headers: hdrs } : undefined);
  }

  async subscribe(subject: string, handler: MessageHandler, options: ServeOptions = {}): Promise<BusSubscription> {
    const deliver = (msg: Msg, payload: Uint8Array) => {
      try {
        const data = decode(payload, msg.subject);
        const headers = fromNatsHeaders(msg.headers);
        Promise.resolve(runInHeaderContext(headers, () => handler(data, { subject: msg.subject, headers }))).catch((failure: unknown) =>
          this.log.error({ err: errorMessage(failure), subject: msg.subject }, 'bus subscriber failed'),
        );
      } catch (failure) {
        this.log.error({ err: errorMessage(failure), subject: msg.subject }, 'dropped a malformed broadcast');
      }
    };
    return this.listen(subject, options, (msg) => {
      if (!NatsParts.isHead(msg.headers)) {
        deliver(msg, msg.data);
        return;
      }
      this.parts.payloadOf(msg, PARTS_TIMEOUT_MS, `the message on ${msg.subject}`).then(
        (payload) => deliver(msg, payload),
        (failure: unknown) =>
          this.log.error({ err: errorMessage(failure), subject: msg.subject }, 'dropped a broadcast whose parts did not arrive'),
      );
    });
  }

  /** Subscribes (optionally in a queue group) and hands every message to `onMessage`; subscription errors are logged. */
  private async listen(subject: string, options: ServeOptions, onMessage: (msg: Msg) => void): Promise<BusSubscription> {
    this.assertOpen();
    const sub = this.nc.subscribe(subject, {
      ...(options.queue && { queue: options.queue }),
      callback: (error, msg) => {
        if (error) {
          this.log.error({ err: errorMessage(error), subject }, 'bus subscription error');
          return;
        }
        onMessage(msg);
      },
    });
    return this.track(sub);
  }

  async ensureStream(config: StreamConfig): Promise<void> {
    this.assertOpen();
    const wanted = {
      name: config.name,
      subjects: config.subjects,
      duplicate_window: config.duplicateWindowMs * 1_000_000,
      // Direct gets serve stream reads (SSE replay) without a consumer.
      allow_direct: true,
      ...(config.maxAgeMs !== undefined && { max_age: config.maxAgeMs * 1_000_000 }),
    };
    try {
      await this.jsm.streams.info(config.name);
      await this.jsm.streams.update(config.name, wanted);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || !/not found/i.test(error.message))
        throw this.unavailable(`stream ${config.name}`, error);
      try {
        await this.jsm.streams.add(wanted);
      } catch (addError) {
        // Another replica created it first: that is the idempotent outcome we want.
        if (!/already in use|exists/i.test(errorMessage(addError))) throw this.unavailable(`stream ${config.name}`, addError);
      }
    }
  }

  async append(subject: string, data: unknown, options: { msgId: string; headers?: BusHeaders; timeoutMs?: number }): Promise<AppendAck> {
    this.assertOpen();
    const payload = this.encode(data, `the message appended on ${subject}`);
    try {
      const hdrs = toNatsHeaders(withTraceContext(options.headers));
      // A JetStream publish is a request whose reply is the stream's acknowledgement (its sequence, or an API error).
      const store = async (part: Uint8Array, msgID: string, headers: MsgHdrs | undefined) => {
        const h = headers ?? natsHeaders();
        h.set('Nats-Msg-Id', msgID);
        return pubAck(await this.replies.request(subject, part, options.timeoutMs ?? 5000, h));
      };
      return this.parts.needsParts(payload)
        ? await this.parts.appendInParts(payload, options.msgId, hdrs ?? natsHeaders(), store)
        : await store(payload, options.msgId, hdrs);
    } catch (error) {
      // NATS answers a publish no stream captures as a request nobody listens to.
      if (error instanceof NoReplyError && error.reason === 'no-responders') {
        throw new PunkError('BusStreamNotFound', `no stream captures subject ${subject}`);
      }
      if (error instanceof NoReplyError && error.reason === 'timeout') {
        throw new PunkError('BusTimeout', `append on ${subject} was not acknowledged in time`);
      }
      throw this.unavailable(`append on ${subject}`, error);
    }
  }

  async consume(stream: string, durable: string, handler: BatchHandler, options: ConsumeOptions = {}): Promise<BusConsumer> {
    this.assertOpen();
    const maxBatch = options.maxBatch ?? 100;
    try {
      await this.jsm.consumers.info(stream, durable);
    } catch (error) {
      if (!(error instanceof JetStreamApiError) || !/not found/i.test(error.message)) throw this.unavailable(`consumer ${durable}`, error);
      try {
        await this.jsm.consumers.add(stream, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          ack_wait: 30_000_000_000,
          max_ack_pending: maxBatch * 10,
        });
      } catch (addError) {
        if (!/already in use|exists/i.test(errorMessage(addError))) throw this.unavailable(`consumer ${durable}`, addError);
      }
    }
    const consumer = await this.js.consumers.get(stream, durable);
    let running = true;
    let failures = 0;
    const loop = (async () => {
      while (running && !this.closed) {
        const batch: JsMsg[] = [];
        try {
          const messages = await consumer.fetch({ max_messages: maxBatch, expires: 1000 });
          for await (const m of messages) {
            batch.push(m);
          }
        } catch (error) {
          if (!running || this.closed) break;
          this.log.warn({ err: errorMessage(error), stream, durable }, 'fetch from stream failed; retrying');
          await delay(1000);
          continue;
        }
        if (batch.length === 0) continue;
        try {
          const delivered: StreamMessage[] = [];
          for (const m of batch) {
            // A part is read with its head.
            if (m.headers?.has(PART_OF_HEADER)) continue;
            let data: unknown;
            try {
              data = JSON.parse(decoder.decode(await this.parts.storedPayload(this.jsm, stream, m.headers, m.data)));
            } catch (error) {
              // A part that cannot be read now: the batch is delivered again.
              if (error instanceof PunkError && error.code === 'BusUnavailable') throw error;
              // Not JSON, or parts lost: hand it over as text; the handler's schema check sets it aside.
              data = { __undecodable: error instanceof PunkError ? error.message : decoder.decode(m.data) };
            }
            delivered.push({
              seq: m.seq,
              subject: m.subject,
              msgId: m.headers?.get('Nats-Msg-Id') ?? '',
              data,
              headers: fromNatsHeaders(m.headers),
              deliveryCount: m.info.deliveryCount,
            });
          }
          if (delivered.length > 0) await handler(delivered);
          failures = 0;
          // The server handles one connection's messages in order: the last acknowledgement confirmed confirms the
          // others, in one round trip per batch instead of one per message. An acknowledgement lost (connection
          // closed) only means a redelivery: a consumer gets every message at least once.
          const last = batch[batch.length - 1]!;
          for (const m of batch) {
            if (m === last) break;
            try {
              m.ack();
            } catch {
              // redelivered later
            }
          }
          await last.ackAck().catch(() => false);
        } catch (error) {
          const wait = REDELIVERY_DELAYS_MS[Math.min(failures++, REDELIVERY_DELAYS_MS.length - 1)]!;
          this.log.warn({ err: errorMessage(error), stream, durable, delayMs: wait }, 'consumer batch failed; will redeliver');
          for (const m of batch) m.nak(wait);
          await delay(wait);
        }
      }
    })();
    const handle = {
      stop: async () => {
        running = false;
        await loop;
        this.consumers.delete(handle);
      },
    };
    this.consumers.add(handle);
    return handle;
  }

  async readStream(stream: string, options: ReadStreamOptions): Promise<StreamMessage[]> {
    this.assertOpen();
    const limit = options.limit ?? 1000;
    const out: StreamMessage[] = [];
    let seq = options.afterSeq + 1;
    // One "next message on this subject from seq" lookup per message: replays are short.
    while (out.length < limit) {
      let stored;
      try {
        stored = await this.jsm.direct.getMessage(stream, { seq, next_by_subj: options.subject });
      } catch (error) {
        if (/stream not found/i.test(errorMessage(error))) throw new PunkError('BusStreamNotFound', `stream ${stream} does not exist`);
        if (/no message found/i.test(errorMessage(error))) break;
        throw this.unavailable(`read of ${stream}`, error);
      }
      if (!stored) break;
      seq = stored.seq + 1;
      if (stored.header?.has(PART_OF_HEADER)) continue;
      out.push({
        seq: stored.seq,
        subject: stored.subject,
        msgId: stored.header?.get('Nats-Msg-Id') ?? '',
        data: JSON.parse(decoder.decode(await this.parts.storedPayload(this.jsm, stream, stored.header, stored.data))),
        headers: fromNatsHeaders(stored.header),
        deliveryCount: 1,
      });
    }
    return out;
  }

  async keyValue(config: KvBucketConfig): Promise<KvStore> {
    this.assertOpen();
    const create = () => new Kvm(this.nc).create(config.name, { ttl: config.ttlMs, history: 1 });
    try {
      // Two services creating one bucket at once: both find no stream and both add it, and the later add can be
      // refused ("subjects overlap with an existing stream"); by then the stream exists, so one more look finds it.
      const kv = await create().catch((error: unknown) => {
        if (/subjects overlap|already in use/.test(errorMessage(error))) return create();
        throw error;
      });
      return new NatsKv(kv, config.name, config.ttlMs, this.jsm, this.log);
    } catch (error) {
      throw this.unavailable(`bucket ${config.name}`, error);
    }
  }

  isConnected(): boolean {
    return this.connected && !this.closed && !this.nc.isClosed();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.allSettled([...this.consumers].map((c) => c.stop()));
    this.closed = true;
    // A drain waits for the server; with NATS unreachable (reconnecting forever) it would never end, so it is bounded.
    let timer: NodeJS.Timeout | undefined;
    const drained = await Promise.race([
      this.nc.drain().then(
        () => true,
        () => false,
      ),
      new Promise<boolean>((resolve) => (timer = setTimeout(resolve, CLOSE_DRAIN_TIMEOUT_MS, false))),
    ]);
    clearTimeout(timer);
    if (!drained && !this.nc.isClosed()) await this.nc.close().catch(() => undefined);
    // Requests still waiting can no longer be answered.
    this.replies.close();
  }

  private async answer(subject: string, handler: RequestHandler, msg: Msg): Promise<void> {
    let reply: Reply;
    try {
      const data = decode(await this.parts.payloadOf(msg, PARTS_TIMEOUT_MS, `the request on ${subject}`), subject);
      const headers = fromNatsHeaders(msg.headers);
      const body = await runInHeaderContext(headers, () => handler(data, { subject: msg.subject, headers }));
      reply = { ok: true, body: body === undefined ? null : body };
    } catch (error) {
      if (error instanceof PunkError) {
        reply = { ok: false, code: error.code, message: error.message, ...(error.details && { details: error.details }) };
      } else {
        this.log.error({ err: errorMessage(error), subject }, 'bus request handler failed');
        reply = { ok: false, code: 'BusHandlerFailed', message: `the service answering ${subject} failed: ${errorMessage(error)}` };
      }
    }
    if (msg.reply) this.respond(subject, msg, reply);
  }

  /**
   * Sends a reply, in parts past `max_payload`. A reply that cannot be sent (past the limit, not JSON) is logged and
   * replaced by an error reply, so its requester learns at once instead of waiting out its deadline.
   */
  private respond(subject: string, msg: Msg, reply: Reply): void {
    let payload: Uint8Array;
    try {
      // The limit is the body's, as a responder checking its result measures it.
      payload = reply.ok
        ? encoder.encode(`{"ok":true,"body":${encodePayload(reply.body, this.maxPayloadBytes, `the reply on ${subject}`)}}`)
        : encode(reply);
    } catch (error) {
      this.log.error({ err: errorMessage(error), subject }, 'could not send a bus reply; answered an error instead');
      const refused = error instanceof PunkError ? error : new PunkError('BusInvalidPayload', errorMessage(error));
      payload = encode({ ok: false, code: refused.code, message: refused.message, ...(refused.details && { details: refused.details }) });
    }
    try {
      if (!this.parts.needsParts(payload)) {
        msg.respond(payload);
        return;
      }
      const head = natsHeaders();
      const withdraw = this.parts.offer(payload, head, PARTS_TIMEOUT_MS, true);
      if (!msg.respond(Empty, { headers: head })) withdraw();
    } catch (error) {
      this.log.error({ err: errorMessage(error), subject }, 'could not send a bus reply');
    }
  }

  /** A payload's bytes. @throws PunkError `PayloadTooLarge` past the limit, `BusInvalidPayload` for no JSON value. */
  private encode(data: unknown, what: string): Uint8Array {
    return encoder.encode(encodePayload(data, this.maxPayloadBytes, what));
  }

  private track(sub: Subscription): BusSubscription {
    this.subscriptions.add(sub);
    return {
      unsubscribe: async () => {
        this.subscriptions.delete(sub);
        // Drain, not unsubscribe: the messages NATS already routed here (a queue group's requests among them) are
        // still handled, instead of being dropped and left to time out at their requester.
        // Bounded: with NATS unreachable a drain would wait for the reconnect.
        if (sub.isClosed()) return;
        let timer: NodeJS.Timeout | undefined;
        const drained = await Promise.race([
          sub.drain().then(
            () => true,
            () => false,
          ),
          new Promise<boolean>((resolve) => (timer = setTimeout(resolve, DRAIN_TIMEOUT_MS, false))),
        ]);
        clearTimeout(timer);
        if (!drained && !sub.isClosed()) sub.unsubscribe();
      },
    };
  }

  private async watchStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === 'disconnect') {
        this.connected = false;
        this.log.warn({ server: (status as { server?: string }).server }, 'NATS disconnected; reconnecting');
      } else if (status.type === 'reconnect') {
        this.connected = true;
        this.log.info({ server: (status as { server?: string }).server }, 'NATS reconnected');
      }
    }
  }

  private unavailable(what: string, error: unknown): PunkError {
    return new PunkError('BusUnavailable', `${what}: ${errorMessage(error)}`, undefined, { cause: error });
  }

  private assertOpen(): void {
    if (this.closed) throw new PunkError('BusClosed', 'the bus is closed');
  }
}

/** A NATS KV bucket behind {@link KvStore}. */
class NatsKv implements KvStore {
  constructor(
    private readonly kv: KV,
    private readonly bucket: string,
    private readonly ttlMs: number,
    private readonly jsm: JetStreamManager,
    private readonly log: Logger,
  ) {}

  async get(key: string): Promise<KvEntry | undefined> {
    const entry = await this.kv.get(key);
    if (!entry || entry.operation !== 'PUT') return undefined;
    return { value: JSON.parse(decoder.decode(entry.value)), revision: entry.revision };
  }

  async put(key: string, value: unknown): Promise<number> {
    return this.kv.put(key, encode(value));
  }

  async create(key: string, value: unknown): Promise<number> {
    try {
      return await this.kv.create(key, encode(value));
    } catch (error) {
      throw new PunkError('KvConflict', `key ${key} already exists in ${this.bucket}`, undefined, { cause: error });
    }
  }

  async update(key: string, value: unknown, revision: number): Promise<number> {
    try {
      return await this.kv.update(key, encode(value), revision);
    } catch (error) {
      throw new PunkError('KvConflict', `key ${key} in ${this.bucket} changed since revision ${revision}`, undefined, { cause: error });
    }
  }

  async delete(key: string): Promise<void> {
    await this.kv.delete(key);
  }

  // The stream's subject list answers in one request; nats.js's kv.keys() opens a consumer
  // that can outlive a closing connection and keep the process alive.
  async keys(): Promise<string[]> {
    const prefix = `$KV.${this.bucket}.`;
    const info = await this.jsm.streams.info(`KV_${this.bucket}`, { subjects_filter: `${prefix}>` });
    const candidates = Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length));
    const live = await Promise.all(candidates.map(async (key) => ((await this.get(key)) ? key : undefined)));
    return live.filter((key): key is string => key !== undefined);
  }

  // One message per key (history 1), delete markers included, until they age out.
  async size(): Promise<number> {
    return (await this.jsm.streams.info(`KV_${this.bucket}`)).state.messages;
  }

  // nats.js's watcher is an ordered push consumer: after a reconnect or a missed heartbeat it is recreated from the
  // last stream sequence it delivered, so no change is lost or repeated.
  async watch(handler: KvWatchHandler): Promise<BusSubscription> {
    let entries: Awaited<ReturnType<KV['watch']>>;
    try {
      entries = await this.kv.watch();
    } catch (error) {
      throw new PunkError('BusUnavailable', `watch of bucket ${this.bucket}: ${errorMessage(error)}`, undefined, { cause: error });
    }
    // How many last values the watcher delivers first: the pending count of its consumer when it was created.
    const consumer = (entries as unknown as { _data?: { info(cached: boolean): Promise<{ num_pending: number }> } })._data;
    const initial = consumer ? (await consumer.info(true)).num_pending : 0;
    const expiries = new Map<string, NodeJS.Timeout>();
    let stopped = false;
    let caughtUp!: () => void;
    const ready = new Promise<void>((resolve) => (caughtUp = resolve));
    if (initial === 0) caughtUp();
    const deliver = async (change: KvChange) => {
      if (stopped) return;
      try {
        await handler(change);
      } catch (error) {
        this.log.error({ err: errorMessage(error), bucket: this.bucket, key: change.key }, 'bucket watcher failed');
      }
    };
    // The server drops an aged-out entry without telling watchers (delete markers need nats-server 2.11):
    // report it from its last write plus the bucket's time to live, as the server does.
    // The timer holds the key and the time only: a watch entry's value is a view of the connection's read buffer, and
    // holding the entry kept that whole buffer (tens of KiB) alive per live key.
    const expireLater = (entry: KvWatchEntry) => {
      const { key } = entry;
      clearTimeout(expiries.get(key));
      if (this.ttlMs <= 0) return;
      const timer = setTimeout(
        () => {
          expiries.delete(key);
          queue = queue.then(() => deliver({ operation: 'delete', key }));
        },
        Math.max(0, entry.created.getTime() + this.ttlMs - Date.now()),
      );
      timer.unref();
      expiries.set(key, timer);
    };
    let queue = Promise.resolve();
    let seen = 0;
    const loop = (async () => {
      for await (const entry of entries) {
        seen++;
        if (entry.operation === 'PUT') {
          let value: unknown;
          try {
            value = JSON.parse(decoder.decode(entry.value));
          } catch (error) {
            this.log.error({ err: errorMessage(error), bucket: this.bucket, key: entry.key }, 'dropped a bucket entry that is not JSON');
          }
          if (value !== undefined) {
            expireLater(entry);
            const change: KvChange = { operation: 'put', key: entry.key, value, revision: entry.revision };
            queue = queue.then(() => deliver(change));
          }
        } else {
          clearTimeout(expiries.get(entry.key));
          expiries.delete(entry.key);
          // The last value of a deleted key, met while catching up, is no change to report.
          if (seen > initial) queue = queue.then(() => deliver({ operation: 'delete', key: entry.key, revision: entry.revision }));
        }
        await queue;
        if (seen === initial) caughtUp();
      }
    })().catch((error: unknown) => this.log.error({ err: errorMessage(error), bucket: this.bucket }, 'bucket watch ended'));
    await Promise.race([ready, loop]);
    return {
      unsubscribe: async () => {
        stopped = true;
        for (const timer of expiries.values()) clearTimeout(timer);
        expiries.clear();
        entries.stop();
        caughtUp();
      },
    };
  }
}

/**
 * A JetStream publish acknowledgement (`{ stream, seq, duplicate? }`).
 * @throws Error with the server's description when the stream refused the message (`{ error: { description } }`).
 */
function pubAck(msg: Msg): AppendAck {
  const ack = JSON.parse(decoder.decode(msg.data)) as {
    stream?: string;
    seq?: number;
    duplicate?: boolean;
    error?: { description?: string };
  };
  if (ack.error) throw new Error(ack.error.description ?? 'the stream refused the message');
  if (typeof ack.seq !== 'number') throw new Error('invalid JetStream acknowledgement');
  return { seq: ack.seq, duplicate: ack.duplicate === true };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
