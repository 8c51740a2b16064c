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
 * session ends on every replica. `initialize` is limited: more than the
 * configured number per client address and minute, cluster-wide (rate-limit.ts)
 * → 429 with `Retry-After`; more live sessions than `maxSessions` (counted
 * in the store: sessions written within one TTL) → 503 with `Retry-After`; a principal already holding its
 * share of sessions, cluster-wide (session-shares.ts) → 429 with `Retry-After`.
 *
 * Response mode (`auto`): a POST is answered as JSON unless it may stream:
 * a request carrying a progress token, or a call forwarded upstream
 * (`tools/call`, `resources/read`, `prompts/get`, `completion/complete`;
 * every POST accepts `text/event-stream`: http.ts). Those are answered as SSE, with
 * a `: keepalive` comment every `keepAliveMs`, so a call that runs for
 * minutes keeps its connection busy through proxies that drop idle ones.
 * `json` never streams (progress, logs and server-to-client requests of a
 * call are then lost, and a long call sends nothing until its result),
 * `always` always does. In sessions at 2025-11-25 or later, POST streams
 * that may carry more than the response (a progress token, or a forwarded
 * call in a session whose client declared sampling, elicitation or roots,
 * or set a log level; every stream in mode `always`) are resumable
 * (post-stream-events.ts): a priming event with `retry:` opens them, every
 * event is stored with an id, and a dropped connection does not end the
 * call: its server closes once the response is stored, and the client
 * resumes with GET and `Last-Event-ID` on any replica (get-stream.ts).
 * Other POST streams, and earlier sessions', are neither stored nor resumable.
 *
 * Sessions of the 2024-11-05 HTTP+SSE transport (http-sse.ts) are sessions of this endpoint too
 * (`handleHttpSse`): the same checks, limits and calls, but `initialize` takes the id of the client's
 * event stream, and what a POST's server sends goes onto that stream (session-stream-transport.ts).
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import {
  isInitializeRequest,
  ProtocolErrorCode,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type InitializeRequest,
  type JSONRPCMessage,
  type Server,
  type Transport,
} from '@modelcontextprotocol/server';
import { errorMessage, subjects, type Bus, type Logger, type Principal, type SessionState } from '@punk/lib';
import { scopeKey, type Scope } from './aggregate.js';
import { cancelCall, cancelledRequestOf, isCancelledCall, sessionCallId } from './cancellation.js';
import { isClientAnswer, routeClientAnswer } from './client-answers.js';
import type { ResponseMode } from './endpoint.js';
import { SERVER_BUSY_CODE, SESSION_NOT_FOUND_CODE, sendJsonRpcError } from './errors.js';
import { clientAddressOf } from './forwarded.js';
import { headerOf, type GetStreams } from './get-stream.js';
import type { FastPath } from './fast-path.js';
import type { SessionContext } from './session-context.js';
import { PostStreamEvents, resumablePostStreams } from './post-stream-events.js';
import type { InitializeRateLimiter } from './rate-limit.js';
import { limitOwnerOf } from './limit-owner.js';
import type { SessionShares } from './session-shares.js';
import { HTTP_SSE_VERSIONS } from './http.js';
import type { SessionEvents } from './session-events.js';
import { SessionStreamTransport } from './session-stream-transport.js';
import type { SessionStore, StoredSession } from './sessions.js';

