/**
 * The 2025 era (2025-03-26 … 2025-11-25) served by any replica (MCP
 * 2025-11-25 basic/transports "Session Management"): no replica keeps a
 * session in memory. Every POST, `initialize` included, is served by a fresh
 * SDK transport in stateless mode (`sessionIdGenerator: undefined`) and a
 * fresh `Server` built from the session's stored state; Punk itself mints
 * the `Mcp-Session-Id`, stores the session before the client can see the
 * `initialize` result, and checks the id on every later request. GET streams
 * and DELETE are Punk's own (see get-stream.ts).
 *
 * Answers: unknown, expired or foreign session → 404 (-32001); no session id
 * on a request other than `initialize` → 400 (-32000); DELETE → 204, and the
 * session ends on every replica.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { isInitializeRequest, isJSONRPCResultResponse, type InitializeRequest, type JSONRPCMessage, type Server } from '@modelcontextprotocol/server';
import { errorMessage, subjects, type Bus, type Logger, type Principal, type SessionState } from '@punk/lib';
import { scopeKey, type Scope } from './aggregate.js';
import { isClientAnswer, routeClientAnswer } from './client-answers.js';
import { SESSION_NOT_FOUND_CODE, sendJsonRpcError } from './errors.js';
import { headerOf, type GetStreams } from './get-stream.js';
import type { SessionContext } from './handlers.js';
import type { SessionStore, StoredSession } from './sessions.js';

/** What the 2025-era endpoint needs. */
export interface LegacyDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  sessions: SessionStore;
  streams: GetStreams;
  /** Builds a fresh server for one request of a session. */
  buildServer: (scope: Scope, session: SessionContext) => Promise<Server>;
  /** Who is calling (until API keys and OAuth land, every caller is the tenant's anonymous principal). */
  principalOf: (req: IncomingMessage) => Principal;
}

/** Serves 2025-era requests of every endpoint scope. */
export class LegacyEndpoint {
  private closed = false;

  constructor(private readonly deps: LegacyDeps) {}

  /** Serves one POST, GET or DELETE whose JSON body, if any, is already parsed into `body`; writes the whole response. */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const sessionId = headerOf(req, 'mcp-session-id');
    const principal = this.deps.principalOf(req);
    if (sessionId === undefined) {
      if (req.method === 'POST' && isInitializeRequest(body)) {
        await this.initialize(scope, principal, req, res, body);
        return;
      }
      sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required (send initialize first to start a session)');
      return;
    }
    const session = await this.deps.sessions.lookup(sessionId, { tenant: this.deps.tenant, scope: scopeKey(scope), principal });
    if (!session) {
      sendJsonRpcError(res, 404, SESSION_NOT_FOUND_CODE, `Session not found: ${sessionId} (it ended, expired, or belongs to another endpoint or principal); start a new session with initialize`);
      return;
    }
    this.deps.sessions.renew(session);
    if (req.method === 'GET') await this.deps.streams.serve(session, req, res);
    else if (req.method === 'DELETE') await this.end(session, res);
    else if (isClientAnswer(body)) await routeClientAnswer(this.deps, session.id, body, res);
    else if (isRootsListChanged(body)) await this.rootsChanged(session, res);
    else await this.serve(scope, this.context(session.id, principal, session.state), req, res, body);
  }

  /** Refuses new sessions from now on (shutdown); sessions themselves live on in the store. */
  close(): void {
    this.closed = true;
  }

  /** Serves `initialize`: mints the session id, and stores the session when the SDK has negotiated, before the result goes out. */
  private async initialize(scope: Scope, principal: Principal, req: IncomingMessage, res: ServerResponse, body: InitializeRequest): Promise<void> {
    if (this.closed) {
      sendJsonRpcError(res, 503, -32603, 'mcp-front is shutting down; retry on another replica');
      return;
    }
    const id = randomUUID();
    const requestId = (body as { id?: unknown }).id;
    const store = async (result: Record<string, unknown>): Promise<void> => {
      const now = new Date().toISOString();
      const state: SessionState = {
        tenant: this.deps.tenant,
        scope: scopeKey(scope),
        principal,
        protocolVersion: String(result['protocolVersion']),
        clientInfo: { ...body.params.clientInfo },
        capabilities: { ...body.params.capabilities },
        subscriptions: [],
        createdAt: now,
        renewedAt: now,
      };
      await this.deps.sessions.create(id, state);
    };
    res.setHeader('Mcp-Session-Id', id);
    await this.serve(scope, this.context(id, principal), req, res, body, async message => {
      if (!isJSONRPCResultResponse(message) || message.id !== requestId) return message;
      try {
        await store(message.result);
        return message;
      } catch (error) {
        this.deps.log.error({ sessionId: id, err: errorMessage(error) }, 'could not store a new session');
        return { jsonrpc: '2.0', id: message.id, error: { code: -32603, message: `could not store the session: ${errorMessage(error)}` } };
      }
    });
  }

  /**
   * Serves one POST with a fresh server and a stateless SDK transport;
   * `outgoing`, when given, sees (and may replace) every message the server sends.
   */
  private async serve(
    scope: Scope,
    session: SessionContext,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    outgoing?: (message: JSONRPCMessage) => Promise<JSONRPCMessage>,
  ): Promise<void> {
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    const server = await this.deps.buildServer(scope, {
      ...session,
      sendRelated: (message, relatedRequestId) => transport.send(message, { relatedRequestId }),
    });
    if (outgoing) {
      const send = transport.send.bind(transport);
      transport.send = async (message, options) => send(await outgoing(message), options);
    }
    res.on('close', () => void server.close().catch(() => undefined));
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /**
   * Passes the client's `notifications/roots/list_changed` (MCP 2025-11-25 client/roots) to the gateway replicas
   * holding the session's `per-client` upstream sessions (`roots-changed` on `punk.session.<id>.control`); 202.
   */
  private async rootsChanged(session: StoredSession, res: ServerResponse): Promise<void> {
    await this.deps.bus.publish(subjects.sessionControl(session.id), { type: 'roots-changed' });
    res.writeHead(202).end();
  }

  /** Ends a session everywhere: its entry is deleted and the replica holding its GET stream closes it. */
  private async end(session: StoredSession, res: ServerResponse): Promise<void> {
    await this.deps.sessions.delete(session.id);
    await this.deps.bus.publish(subjects.sessionControl(session.id), { type: 'ended' });
    res.writeHead(204).end();
  }

  private context(id: string, principal: Principal, state?: SessionState): SessionContext {
    return {
      id,
      principal,
      ...(state && { protocolVersion: state.protocolVersion }),
      clientCapabilities: state?.capabilities ?? {},
      sendRelated: async () => {
        throw new Error('no request is being served yet');
      },
      setLogLevel: async level => {
        await this.deps.sessions.update(id, state => ({ ...state, logLevel: level }));
      },
      setSubscribed: async (uri, on) => {
        await this.deps.sessions.update(id, state => {
          const others = state.subscriptions.filter(u => u !== uri);
          return { ...state, subscriptions: on ? [...others, uri] : others };
        });
      },
    };
  }
}

/** Whether a POST body is the client's `notifications/roots/list_changed`. */
function isRootsListChanged(body: unknown): boolean {
  return typeof body === 'object' && body !== null && !('id' in body) && (body as { method?: unknown }).method === 'notifications/roots/list_changed';
}
