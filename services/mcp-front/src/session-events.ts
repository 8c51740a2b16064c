/**
 * Server-to-client messages of 2025-era sessions (MCP 2025-11-25
 * basic/transports "Resumability and Redelivery"): each message is appended
 * to stream `PUNK_SSE` on `punk.sse.<sessionId>.<streamId>`, then announced on
 * `punk.session.<sessionId>.out` so the replica holding that GET stream
 * writes it. Event ids are `<streamId>:<seq>` (seq: the stream sequence of
 * the stored message), so any replica can replay a stream after a
 * `Last-Event-ID`, and only that stream.
 *
 * GET streams and resumable POST streams (post-stream-events.ts) share this
 * store. A POST stream's first stored event is its priming event, an empty
 * message: it marks the stream as a POST's and is never written again (GET
 * streams write their priming event without storing it).
 */
import { randomUUID } from 'node:crypto';
import { parseMessage, sseEventSchema, streams, subjects, type Bus } from '@punk/lib';
import { isMintedId } from './sessions.js';

/** A stored event of one stream. */
export interface StoredEvent {
  /** Stream sequence in `PUNK_SSE`; increases along a stream. */
  seq: number;
  /** The JSON-RPC message to write. */
  message: Record<string, unknown>;
}

/** Whether a stored event is the priming event of a POST stream (an empty message; nothing to write). */
export function isPrimingEvent(event: StoredEvent): boolean {
  return Object.keys(event.message).length === 0;
}

/** A position in one SSE stream of a session, as carried by an event id. */
export interface StreamPosition {
  streamId: string;
  /** Sequence of the last event received (0: before the first). */
  seq: number;
}

/** The SSE event id of a position: `<streamId>:<seq>`. */
export function eventId(position: StreamPosition): string {
  return `${position.streamId}:${position.seq}`;
}

/** Parses an SSE event id minted by `eventId`; undefined when it is not one. */
export function parseEventId(id: string): StreamPosition | undefined {
  const match = /^([^:]+):(\d+)$/.exec(id);
  if (!match || !isMintedId(match[1]!)) return undefined;
  return { streamId: match[1]!, seq: Number(match[2]) };
}

/** Stores and reads the SSE events of 2025-era sessions. */
export class SessionEvents {
  constructor(private readonly bus: Bus) {}

  /**
   * Stores `message` as the next event of a session's stream and wakes the
   * replica holding it. Resolves with the stored event's position.
   * @throws PunkError from the bus (`BusTimeout`, `BusStreamNotFound`, …).
   */
  async append(sessionId: string, streamId: string, message: Record<string, unknown>): Promise<StreamPosition> {
    const ack = await this.bus.append(subjects.sseEvent(sessionId, streamId), { message }, { msgId: randomUUID() });
    await this.bus.publish(subjects.sessionOut(sessionId), { streamId, seq: ack.seq });
    return { streamId, seq: ack.seq };
  }

  /**
   * The events of one stream after a position, in order (at most 1000 per call).
   * @throws PunkError `InvalidMessage` for a malformed stored event, or a bus error.
   */
  async after(sessionId: string, position: StreamPosition): Promise<StoredEvent[]> {
    const subject = subjects.sseEvent(sessionId, position.streamId);
    const stored = await this.bus.readStream(streams.sse.name, { subject, afterSeq: position.seq });
    return stored.map((m) => ({ seq: m.seq, message: parseMessage(sseEventSchema, subject, m.data).message }));
  }

  /**
   * Whether a POST opened this stream of a session: its first stored event is a priming event (one read).
   * @throws PunkError `InvalidMessage` for a malformed stored event, or a bus error.
   */
  async openedByPost(sessionId: string, streamId: string): Promise<boolean> {
    const subject = subjects.sseEvent(sessionId, streamId);
    const [first] = await this.bus.readStream(streams.sse.name, { subject, afterSeq: 0, limit: 1 });
    return first !== undefined && isPrimingEvent({ seq: first.seq, message: parseMessage(sseEventSchema, subject, first.data).message });
  }
}