/** What the 2025-era endpoint needs. */
export interface LegacyDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  sessions: SessionStore;
  streams: GetStreams;
  /** Where resumable POST streams store their events. */
  events: SessionEvents;
  /** Reconnection delay POST streams' priming events tell the client (SSE `retry:`), in milliseconds. */
  retryMs: number;
  /** Builds a fresh server for one request of a session. */
  buildServer: (scope: Scope, session: SessionContext) => Promise<Server>;
  /** Counts `initialize` per client address across replicas. */
  rateLimiter: InitializeRateLimiter;
  /** Most live sessions (sessions written within one TTL), cluster-wide. */
  maxSessions: number;
  /** The sessions of each principal, bounded cluster-wide (session-shares.ts). */
  sessionShares: SessionShares;
  /** Idle time after which a session expires, in milliseconds (the `Retry-After` of a 503 is a quarter of it). */
  sessionTtlMs: number;
  /** Reverse proxies whose `X-Forwarded-For` names the client (forwarded.ts). */
  trustedProxies: number;
  /** How POSTs are answered (see the module comment). */
  responseMode: ResponseMode;
  /** Interval of SSE keep-alive comments on POST streams, in milliseconds. */
  keepAliveMs: number;
  /** Serves forwarded calls without an SDK server; absent: the SDK path serves every request. */
  fastPath?: FastPath;
}

/** Serves 2025-era requests of every endpoint scope. */
export class LegacyEndpoint {
  private closed = false;

  constructor(private readonly deps: LegacyDeps) {}

