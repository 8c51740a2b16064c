/**
 * The deprecated HTTP+SSE transport of MCP 2024-11-05 (basic/transports
 * "HTTP with SSE"), for clients that speak only it, at `/sse`,
 * `/servers/<name>/sse` and `/servers/<namespace>/<name>/sse` (behind the
 * same checks as the Streamable HTTP endpoints: http.ts):
 *
 * - GET opens the session's event stream; its first event, `endpoint`, names
 *   where to POST: the same path with `?sessionId=<id>`, behind the prefix
 *   the client sees (below);
 * - a POST there carries one message (or batch); it answers 202, and the
 *   server's answers arrive on the event stream (`event: message`);
 * - the session ends when its event stream closes (the transport has no
 *   resumption); a stream whose client never sends `initialize` closes after
 *   {@link INITIALIZE_WITHIN_MS}.
 *
 * Each HTTP+SSE session is a 2025-era session (legacy.ts), created by its
 * `initialize` under the id of the endpoint event and bound, like them, to
 * the endpoint and the principal of that `initialize`; every later message
 * gets the same checks, limits, governance and ledger. Its event stream is a
 * stream of `PUNK_SSE` whose stream id is the session id, held by the replica
 * that got the GET (get-stream.ts): a POST reaching any other replica is
 * served there and its messages are stored on that stream and announced on
 * `punk.session.<id>.out`, so the holder writes them; no sticky sessions.
 *
 * The endpoint's prefix: `X-Forwarded-Prefix` when the request carries one (a
 * URL path such as `/punk`; it only shapes the caller's own endpoint URL);
 * else the path of `PUNK_PUBLIC_URL` when the request's `Host` is that URL's
 * host; else none. The endpoint is a path, never an absolute URL, so a client
 * reaching Punk at another host (in the cluster) still POSTs to the origin it
 * connected to.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorMessage, subjects, type Bus, type Logger, type Principal } from '@punk/lib';
import type { Scope } from './aggregate.js';
import { SESSION_NOT_FOUND_CODE, sendJsonRpcError } from './errors.js';
import { headerOf, type GetStreams } from './get-stream.js';
import type { LegacyEndpoint } from './legacy.js';
import { isMintedId, type SessionStore } from './sessions.js';

/** How long an event stream waits for its client's `initialize` before it closes, in milliseconds. */
export const INITIALIZE_WITHIN_MS = 60_000;

/** What the HTTP+SSE endpoints need. */
export interface HttpSseDeps {
  bus: Bus;
  log: Logger;
  sessions: SessionStore;
  streams: GetStreams;
  /** Serves the POSTed messages (legacy.ts `handleHttpSse`). */
  legacy: LegacyEndpoint;
  /** `PUNK_PUBLIC_URL`: its path prefixes the endpoint for requests to its host. */
  publicUrl?: string;
  /** How long a stream waits for `initialize`; default {@link INITIALIZE_WITHIN_MS}. */
  initializeWithinMs?: number;
}

/** Serves the HTTP+SSE transport of every endpoint scope. */
export class HttpSseEndpoint {
  private closed = false;
  private readonly publicUrl: URL | undefined;

  /** @throws TypeError when `publicUrl` is not a URL. */
  constructor(private readonly deps: HttpSseDeps) {
    this.publicUrl = deps.publicUrl === undefined ? undefined : new URL(deps.publicUrl);
  }

  /**
   * Serves one GET (the event stream) or POST (`?sessionId=`) of `principal` whose JSON body, if any, is already
   * parsed into `body`; http.ts checked the rest.
   */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    if (req.method === 'GET') await this.open(req, res);
    else await this.post(scope, req, res, body, principal);
  }

  /** Refuses new event streams from now on (shutdown). */
  close(): void {
    this.closed = true;
  }

  /** Opens an event stream: mints the session id and writes the `endpoint` event. */
  private async open(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (this.closed) {
      sendJsonRpcError(res, 503, -32603, 'mcp-front is shutting down; retry on another replica');
      return;
    }
    const prefix = this.prefixOf(req);
    if (prefix === undefined) {
      sendJsonRpcError(
        res,
        400,
        -32000,
        `Bad Request: X-Forwarded-Prefix ${JSON.stringify(headerOf(req, 'x-forwarded-prefix'))} is not a URL path such as /punk; fix the proxy's setting`,
      );
      return;
    }
    const id = randomUUID();
    const endpoint = `${prefix}${pathOf(req)}?sessionId=${id}`;
    await this.deps.streams.holdHttpSse(
      id,
      res,
      `event: endpoint\ndata: ${endpoint}\n\n`,
      this.deps.initializeWithinMs ?? INITIALIZE_WITHIN_MS,
      () => {
        this.end(id);
      },
    );
  }

  /** Serves a POST of a session's messages. */
  private async post(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    const sessionId = new URL(req.url ?? '/', 'http://localhost').searchParams.get('sessionId');
    if (sessionId === null || sessionId === '') {
      sendJsonRpcError(
        res,
        400,
        -32000,
        `Bad Request: this is an HTTP+SSE endpoint (MCP 2024-11-05): GET ${pathOf(req)} to open an event stream, then POST to the URL of its endpoint event (…?sessionId=<id>); Streamable HTTP clients use the /mcp endpoints`,
      );
      return;
    }
    if (!isMintedId(sessionId)) {
      sendJsonRpcError(
        res,
        404,
        SESSION_NOT_FOUND_CODE,
        `Session not found: ${JSON.stringify(sessionId)} is not a session id Punk minted; open an event stream with GET ${pathOf(req)}`,
      );
      return;
    }
    await this.deps.legacy.handleHttpSse(scope, sessionId, req, res, body, principal);
  }

  /** Ends the session of a closed event stream everywhere (its calls may still finish; their answers go nowhere). */
  private end(id: string): void {
    void (async () => {
      await this.deps.sessions.delete(id);
      await this.deps.bus.publish(subjects.sessionControl(id), { type: 'ended' });
    })().catch((error: unknown) => {
      this.deps.log.warn({ sessionId: id, err: errorMessage(error) }, 'could not end an HTTP+SSE session');
    });
  }

  /** The path prefix the client sees (see the module comment); undefined for an `X-Forwarded-Prefix` that is not a path. */
  private prefixOf(req: IncomingMessage): string | undefined {
    const forwarded = headerOf(req, 'x-forwarded-prefix');
    if (forwarded !== undefined) {
      const prefix = forwarded.trim().replace(/\/+$/, '');
      return prefix === '' || PATH_PREFIX.test(prefix) ? prefix : undefined;
    }
    if (this.publicUrl && req.headers.host?.toLowerCase() === this.publicUrl.host) return this.publicUrl.pathname.replace(/\/+$/, '');
    return '';
  }
}

/** A path prefix: `/` and segments of unreserved characters, sub-delimiters, `:`, `@` and percent escapes; no `//`. */
const PATH_PREFIX = /^(\/[A-Za-z0-9\-._~!$&'()*+,;=:@%]+)+$/;

/** The request's path as Punk's router saw it (express keeps it in `originalUrl`). */
function pathOf(req: IncomingMessage): string {
  return new URL((req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://localhost').pathname;
}
