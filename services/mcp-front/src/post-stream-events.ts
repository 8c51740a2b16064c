/**
 * Resumable POST streams of 2025-era sessions (MCP 2025-11-25 basic/transports
 * "Sending Messages to the Server" item 6 and "Resumability and Redelivery").
 *
 * The SDK transport serving a POST does the wire part when it is given an
 * `EventStore` (and `retryInterval`): for protocol 2025-11-25 and later it
 * opens the SSE answer with a priming event (an event id, empty data, a
 * `retry:` field) and gives every event the id the store returns; earlier
 * versions get ids but no priming event (the SDK decides by the version the
 * request names). {@link PostStreamEvents} is that store, over
 * {@link SessionEvents}: each POST stream gets a stream id Punk mints, its
 * events go to `PUNK_SSE` like those of GET streams, and the event ids are
 * `<streamId>:<seq>`, so a GET with `Last-Event-ID` on any replica finds the
 * stream (get-stream.ts). The priming event is stored too, as the stream's
 * first event (an empty message), which tells a POST stream from a GET stream.
 *
 * The call outlives its connection: when the connection drops after the
 * stream stored an event (whose id the client may hold) and before the
 * response, legacy.ts closes the request's server only once
 * {@link PostStreamEvents.answered} settles, so progress and the response
 * are stored meanwhile and a GET resuming the stream receives them.
 */
import { randomUUID } from 'node:crypto';
import {
  isJSONRPCErrorResponse,
  isJSONRPCResultResponse,
  type EventId,
  type EventStore,
  type JSONRPCMessage,
  type StreamId,
} from '@modelcontextprotocol/server';
import { eventId, type SessionEvents } from './session-events.js';

/** First protocol version whose POST streams are primed and resumable (SEP-1699). */
const PRIMED_SINCE = '2025-11-25';

/**
 * Whether POST streams of a session negotiated at `protocolVersion` are resumable (2025-11-25 and later;
 * versions are ISO dates, so they compare as strings). Earlier sessions keep unstored, id-less POST streams.
 */
export function resumablePostStreams(protocolVersion: string | undefined): boolean {
  return protocolVersion !== undefined && protocolVersion >= PRIMED_SINCE;
}

/**
 * The SDK `EventStore` of the transport serving one POST of a session: stores the stream's events in
 * `PUNK_SSE` under a stream id minted here, one per stream the transport names (a stateless transport has
 * just the POST's own).
 */
export class PostStreamEvents implements EventStore {
  /** Settles once the response to the POST's request is stored, or a store failed (the stream is then lost). */
  readonly answered: Promise<void>;
  private readonly streamIds = new Map<StreamId, string>();
  private settle!: () => void;
  private started = false;
  private finished = false;

  /**
   * @param events where the events go.
   * @param sessionId the `Mcp-Session-Id` of the POST.
   */
  constructor(
    private readonly events: SessionEvents,
    private readonly sessionId: string,
  ) {
    this.answered = new Promise((resolve) => (this.settle = resolve));
  }

  /** Whether the stream stored an event but not yet the response: the call should outlive a dropped connection. */
  get awaitingResponse(): boolean {
    return this.started && !this.finished;
  }

  /**
   * Stores one event of a stream (the priming event is the SDK's empty message) and returns its event id.
   * @throws PunkError from the bus; the SDK then writes nothing for the message.
   */
  async storeEvent(streamId: StreamId, message: JSONRPCMessage): Promise<EventId> {
    let minted = this.streamIds.get(streamId);
    if (minted === undefined) {
      minted = randomUUID();
      this.streamIds.set(streamId, minted);
    }
    try {
      const position = await this.events.append(this.sessionId, minted, message);
      this.started = true;
      return eventId(position);
    } catch (error) {
      this.finish();
      throw error;
    } finally {
      if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) this.finish();
    }
  }

  /** Marks the stream as one whose request gets no response (its client cancelled it): {@link answered} settles. */
  abandon(): void {
    this.finish();
  }

  private finish(): void {
    this.finished = true;
    this.settle();
  }

  /**
   * Never called: the SDK replays only on a GET it serves, and Punk serves GETs itself (get-stream.ts).
   * @throws Error always.
   */
  async replayEventsAfter(): Promise<StreamId> {
    throw new Error('GET streams, resumed POST streams included, are served by get-stream.ts, not by the SDK transport');
  }
}
