/**
 * The 2025-era session a request is served in, as the handlers of handlers.ts and forward.ts see it (built by
 * legacy.ts from the stored session state).
 */
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/server';
import type { LogLevel, Principal } from '@punk/lib';

/**
 * The 2025-era session a server is built for (absent for 2026-era requests).
 * Each request of a session gets a fresh server, so everything the session
 * negotiated comes from its stored state.
 */
export interface SessionContext {
  /** The `Mcp-Session-Id`; forwarded calls carry it. */
  id: string;
  /** Who owns the session; forwarded calls act as this principal. */
  principal: Principal;
  /** Version negotiated by `initialize`; absent while `initialize` itself is served. */
  protocolVersion?: string;
  /** The threshold the client set with `logging/setLevel`, if any; forwarded calls carry it as the request's log level. */
  logLevel?: LogLevel;
  /** Stores the threshold of `logging/setLevel` (MCP 2025-11-25 server/utilities/logging). */
  setLogLevel(level: LogLevel): Promise<void>;
  /** Capabilities the client declared in `initialize` (empty while `initialize` itself is served). */
  clientCapabilities: Record<string, unknown>;
  /**
   * Writes a message on the response stream of the request `relatedRequestId` being served
   * (a server-to-client request relayed from an upstream: call-channel.ts).
   */
  sendRelated(message: JSONRPCMessage, relatedRequestId: RequestId): Promise<void>;
  /** Adds (`on`) or removes a URI from the session's stored subscriptions (MCP 2025-11-25 server/resources "Subscriptions"). */
  setSubscribed(uri: string, on: boolean): Promise<void>;
  /** Versions `initialize` may agree to; absent: every version the HTTP layer accepts (an HTTP+SSE session's add 2024-11-05). */
  protocolVersions?: readonly string[];
}
