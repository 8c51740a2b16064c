/**
 * Payloads past the NATS server's `max_payload` (1 MiB by default, read from the connection's server info), carried
 * intact in parts of at most that size (docs/bus.md, "Large payloads").
 *
 * Core NATS (requests, replies, broadcasts): the sender offers the payload on a private inbox subject of its own and
 * sends, in place of it, a head message with no payload and three headers (`Punk-Parts`, `Punk-Bytes`,
 * `Punk-Outbox`). A receiver pulls it: it subscribes to an inbox of its own and publishes an empty message to the
 * outbox with that inbox as reply subject; the sender publishes every part there in order (`Punk-Part: <index>`;
 * NATS keeps the order of one publisher's messages to one subscriber). The receiver checks the indexes and the size
 * and reassembles; a part missing past its deadline is an error, never a truncated payload. An offer ends after its
 * first pull (a request or a reply: one receiver) or its time to live (a broadcast: any number of subscribers).
 *
 * JetStream (appends): the parts are stored first, as messages of the same subject with their own message ids
 * (`<msgId>:part:<index>`) and a `Punk-Part-Of` header; the head follows under the append's message id, with the
 * parts' sequences in `Punk-Part-Seqs`. Readers skip parts and rebuild a head from them by direct get.
 */
import { createInbox, Empty, headers as natsHeaders, type Msg, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import { PunkError } from '../errors.js';
import { ENVELOPE_ALLOWANCE_BYTES, payloadTooLarge } from './bus.js';

/** Header of a head message: how many parts the payload has. */
export const PARTS_HEADER = 'Punk-Parts';
/** Header of a head message: the payload's size in bytes. */
const BYTES_HEADER = 'Punk-Bytes';
/** Header of a core NATS head message: the subject the payload is pulled from. */
const OUTBOX_HEADER = 'Punk-Outbox';
/** Header of a core NATS part: its index, from 0. */
const PART_HEADER = 'Punk-Part';
/** Header of a stored part: the message id of its head. */
export const PART_OF_HEADER = 'Punk-Part-Of';
/** Header of a stored head: its parts' stream sequences, comma-separated, in order. */
const PART_SEQS_HEADER = 'Punk-Part-Seqs';

/** Room left in every part for its headers and protocol line, in bytes. */
const HEADER_ROOM_BYTES = 4096;
/** `max_payload` when the server said none (nats-server's default). */
const DEFAULT_SERVER_MAX_PAYLOAD = 1024 * 1024;

/** Large payloads over one NATS connection. */
export class NatsParts {
  /**
   * @param maxBytes the bus's limit (`PUNK_MAX_RESULT_BYTES`): a head announcing more than it and the envelope allowance
   *   (`ENVELOPE_ALLOWANCE_BYTES`) is refused before any pull.
   */
  constructor(
    private readonly nc: NatsConnection,
    private readonly maxBytes: number,
  ) {}

  /** Largest payload one message may carry on this connection: the server's `max_payload` less room for headers. */
  get partBytes(): number {
    return Math.max(1024, (this.nc.info?.max_payload ?? DEFAULT_SERVER_MAX_PAYLOAD) - HEADER_ROOM_BYTES);
  }

  /** Whether `payload` has to travel in parts. */
  needsParts(payload: Uint8Array): boolean {
    return payload.length > this.partBytes;
  }

  /** Whether a received message is a head (its payload is to be pulled or read from its parts). */
  static isHead(headers: MsgHdrs | undefined): boolean {
    return headers?.has(PARTS_HEADER) === true;
  }

  /**
   * Offers `payload` for pulling and writes the head's headers into `head`: for `ttlMs` milliseconds, or until the
   * first pull when `once`. Returns what ends the offer sooner (the head could not be sent).
   */
  offer(payload: Uint8Array, head: MsgHdrs, ttlMs: number, once: boolean): () => void {
    const size = this.partBytes;
    const count = Math.ceil(payload.length / size);
    const outbox = createInbox();
    const sub = this.nc.subscribe(outbox, {
      callback: (error, pull) => {
        if (error || !pull.reply) return;
        for (let index = 0; index < count; index++) {
          const h = natsHeaders();
          h.set(PART_HEADER, String(index));
          this.nc.publish(pull.reply, payload.subarray(index * size, (index + 1) * size), { headers: h });
        }
        if (once) end();
      },
    });
    const timer = setTimeout(() => end(), ttlMs);
    timer.unref();
    const end = () => {
      clearTimeout(timer);
      if (!sub.isClosed()) sub.unsubscribe();
    };
    head.set(PARTS_HEADER, String(count));
    head.set(BYTES_HEADER, String(payload.length));
    head.set(OUTBOX_HEADER, outbox);
    return end;
  }

  /**
   * The payload of a message: its own data, or, for a head, the payload pulled from its sender.
   * @param what names the message in errors (`the reply on punk.gateway.call`).
   * @throws PunkError `PayloadTooLarge` when the head announces more than the limit, `InvalidMessage` for a
   *   malformed head or part, `BusTimeout` when the parts do not all arrive within `timeoutMs`.
   */
  async payloadOf(msg: Msg, timeoutMs: number, what: string): Promise<Uint8Array> {
    if (!NatsParts.isHead(msg.headers)) return msg.data;
    const h = msg.headers!;
    const count = Number(h.get(PARTS_HEADER));
    const total = Number(h.get(BYTES_HEADER));
    const outbox = h.get(OUTBOX_HEADER);
    if (!Number.isSafeInteger(count) || count < 1 || !Number.isSafeInteger(total) || total < 0 || outbox === '') {
      throw new PunkError(
        'InvalidMessage',
        `${what} announces parts with malformed ${PARTS_HEADER}/${BYTES_HEADER}/${OUTBOX_HEADER} headers`,
      );
    }
    if (total > this.maxBytes + ENVELOPE_ALLOWANCE_BYTES) throw payloadTooLarge(what, total, this.maxBytes);
    const out = new Uint8Array(total);
    const inbox = createInbox();
    return new Promise<Uint8Array>((resolve, reject) => {
      let next = 0;
      let offset = 0;
      const fail = (error: PunkError) => {
        clearTimeout(timer);
        if (!sub.isClosed()) sub.unsubscribe();
        reject(error);
      };
      const timer = setTimeout(
        () => fail(new PunkError('BusTimeout', `${what}: ${next} of its ${count} parts arrived within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const sub = this.nc.subscribe(inbox, {
        callback: (error, part) => {
          const index = Number(part?.headers?.get(PART_HEADER));
          const failure = error
            ? new PunkError('BusUnavailable', `${what}: its parts could not be fetched: ${error.message}`)
            : part.headers?.code === 503
              ? new PunkError('BusTimeout', `${what}: its sender no longer offers it`)
              : index !== next || offset + part.data.length > total
                ? new PunkError('InvalidMessage', `${what}: part ${String(index)} arrived where part ${next} was due`)
                : undefined;
          if (failure) {
            fail(failure);
            return;
          }
          out.set(part.data, offset);
          offset += part.data.length;
          next++;
          if (next < count) return;
          clearTimeout(timer);
          sub.unsubscribe();
          if (offset === total) resolve(out);
          else reject(new PunkError('InvalidMessage', `${what}: its parts hold ${offset} bytes, not the ${total} announced`));
        },
      });
      this.nc.publish(outbox, Empty, { reply: inbox });
    });
  }

  /**
   * Appends `payload` to JetStream in parts, then its head; `store` appends one message and resolves with its
   * stream sequence. Resolves with the head's `store` result.
   */
  async appendInParts<T extends { seq: number }>(
    payload: Uint8Array,
    msgId: string,
    head: MsgHdrs,
    store: (data: Uint8Array, msgId: string, headers: MsgHdrs) => Promise<T>,
  ): Promise<T> {
    const size = this.partBytes;
    const seqs: number[] = [];
    for (let index = 0; index * size < payload.length; index++) {
      const h = natsHeaders();
      h.set(PART_OF_HEADER, msgId);
      seqs.push((await store(payload.subarray(index * size, (index + 1) * size), `${msgId}:part:${index}`, h)).seq);
    }
    head.set(PARTS_HEADER, String(seqs.length));
    head.set(BYTES_HEADER, String(payload.length));
    head.set(PART_SEQS_HEADER, seqs.join(','));
    return store(Empty, msgId, head);
  }

  /**
   * The payload of a stored message: its own data, or, for a head, its parts read back by direct get.
   * @throws PunkError `InvalidMessage` when a part is missing (aged out of the stream) or malformed;
   *   `BusUnavailable` when a part cannot be read now.
   */
  async storedPayload(jsm: JetStreamManager, stream: string, headers: MsgHdrs | undefined, data: Uint8Array): Promise<Uint8Array> {
    if (!NatsParts.isHead(headers)) return data;
    const total = Number(headers!.get(BYTES_HEADER));
    const seqs = headers!.get(PART_SEQS_HEADER).split(',').map(Number);
    const out = new Uint8Array(total);
    let offset = 0;
    for (const seq of seqs) {
      let part;
      try {
        part = await jsm.direct.getMessage(stream, { seq });
      } catch (error) {
        if (!/no message found/i.test((error as Error).message)) {
          throw new PunkError(
            'BusUnavailable',
            `a part of a message of stream ${stream} cannot be read: ${(error as Error).message}`,
            undefined,
            {
              cause: error,
            },
          );
        }
        part = null;
      }
      if (!part || offset + part.data.length > total) {
        throw new PunkError('InvalidMessage', `a message of stream ${stream} lost its part at sequence ${seq}`);
      }
      out.set(part.data, offset);
      offset += part.data.length;
    }
    if (offset !== total) throw new PunkError('InvalidMessage', `a message of stream ${stream} has ${offset} of its ${total} bytes`);
    return out;
  }
}
