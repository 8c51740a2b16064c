/**
 * The GET stream of a 2025-era session (MCP 2025-11-25 basic/transports
 * "Listening for Messages from the Server" and "Resumability and
 * Redelivery"), held by whichever replica the GET reached:
 *
 * - one stream per session: opening one broadcasts `stream-opened` on
 *   `punk.session.<id>.control`, and the replica holding the previous one
 *   closes it; `ended` (DELETE) closes it too;
 * - a priming event (an id, empty data, a `retry:` field) opens it; a GET
 *   with `Last-Event-ID: <streamId>:<seq>` first replays what that stream
 *   stored after `seq`, in order, then continues live;
 * - live events arrive as announcements on `punk.session.<id>.out`; the
 *   holder reads the stream from its last written position, so every event
 *   is written once and in order, whatever order announcements arrive in.
 *
 * A GET whose `Last-Event-ID` names a POST stream (its first stored event is
 * a priming event: post-stream-events.ts) resumes that stream instead: the
 * same replay and live delivery, but it never becomes the session's GET
 * stream (no `stream-opened`, no priming event, another GET leaves it open),
 * and it ends right after the response to the POST's request, as the POST
 * would have (MCP 2025-11-25 basic/transports: "After the JSON-RPC response
 * has been sent, the server SHOULD terminate the SSE stream").
 *
 * The event stream of a 2024-11-05 HTTP+SSE session (http-sse.ts) is held the same way, its stream id
 * the session id: it opens with the `endpoint` event instead of a priming event, before the session
 * exists, and no GET replaces it.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJSONRPCErrorResponse, isJSONRPCResultResponse } from '@modelcontextprotocol/server';
import {
  errorMessage,
  parseMessage,
  sessionControlSchema,
  sessionOutSchema,
  subjects,
  type Bus,
  type BusSubscription,
  type Logger,
} from '@punk/lib';
import { SESSION_NOT_FOUND_CODE, sendJsonRpcError } from './errors.js';
import { eventId, isPrimingEvent, parseEventId, type SessionEvents, type StreamPosition } from './session-events.js';
import type { SessionStore, StoredSession } from './sessions.js';

/** What the GET streams need. */
export interface GetStreamDeps {
  bus: Bus;
  log: Logger;
  sessions: SessionStore;
  events: SessionEvents;
  /** Reconnection delay the client is told (SSE `retry:`), in milliseconds. */
  retryMs: number;
  /** Interval of SSE keep-alive comments (which also renew the session), in milliseconds. */
  keepAliveMs: number;
}

/**
 * What a held stream is: a session's GET stream; a resumed POST stream (ends after the response, is not the
 * session's GET stream); the event stream of a 2024-11-05 HTTP+SSE session (http-sse.ts: never replaced by a GET).
 */
type StreamKind = 'get' | 'post' | 'http-sse';

/** One stream this replica holds. */
interface HeldStream {
  sessionId: string;
  connection: string;
  kind: StreamKind;
  /** Position of the last event written. */
  position: StreamPosition;
  res: ServerResponse;
  subscriptions: BusSubscription[];
  timer: NodeJS.Timeout | undefined;
  /** Serialises reads and writes of the stream. */
  chain: Promise<void>;
  closed: boolean;
  /** Runs once when the stream closes. */
  onClose?: () => void;
}

/** The GET streams held by this replica. */
export class GetStreams {
  private readonly held = new Set<HeldStream>();

  constructor(private readonly deps: GetStreamDeps) {}

  /**
   * Serves a GET on a session's endpoint (whose `Accept` http.ts checked):
   * 400 for a `Last-Event-ID` Punk did not mint, 404 when the session ended
   * meanwhile; otherwise an SSE stream that stays open until the client
   * leaves, another GET replaces it, the session ends or the front closes
   * (a resumed POST stream: until its response is written, the client
   * leaves, the session ends or the front closes).
   */
  async serve(session: StoredSession, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const lastEventId = headerOf(req, 'last-event-id');
    const resumed = lastEventId === undefined ? undefined : parseEventId(lastEventId);
    if (lastEventId !== undefined && !resumed) {
      sendJsonRpcError(res, 400, -32000, `Last-Event-ID ${JSON.stringify(lastEventId)} is not an event id of this endpoint`);
      return;
    }
    const post = resumed !== undefined && (await this.deps.events.openedByPost(session.id, resumed.streamId));
    const stream = this.stream(session.id, post ? 'post' : 'get', resumed ?? { streamId: randomUUID(), seq: 0 }, res);
    // Listen before the stream becomes the session's current one: nothing stored on it is missed.
    await this.listen(stream);
    if (!post) {
      const current = await this.deps.sessions
        .update(session.id, (state) => ({ ...state, stream: stream.position.streamId }))
        .catch((error: unknown) => {
          this.deps.log.warn({ sessionId: session.id, err: errorMessage(error) }, 'could not record the GET stream of a session');
          return undefined;
        });
      if (!current) {
        await this.unsubscribe(stream);
        sendJsonRpcError(
          res,
          404,
          SESSION_NOT_FOUND_CODE,
          `Session not found: ${session.id} (it ended); start a new session with initialize`,
        );
        return;
      }
      await this.deps.bus.publish(subjects.sessionControl(session.id), { type: 'stream-opened', connection: stream.connection });
    }
    this.open(stream, post ? '' : `id: ${eventId(stream.position)}\nretry: ${String(this.deps.retryMs)}\ndata: \n\n`, () => undefined);
  }

