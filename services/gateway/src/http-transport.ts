/**
 * MCP over HTTP to one server: Streamable HTTP first and, when the server answers the POST of the handshake
 * with 400, 404 or 405, the 2024-11-05 HTTP+SSE transport on the same URL (MCP 2025-11-25 basic/transports
 * "Backwards Compatibility"). Every request carries the connection's headers and goes through the given fetch;
 * every HTTP 401 the server answers is counted, so the caller can tell a refused credential from other failures.
 */
import { withBearerOf } from './call-bearer.js';
import type { FetchLike } from '@modelcontextprotocol/client';
import { SSEClientTransport, StreamableHTTPClientTransport, type Client } from '@modelcontextprotocol/client';
import { errorMessage } from '@punk/lib';

/** The HTTP transports of MCP: Streamable HTTP (2025-03-26 and later) and HTTP+SSE (2024-11-05). */
export type HttpTransportKind = 'streamable-http' | 'sse';

/** Statuses of the Streamable HTTP handshake POST that mean "an HTTP+SSE server" (MCP 2025-11-25 basic/transports). */
export const SSE_FALLBACK_STATUSES: readonly number[] = [400, 404, 405];

/** Options of {@link connectHttp}. */
export interface HttpConnectOptions {
  /** The declared transport: `streamable-http` tries Streamable HTTP, then HTTP+SSE; `sse` goes straight to HTTP+SSE. */
  transport: HttpTransportKind;
  /** Sent on every request (the resolved `spec.headers`). */
  headers: Record<string, string>;
  /** The fetch of every request (e.g. the SSRF-guarded one); the global fetch when absent. */
  fetch?: FetchLike;
  /** Handshake budget of each attempt, in milliseconds. */
  timeoutMs: () => number;
  /** A new client for an attempt: `streamable-http` ones negotiate both eras, `sse` ones speak the 2025 era. */
  newClient: (transport: HttpTransportKind) => Client;
  /** Called when the Streamable HTTP handshake was refused and HTTP+SSE is tried, with the status that said so. */
  onFallback?: (status: number) => void;
  /** Counts the HTTP 401 and session-ending 404 answers of the connection, its failed attempts included (a new counter when absent). */
  seen?: HttpAnswers;
}

/** What a connection's HTTP answers said so far. */
export interface HttpAnswers {
  /** How many HTTP 401 (unauthorized) answers came back. */
  unauthorized: number;
  /**
   * How many HTTP 404 answers came back to a request carrying an `Mcp-Session-Id`: the server ended the session
   * (MCP 2025-11-25 basic/transports, session management: the client must start a new one).
   */
  sessionLost: number;
}

/** A connected HTTP client. */
export interface HttpConnection {
  client: Client;
  /** The transport the server spoke. */
  transport: HttpTransportKind;
  /** How many HTTP 401 answers this connection got so far (its attempts included). */
  unauthorized: () => number;
  /** How many times the server answered HTTP 404 to this connection's session (see {@link HttpAnswers.sessionLost}). */
  sessionLost: () => number;
  /** The counts behind {@link unauthorized} and {@link sessionLost}, for requests sent beside the SDK transport (http-exchange.ts). */
  answers: HttpAnswers;
}

/**
 * Connects to `url`. A client that could not connect is closed before this throws.
 * @throws what the SDK throws (an `SdkHttpError` carries the HTTP status); when the fallback failed too, an
 *   Error naming the refused handshake and the fallback's failure.
 */
export async function connectHttp(url: URL, options: HttpConnectOptions): Promise<HttpConnection> {
  const seen = options.seen ?? { unauthorized: 0, sessionLost: 0 };
  const base = options.fetch ?? fetch;
  const observed: FetchLike = async (input, init) => {
    // A call of a server with spec.auth.tokenExchange carries its caller's exchanged token (call-bearer.ts).
    const response = await base(input, { ...init, headers: withBearerOf(init?.headers, init?.body) });
    if (response.status === 401) seen.unauthorized++;
    if (response.status === 404 && new Headers(init?.headers).has('mcp-session-id')) seen.sessionLost++;
    return response;
  };
  const requestInit = { headers: options.headers };
  const attempt = async (transport: HttpTransportKind): Promise<Client> => {
    const client = options.newClient(transport);
    const t =
      transport === 'sse'
        ? new SSEClientTransport(url, { requestInit, fetch: observed })
        : new StreamableHTTPClientTransport(url, { requestInit, fetch: observed });
    try {
      await client.connect(t, { timeout: Math.max(1, options.timeoutMs()) });
      return client;
    } catch (error) {
      await client.close().catch(() => undefined);
      throw error;
    }
  };
  const unauthorized = () => seen.unauthorized;
  const sessionLost = () => seen.sessionLost;
  if (options.transport === 'sse') return { client: await attempt('sse'), transport: 'sse', unauthorized, sessionLost, answers: seen };
  try {
    return { client: await attempt('streamable-http'), transport: 'streamable-http', unauthorized, sessionLost, answers: seen };
  } catch (error) {
    const status = httpStatusOf(error);
    if (status === undefined || !SSE_FALLBACK_STATUSES.includes(status)) throw error;
    options.onFallback?.(status);
    try {
      return { client: await attempt('sse'), transport: 'sse', unauthorized, sessionLost, answers: seen };
    } catch (fallbackError) {
      // Neither transport: say both, so a Streamable HTTP server's own 400 is not hidden behind the SSE error.
      throw new Error(
        `the Streamable HTTP handshake was answered HTTP ${status} (${errorMessage(error)}), and the HTTP+SSE fallback failed: ${errorMessage(fallbackError)}`,
        {
          cause: fallbackError,
        },
      );
    }
  }
}

/** The HTTP status an SDK error carries (`SdkHttpError.status`, or its cause's), if any. */
export function httpStatusOf(error: unknown): number | undefined {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const status = (e as { status?: unknown }).status ?? (e as { data?: { status?: unknown } }).data?.status;
    if (typeof status === 'number') return status;
  }
  return undefined;
}
