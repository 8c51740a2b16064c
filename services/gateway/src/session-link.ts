/**
 * The way from a `per-client` upstream session to its one client session,
 * outside any call (MCP 2025-11-25 server/utilities/logging, client/roots).
 * Such an upstream connection belongs to exactly one 2025-era client
 * session, so what it sends on its own (log messages, `roots/list`) has one
 * recipient: the session's GET stream. Each message is handed to a front of
 * the tenant on `punk.tenant.<tenant>.session-message` (session-messages.ts
 * in mcp-front stores it with the session's SSE events), one at a time so
 * the client reads them in the upstream's order; a `roots/list` then waits on
 * `punk.client-request.<id>.answer` like a request during a call.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import { errorMessage, sendSessionMessage, type Bus, type Logger } from '@punk/lib';
import { requestClient, type PendingRequests } from './client-channel.js';

/** The client session of a `per-client` upstream session, as its upstream sees it. */
export interface SessionLink {
  readonly sessionId: string;
  /** Whether the client declared `roots` in `initialize`: the upstream connection then declares it too. */
  readonly roots: boolean;
  /** Passes an upstream `notifications/message` on to the client; failures are logged, never thrown. */
  log(params: Record<string, unknown>): void;
  /**
   * Asks the client for its roots on its GET stream and resolves with its result.
   * @throws ProtocolError -32601 when the client did not declare `roots`, the client's own error, or -32603
   *   when the message could not be stored (session gone, no GET stream yet) or the client did not answer in time.
   */
  listRoots(params: Record<string, unknown> | undefined): Promise<Record<string, unknown>>;
}

/** What {@link busSessionLink} needs. */
export interface SessionLinkDeps {
  bus: Bus;
  log: Logger;
  pending: PendingRequests;
}

/** The bus side of a {@link SessionLink}: one per `per-client` upstream session. */
export function busSessionLink(
  deps: SessionLinkDeps,
  tenant: string,
  sessionId: string,
  clientCapabilities: Record<string, unknown>,
): SessionLink {
  const { bus, log } = deps;
  // One message at a time: a queue group may hand consecutive requests to different fronts.
  let chain: Promise<unknown> = Promise.resolve();
  const deliver = (message: Record<string, unknown>): Promise<{ stored: boolean; reason?: string }> => {
    const sent = chain.then(() => sendSessionMessage(bus, tenant, { sessionId, message: message as { jsonrpc: '2.0'; method: string } }));
    chain = sent.catch(() => undefined);
    return sent;
  };
  return {
    sessionId,
    roots: clientCapabilities['roots'] !== undefined,
    log: (params) => {
      deliver({ jsonrpc: '2.0', method: 'notifications/message', params })
        .then((reply) => {
          if (!reply.stored) log.debug({ sessionId, reason: reply.reason }, 'upstream log message not stored for the client');
        })
        .catch((error: unknown) =>
          log.warn({ sessionId, err: errorMessage(error) }, 'could not forward an upstream log message to the client'),
        );
    },
    listRoots: async (params) => {
      if (clientCapabilities['roots'] === undefined)
        throw new ProtocolError(
          ProtocolErrorCode.MethodNotFound,
          'roots/list cannot be relayed: the client did not declare the roots capability',
        );
      return requestClient(deps, sessionId, 'roots/list', params, async (message) => {
        const reply = await deliver(message);
        if (!reply.stored) throw new Error(reply.reason ?? 'the front did not store it');
      });
    },
  };
}