  /** Serves one POST, GET or DELETE of `principal` whose JSON body, if any, is already parsed into `body`; writes the whole response. */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    const sessionId = headerOf(req, 'mcp-session-id');
    if (sessionId === undefined) {
      if (req.method === 'POST' && this.initializes(res, body)) {
        await this.initialize(scope, principal, req, res, body as InitializeRequest, undefined);
        return;
      }
      if (!res.headersSent)
        sendJsonRpcError(
          res,
          400,
          -32000,
          'Bad Request: Mcp-Session-Id header is required (send initialize first to start a session, or send the request stateless in protocol 2026-07-28: its MCP-Protocol-Version header and _meta, no session)',
        );
      return;
    }
    await this.dispatch(scope, sessionId, req, res, body, principal, false);
  }

  /**
   * Serves one POST of a 2024-11-05 HTTP+SSE session (http-sse.ts) whose event stream the session id names: the
   * same checks and session as {@link handle}, `initialize` creating the session under that id, but what the server
   * sends goes onto the session's event stream and the POST itself answers 202 (refusals keep their status).
   */
  async handleHttpSse(
    scope: Scope,
    sessionId: string,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    principal: Principal,
  ): Promise<void> {
    await this.dispatch(scope, sessionId, req, res, body, principal, true);
  }

  private async dispatch(
    scope: Scope,
    sessionId: string,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    principal: Principal,
    httpSse: boolean,
  ): Promise<void> {
    const session = await this.deps.sessions.lookup(sessionId, { tenant: this.deps.tenant, scope: scopeKey(scope), principal });
    if (!session) {
      if (httpSse && (await this.deps.sessions.get(sessionId)) === undefined && this.initializes(res, body)) {
        await this.initialize(scope, principal, req, res, body as InitializeRequest, sessionId);
        return;
      }
      if (res.headersSent) return;
      sendJsonRpcError(
        res,
        404,
        SESSION_NOT_FOUND_CODE,
        httpSse
          ? `Session not found: ${sessionId} (it ended, expired, was never initialized, or belongs to another endpoint or principal); open a new event stream with GET and send initialize to its endpoint`
          : `Session not found: ${sessionId} (it ended, expired, or belongs to another endpoint or principal); start a new session with initialize`,
      );
      return;
    }
    this.deps.sessions.renew(session);
    if (req.method === 'GET') await this.deps.streams.serve(session, req, res);
    else if (req.method === 'DELETE') await this.end(session, res);
    else if ((body as { method?: unknown } | undefined)?.method === 'initialize') {
      // MCP 2025-11-25 basic/lifecycle: initialize is the first interaction of a session, once.
      sendJsonRpcError(
        res,
        400,
        ProtocolErrorCode.InvalidRequest,
        httpSse
          ? `Invalid Request: session ${session.id} is initialized already; open a new event stream with GET to start another`
          : `Invalid Request: session ${session.id} is initialized already; send initialize without Mcp-Session-Id to start another`,
        {},
        undefined,
        (body as { id: string | number }).id,
      );
    } else if (isClientAnswer(body)) await routeClientAnswer(this.deps, session.id, body, res);
    else if (isRootsListChanged(body)) await this.rootsChanged(session, res);
    else if (cancelledRequestOf(body) !== undefined) await this.cancelled(session, cancelledRequestOf(body)!, res);
    else {
      const context = this.context(session.id, principal, session.state);
      const delivery: Delivery = httpSse ? { kind: 'session-stream' } : { kind: 'response', ...this.answerOf(body, session.state) };
      // A forwarded call answered on a stream of its own that nothing resumes needs no SDK server (fast-path.ts).
      const fast =
        delivery.kind === 'response' && delivery.stream && !delivery.resumable
          ? this.deps.fastPath?.serveSession(scope, context, res, body)
          : undefined;
      await (fast ?? this.serve(scope, context, req, res, body, delivery));
    }
  }

  /**
   * Whether `body` is an `initialize` request to serve; answers 400 itself (and returns false) for an `initialize`
   * lacking what it needs.
   */
  private initializes(res: ServerResponse, body: unknown): boolean {
    if (isInitializeRequest(body)) return true;
    if ((body as { method?: unknown } | undefined)?.method !== 'initialize') return false;
    sendJsonRpcError(
      res,
      400,
      ProtocolErrorCode.InvalidParams,
      'Invalid params: initialize needs params.protocolVersion (a string), params.capabilities (an object) and params.clientInfo ({ name, version })',
      {},
      undefined,
      (body as { id: string | number }).id,
    );
    return false;
  }

  /** Refuses new sessions from now on (shutdown); sessions themselves live on in the store. */
  close(): void {
    this.closed = true;
  }

  /**
   * Serves `initialize`: mints the session id (an HTTP+SSE session's is `httpSseId`, its event stream's), and
   * stores the session when the SDK has negotiated, before the result goes out.
   */
  private async initialize(
    scope: Scope,
    principal: Principal,
    req: IncomingMessage,
    res: ServerResponse,
    body: InitializeRequest,
    httpSseId: string | undefined,
  ): Promise<void> {
    if (this.closed) {
      sendJsonRpcError(res, 503, -32603, 'mcp-front is shutting down; retry on another replica');
      return;
    }
    const decision = await this.deps.rateLimiter.attempt(clientAddressOf(req, this.deps.trustedProxies));
    if (!decision.allowed) {
      sendJsonRpcError(
        res,
        429,
        -32000,
        `Too Many Requests: more than ${this.deps.rateLimiter.limit} initialize requests per minute from this address (PUNK_INITIALIZE_RATE_LIMIT); retry in ${decision.retryAfterSeconds} s`,
        {
          'Retry-After': String(decision.retryAfterSeconds),
        },
      );
      return;
    }
    const live = await this.deps.sessions.count();
    if (live >= this.deps.maxSessions) {
      const retryAfter = String(Math.max(1, Math.ceil(this.deps.sessionTtlMs / 4000)));
      sendJsonRpcError(
        res,
        503,
        -32000,
        `Service Unavailable: the endpoint holds its maximum of ${this.deps.maxSessions} sessions (PUNK_MAX_SESSIONS); retry in ${retryAfter} s or reuse a session`,
        {
          'Retry-After': retryAfter,
        },
      );
      return;
    }
    const id = httpSseId ?? randomUUID();
    const owner = limitOwnerOf(principal, clientAddressOf(req, this.deps.trustedProxies));
    const share = await this.deps.sessionShares.admits(owner);
    if (!share.allowed) {
      const retryAfterSeconds = Math.max(1, Math.ceil(this.deps.sessionTtlMs / 4000));
      sendJsonRpcError(
        res,
        429,
        SERVER_BUSY_CODE,
        `Too Many Requests: ${share.reason}; retry in ${String(retryAfterSeconds)} s`,
        { 'Retry-After': String(retryAfterSeconds) },
        { retryAfterSeconds },
      );
      return;
    }
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
        // Session-wide notifications (fan-out.ts, session-messages.ts) go to the HTTP+SSE event stream from the start.
        ...(httpSseId !== undefined && { stream: httpSseId }),
      };
      await this.deps.sessions.create(id, state);
      await this.deps.sessionShares.record(owner, id).catch((error: unknown) => {
        this.deps.log.warn({ sessionId: id, err: errorMessage(error) }, 'could not count a new session against its principal');
      });
    };
    if (httpSseId === undefined) res.setHeader('Mcp-Session-Id', id);
    const delivery: Delivery =
      httpSseId === undefined
        ? { kind: 'response', stream: this.deps.responseMode === 'always', resumable: false }
        : { kind: 'session-stream' };
    const context = { ...this.context(id, principal), ...(httpSseId !== undefined && { protocolVersions: HTTP_SSE_VERSIONS }) };
    await this.serve(scope, context, req, res, body, delivery, async (message) => {
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
   * Serves one POST with a fresh server: on a stateless SDK transport, as SSE when `delivery.stream`, else as JSON,
   * the SSE stream resumable when `delivery.resumable` (see the module comment); or, for an HTTP+SSE session, on a
   * {@link SessionStreamTransport}, answering 202 at once while the server's messages go onto the session's event
   * stream. `outgoing`, when given, sees (and may replace) every message the server sends.
   */
  private async serve(
    scope: Scope,
    session: SessionContext,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    delivery: Delivery,
    outgoing?: (message: JSONRPCMessage) => Promise<JSONRPCMessage>,
  ): Promise<void> {
    if (delivery.kind === 'session-stream') {
      const transport = new SessionStreamTransport(this.deps.events, session.id);
      const server = await this.deps.buildServer(scope, { ...session, sendRelated: (message) => transport.send(message) });
      this.intercept(transport, outgoing);
      transport.onerror = (error) => {
        this.deps.log.warn({ sessionId: session.id, err: error.message }, 'an HTTP+SSE message was lost');
      };
      await server.connect(transport);
      transport.receive(body);
      res.writeHead(202, { 'Content-Type': 'text/plain' }).end('Accepted');
      // The call outlives the POST: its server closes once every request of the POST is answered.
      void transport.answered.then(() => server.close().catch(() => undefined));
      return;
    }
    const events = delivery.stream && delivery.resumable ? new PostStreamEvents(this.deps.events, session.id) : undefined;
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: !delivery.stream,
      keepAliveMs: this.deps.keepAliveMs,
      ...(events && { eventStore: events, retryInterval: this.deps.retryMs }),
    });
    const server = await this.deps.buildServer(scope, {
      ...session,
      sendRelated: (message, relatedRequestId) => transport.send(message, { relatedRequestId }),
    });
    this.intercept(transport, outgoing);
    if (delivery.stream && !Array.isArray(body)) {
      // A request its client cancelled gets no response (MCP 2025-11-25 basic/utilities/cancellation): its stream ends
      // without one. (A JSON answer cannot be left out; a batch's stream carries other answers.)
      const send = transport.send.bind(transport);
      transport.send = async (message, options) => {
        if (!isJSONRPCErrorResponse(message) || message.id === undefined || !isCancelledCall(message.error)) return send(message, options);
        events?.abandon();
        transport.closeSSEStream(message.id);
      };
    }
    const closeServer = () => void server.close().catch(() => undefined);
    // A resumable stream outlives its connection: the call goes on until its response is stored.
    res.on('close', () => (events?.awaitingResponse ? void events.answered.then(closeServer) : closeServer()));
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** Lets `outgoing`, when given, see (and replace) every message `transport` sends. */
  private intercept(transport: Transport, outgoing: ((message: JSONRPCMessage) => Promise<JSONRPCMessage>) | undefined): void {
    if (!outgoing) return;
    const send = transport.send.bind(transport);
    transport.send = async (message, options) => send(await outgoing(message), options);
  }

  /**
   * Passes the client's `notifications/roots/list_changed` (MCP 2025-11-25 client/roots) to the gateway replicas
   * holding the session's `per-client` upstream sessions (`roots-changed` on `punk.session.<id>.control`); 202.
   */
  private async rootsChanged(session: StoredSession, res: ServerResponse): Promise<void> {
    await this.deps.bus.publish(subjects.sessionControl(session.id), { type: 'roots-changed' });
    res.writeHead(202).end();
  }

  /**
   * Passes the client's `notifications/cancelled` (MCP 2025-11-25 basic/utilities/cancellation) to the gateway
   * replica relaying that request, whichever front replica serves it (cancellation.ts); 202.
   */
  private async cancelled(session: StoredSession, requestId: string | number, res: ServerResponse): Promise<void> {
    await cancelCall(this.deps.bus, this.deps.log, sessionCallId(session.id, requestId), 'the client sent notifications/cancelled');
    res.writeHead(202).end();
  }

  /** Ends a session everywhere: its entry is deleted and the replica holding its GET stream closes it. */
  private async end(session: StoredSession, res: ServerResponse): Promise<void> {
    await this.deps.sessions.delete(session.id);
    await this.deps.bus.publish(subjects.sessionControl(session.id), { type: 'ended' });
    res.writeHead(204).end();
  }

  /** Whether a POST of a session is answered as SSE, and whether that stream is resumable (see the module comment). */
  private answerOf(body: unknown, state: SessionState): { stream: boolean; resumable: boolean } {
    const primed = resumablePostStreams(state.protocolVersion);
    if (this.deps.responseMode !== 'auto') return { stream: this.deps.responseMode === 'always', resumable: primed };
    const talksBack = ['sampling', 'elicitation', 'roots'].some((c) => c in state.capabilities) || state.logLevel !== undefined;
    const requests = (Array.isArray(body) ? body : [body]).filter(isJSONRPCRequest);
    const talks = requests.some((message) => {
      const params = message.params as { _meta?: { progressToken?: unknown } } | undefined;
      return params?._meta?.progressToken !== undefined || (talksBack && FORWARDED_CALLS.has(message.method));
    });
    const forwarded = requests.some((message) => FORWARDED_CALLS.has(message.method));
    return { stream: talks || forwarded, resumable: talks && primed };
  }

  private context(id: string, principal: Principal, state?: SessionState): SessionContext {
    return {
      id,
      principal,
      ...(state && { protocolVersion: state.protocolVersion }),
      ...(state?.logLevel && { logLevel: state.logLevel }),
      clientCapabilities: state?.capabilities ?? {},
      sendRelated: async () => {
        throw new Error('no request is being served yet');
      },
      setLogLevel: async (level) => {
        await this.deps.sessions.update(id, (state) => ({ ...state, logLevel: level }));
      },
      setSubscribed: async (uri, on) => {
        await this.deps.sessions.update(id, (state) => {
          const others = state.subscriptions.filter((u) => u !== uri);
          return { ...state, subscriptions: on ? [...others, uri] : others };
        });
      },
    };
  }
}

/** Where the server's messages for one POST go: the POST's own response, or an HTTP+SSE session's event stream. */
type Delivery = { kind: 'response'; stream: boolean; resumable: boolean } | { kind: 'session-stream' };

/** Methods forwarded to an upstream that may, meanwhile, send the client progress, logs or requests. */
const FORWARDED_CALLS = new Set(['tools/call', 'resources/read', 'prompts/get', 'completion/complete']);

/** Whether a POST body is the client's `notifications/roots/list_changed`. */
function isRootsListChanged(body: unknown): boolean {
  return (
    typeof body === 'object' &&
    body !== null &&
    !('id' in body) &&
    (body as { method?: unknown }).method === 'notifications/roots/list_changed'
  );
}