  /**
   * Holds the event stream of a 2024-11-05 HTTP+SSE session on this replica (http-sse.ts): `opening` (its
   * `endpoint` event) first, then every event stored on the session's stream, whose stream id is the session id,
   * as GET streams are written. No replay, and no GET replaces it. It stays open until the client leaves, the
   * session ends, the front closes, or a keep-alive finds no session `initializeWithinMs` after it opened (the
   * client never sent `initialize`); `onClose` runs then, once.
   */
  async holdHttpSse(
    sessionId: string,
    res: ServerResponse,
    opening: string,
    initializeWithinMs: number,
    onClose: () => void,
  ): Promise<void> {
    const stream = this.stream(sessionId, 'http-sse', { streamId: sessionId, seq: 0 }, res);
    stream.onClose = onClose;
    await this.listen(stream);
    const openedAt = Date.now();
    this.open(stream, opening, (session) => {
      if (!session && Date.now() - openedAt >= initializeWithinMs) this.close(stream, false);
    });
  }

  private stream(sessionId: string, kind: StreamKind, position: StreamPosition, res: ServerResponse): HeldStream {
    return {
      sessionId,
      connection: randomUUID(),
      kind,
      position,
      res,
      subscriptions: [],
      timer: undefined,
      chain: Promise.resolve(),
      closed: false,
    };
  }

  /** Subscribes a stream to its session's control and announcement subjects. */
  private async listen(stream: HeldStream): Promise<void> {
    const { bus } = this.deps;
    const { sessionId } = stream;
    stream.subscriptions.push(
      await bus.subscribe(subjects.sessionControl(sessionId), (data) => {
        const control = parseMessage(sessionControlSchema, subjects.sessionControl(sessionId), data);
        if (
          control.type === 'ended' ||
          (control.type === 'stream-opened' && stream.kind === 'get' && control.connection !== stream.connection)
        )
          this.close(stream, false);
      }),
      await bus.subscribe(subjects.sessionOut(sessionId), (data) => {
        const out = parseMessage(sessionOutSchema, subjects.sessionOut(sessionId), data);
        if (out.streamId === stream.position.streamId) this.pump(stream);
      }),
    );
  }

  /**
   * Starts writing a listening stream: the SSE head, `first`, keep-alive comments (each renews the
   * session, then `tick` sees it, undefined when it is gone), and what is stored.
   */
  private open(stream: HeldStream, first: string, tick: (session: StoredSession | undefined) => void): void {
    const { sessions } = this.deps;
    const { res } = stream;
    this.held.add(stream);
    res.on('close', () => {
      this.close(stream, false);
    });
    res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
      ...(stream.kind !== 'http-sse' && { 'Mcp-Session-Id': stream.sessionId }),
    });
    if (first !== '') res.write(first);
    stream.timer = setInterval(() => {
      res.write(': keepalive\n\n');
      sessions.get(stream.sessionId).then(
        (s) => {
          if (s) sessions.renew(s);
          tick(s);
        },
        () => undefined,
      );
    }, this.deps.keepAliveMs);
    this.pump(stream);
  }

  /** Closes every stream this replica holds, telling clients when to reconnect (`retry:`). */
  closeAll(): void {
    for (const stream of [...this.held]) this.close(stream, true);
  }

  /** Writes what the stream stored after its last written position; a POST stream ends after its response. */
  private pump(stream: HeldStream): void {
    stream.chain = stream.chain.then(async () => {
      try {
        let batch;
        do {
          if (stream.closed) return;
          batch = await this.deps.events.after(stream.sessionId, stream.position);
          for (const event of batch) {
            if (stream.closed) return;
            stream.position = { streamId: stream.position.streamId, seq: event.seq };
            if (isPrimingEvent(event)) continue;
            stream.res.write(`id: ${eventId(stream.position)}\nevent: message\ndata: ${JSON.stringify(event.message)}\n\n`);
            if (stream.kind === 'post' && (isJSONRPCResultResponse(event.message) || isJSONRPCErrorResponse(event.message))) {
              this.close(stream, false);
              return;
            }
          }
        } while (batch.length >= 1000);
      } catch (error) {
        this.deps.log.warn({ sessionId: stream.sessionId, err: errorMessage(error) }, 'could not read the SSE events of a session');
      }
    });
  }

  private close(stream: HeldStream, retryHint: boolean): void {
    if (stream.closed) return;
    stream.closed = true;
    this.held.delete(stream);
    clearInterval(stream.timer);
    void this.unsubscribe(stream);
    stream.onClose?.();
    if (!stream.res.writableEnded) {
      if (retryHint && stream.res.headersSent) stream.res.write(`retry: ${this.deps.retryMs}\n\n`);
      stream.res.end();
    }
  }

  private async unsubscribe(stream: HeldStream): Promise<void> {
    await Promise.allSettled(stream.subscriptions.map((s) => s.unsubscribe()));
    stream.subscriptions = [];
  }
}

/** The first value of a request header. */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
