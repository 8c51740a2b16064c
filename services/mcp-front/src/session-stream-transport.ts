/**
 * The SDK server transport of one POST of a 2024-11-05 HTTP+SSE session
 * (http-sse.ts): it hands the POST's messages to the request's `Server` and
 * stores every message the server sends (responses, progress, logs,
 * server-to-client requests) as the next event of the session's event
 * stream in `PUNK_SSE` (session-events.ts), whose stream id is the session
 * id; the replica holding the session's GET stream writes it (get-stream.ts),
 * whichever replica served the POST.
 */
import {
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type Transport,
} from '@modelcontextprotocol/server';
import type { SessionEvents } from './session-events.js';

/** A transport for one POST whose answers go onto the session's event stream. */
export class SessionStreamTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  /** Settles once every request of the POST is answered, or the transport closed. */
  readonly answered: Promise<void>;
  private readonly pending = new Set<string | number>();
  private settle!: () => void;

  /**
   * @param events where the server's messages go.
   * @param sessionId the HTTP+SSE session (and the id of its event stream).
   */
  constructor(
    private readonly events: SessionEvents,
    readonly sessionId: string,
  ) {
    this.answered = new Promise((resolve) => (this.settle = resolve));
  }

  /** Nothing to start: the POST's messages come through {@link receive}. */
  async start(): Promise<void> {}

  /**
   * Stores one message on the session's event stream.
   * @throws PunkError from the bus; the message is then lost (the SDK reports it through `onerror`).
   */
  async send(message: JSONRPCMessage): Promise<void> {
    await this.events.append(this.sessionId, this.sessionId, message);
    const id = isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message) ? message.id : undefined;
    if (id !== undefined && this.pending.delete(id) && this.pending.size === 0) this.settle();
  }

  /** Settles {@link answered} and tells the server. */
  close(): Promise<void> {
    this.settle();
    this.onclose?.();
    return Promise.resolve();
  }

  /** Hands the POST's message (or batch) to the server; {@link answered} settles at once when it holds no request. */
  receive(body: unknown): void {
    const messages = (Array.isArray(body) ? body : [body]) as JSONRPCMessage[];
    for (const message of messages) if (isJSONRPCRequest(message)) this.pending.add(message.id);
    for (const message of messages) this.onmessage?.(message);
    if (this.pending.size === 0) this.settle();
  }
}
