/**
 * mcp-front's Prometheus metrics (docs/observability.md "Metrics"): every MCP request a client sends, timed
 * from its arrival until its response is sent, as the OpenTelemetry MCP semantic conventions name it
 * (gen-ai/mcp.md, metric `mcp.server.operation.duration`); HTTP responses by status class; the SSE streams this
 * replica holds open; and the tenant's 2025-era sessions.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  isJSONRPCRequest,
  PROTOCOL_VERSION_META_KEY,
  type JSONRPCMessage,
  type RequestId,
  type Server,
} from '@modelcontextprotocol/server';
import { jsonRpcErrorTypeOf, MCP_DURATION_BUCKETS, NO_ERROR, OTHER, recordMcpResponse, secondsSince } from '@punk/lib';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Scope } from './aggregate.js';
import type { TenantCatalog } from './catalog.js';
import { SUPPORTED_VERSIONS } from './http.js';
import type { SessionStore } from './sessions.js';

/**
 * `mcp_server_operation_duration_seconds` (histogram, seconds; semconv `mcp.server.operation.duration`, its
 * bucket boundaries): one JSON-RPC request from a client, from its arrival until its response was sent. Labels:
 * `mcp_method_name` (`initialize`, `tools/call`, …, `_OTHER` for a method MCP does not define); `gen_ai_tool_name` (the tool's exposed name on `tools/call`
 * when the catalog knows it, `_OTHER` when it does not, empty for other methods); `error_type` (empty on success,
 * the JSON-RPC error code such as `-32602`, or `tool_error` for a `CallToolResult` with `isError: true`);
 * `mcp_protocol_version` (the negotiated or requested revision Punk supports, `_OTHER` for another, empty when none).
 * Its `_count` is the request count.
 */
export const serverOperationDuration = new Histogram({
  name: 'mcp_server_operation_duration_seconds',
  help: 'MCP request duration as observed on mcp-front, from its arrival until its response was sent (OpenTelemetry mcp.server.operation.duration).',
  labelNames: ['mcp_method_name', 'gen_ai_tool_name', 'error_type', 'mcp_protocol_version'] as const,
  buckets: [...MCP_DURATION_BUCKETS],
});

/**
 * `punk_mcp_front_http_responses_total` (counter; labels `http_request_method`: GET, POST, DELETE, OPTIONS or
 * `_OTHER`; `status_class`: `2xx` … `5xx`): responses of the front's routes (the MCP endpoints and `/api/v1`) once
 * finished or closed. A closed SSE stream counts when it ends.
 */
export const httpResponses = new Counter({
  name: 'punk_mcp_front_http_responses_total',
  help: 'HTTP responses of mcp-front routes by request method and status class.',
  labelNames: ['http_request_method', 'status_class'] as const,
});

/**
 * `punk_mcp_front_limit_refusals_total` (counter; label `limit`: `listen_streams_per_principal`, `listen_streams`):
 * requests this replica refused at one of its bounds (listen-limits.ts), answered with HTTP 429 and `Retry-After`.
 */
export const limitRefusals = new Counter({
  name: 'punk_mcp_front_limit_refusals_total',
  help: 'Requests mcp-front refused at one of its bounds (HTTP 429 with Retry-After), by limit.',
  labelNames: ['limit'] as const,
});

/**
 * `punk_mcp_front_fast_path_requests_total` (counter; label `mcp_method_name`: `tools/call`, `resources/read` or
 * `prompts/get`): forwarded requests this replica served on its fast path (fast-path.ts) instead of an SDK server.
 * The rest of those methods' `mcp_server_operation_duration_seconds_count` took the SDK path.
 */
export const fastPathRequests = new Counter({
  name: 'punk_mcp_front_fast_path_requests_total',
  help: 'Forwarded MCP requests (tools/call, resources/read, prompts/get) mcp-front served on its fast path, by method.',
  labelNames: ['mcp_method_name'] as const,
});

/** Responses of this process still open, read at scrape time by {@link sseStreams}. */
const openResponses = new Set<{ req: IncomingMessage; res: ServerResponse }>();

/**
 * `punk_mcp_front_sse_streams` (gauge; label `http_request_method`: `GET` for 2025 sessions' standalone streams,
 * `POST` for responses streamed as SSE): the `text/event-stream` responses this replica holds open now.
 */
export const sseStreams = new Gauge({
  name: 'punk_mcp_front_sse_streams',
  help: 'SSE streams (text/event-stream responses) this mcp-front replica holds open, by request method.',
  labelNames: ['http_request_method'] as const,
  collect() {
    this.reset();
    for (const { req, res } of openResponses) {
      if (res.headersSent && String(res.getHeader('content-type') ?? '').startsWith('text/event-stream'))
        this.inc({ http_request_method: methodLabel(req.method) });
    }
  },
});

/** The session stores of the fronts of this process, by tenant (read at scrape time by {@link sessionsGauge}). */
const sessionStores = new Map<string, SessionStore>();

/**
 * `punk_mcp_front_sessions` (gauge; label `tenant`): the tenant's 2025-era sessions written within one session
 * TTL, read from the shared bucket `PUNK_SESSIONS` at scrape time (`SessionStore.count`: an upper bound of the live
 * ones). Sessions belong to no replica, so every front of a tenant reports the same value: aggregate with `max`.
 */
export const sessionsGauge = new Gauge({
  name: 'punk_mcp_front_sessions',
  help: '2025-era MCP sessions of the tenant in the shared session bucket (cluster-wide, the same on every replica: aggregate with max).',
  labelNames: ['tenant'] as const,
  async collect() {
    this.reset();
    await Promise.all(
      [...sessionStores].map(([tenant, store]) =>
        store.count().then(
          (count) => this.set({ tenant }, count),
          // An unreachable bucket leaves the series out of this scrape; /readyz reports the bus.
          () => undefined,
        ),
      ),
    );
  },
});

const METHODS = new Set(['GET', 'POST', 'DELETE', 'OPTIONS']);

/** The client-to-server request methods of MCP 2025-03-26 to 2026-07-28: other method names are `_OTHER` (a bounded label). */
const MCP_METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'subscriptions/listen',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
]);

function methodLabel(method: string | undefined): string {
  return method && METHODS.has(method) ? method : OTHER;
}

/**
 * Express middleware counting each response into {@link httpResponses} when it ends, and keeping it visible to
 * {@link sseStreams} while it is open. Passes every request on.
 */
export function trackHttpResponses(req: IncomingMessage, res: ServerResponse, next: () => void): void {
  const entry = { req, res };
  openResponses.add(entry);
  res.once('close', () => {
    openResponses.delete(entry);
    httpResponses.inc({ http_request_method: methodLabel(req.method), status_class: `${Math.floor(res.statusCode / 100)}xx` });
  });
  next();
}

/** Makes a tenant's sessions visible to {@link sessionsGauge}; returns what stops it (the front's close). */
export function watchSessions(tenant: string, store: SessionStore): () => void {
  sessionStores.set(tenant, store);
  return () => {
    if (sessionStores.get(tenant) === store) sessionStores.delete(tenant);
  };
}

/** A request received and not answered yet. */
export interface Pending {
  method: string;
  tool: string | undefined;
  version: unknown;
  startedAt: number;
}

function versionLabel(version: unknown): string {
  if (version === undefined || version === null || version === '') return '';
  return typeof version === 'string' && SUPPORTED_VERSIONS.includes(version) ? version : OTHER;
}

/**
 * Records every request the SDK `server` answers into {@link serverOperationDuration}, and its outcome on the
 * request's MCP server span (`recordMcpResponse`, when tracing is on): once the server is
 * connected to its transport (both protocol eras connect one per request, legacy.ts and the SDK's
 * `createMcpHandler`), incoming requests are noted by id and timed when their response is sent. A `tools/call`
 * tool name is kept only when the scope's catalog resolves it (a bounded label set). Notifications are not timed.
 */
export function observeOperations(server: Server, catalog: TenantCatalog, scope: Scope): void {
  const connect = server.connect.bind(server);
  server.connect = async (transport) => {
    await connect(transport);
    const pending = new Map<RequestId, Pending>();
    const receive = transport.onmessage;
    transport.onmessage = (message, extra) => {
      if (isJSONRPCRequest(message)) {
        const params = message.params as { name?: unknown; protocolVersion?: unknown; _meta?: Record<string, unknown> } | undefined;
        const tool = message.method === 'tools/call' && typeof params?.name === 'string' ? params.name : undefined;
        const version = params?._meta?.[PROTOCOL_VERSION_META_KEY] ?? extra?.request?.headers.get('mcp-protocol-version') ?? undefined;
        pending.set(message.id, {
          method: MCP_METHODS.has(message.method) ? message.method : OTHER,
          tool,
          version,
          startedAt: performance.now(),
        });
      }
      receive?.(message, extra);
    };
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
      const request = 'id' in message && message.id !== undefined ? pending.get(message.id) : undefined;
      if (request && ('result' in message || 'error' in message)) {
        pending.delete(message.id!);
        recordMcpResponse(message);
        void record(request, message, server.getNegotiatedProtocolVersion(), secondsSince(request.startedAt), catalog, scope);
      }
      return send(message, options);
    };
  };
}

/**
 * Records the answer to a request served without an SDK server (fast-path.ts) as {@link observeOperations} records the
 * SDK's: its duration in {@link serverOperationDuration}, its outcome on the request's MCP server span.
 */
export function observeAnswer(request: Pending, response: Record<string, unknown>, catalog: TenantCatalog, scope: Scope): void {
  recordMcpResponse(response);
  void record(request, response as unknown as JSONRPCMessage, undefined, secondsSince(request.startedAt), catalog, scope);
}

/** Observes one answered request (after resolving its tool name against the catalog, without delaying the answer). */
async function record(
  request: Pending,
  response: JSONRPCMessage,
  negotiated: string | undefined,
  seconds: number,
  catalog: TenantCatalog,
  scope: Scope,
): Promise<void> {
  // The answer is outgoing (Punk's own, or the SDK server's): its shape is known, so no schema guard re-checks it.
  const answer = response as { result?: { isError?: unknown; protocolVersion?: unknown }; error?: { code: number } };
  const result = answer.result;
  const errorType = answer.error
    ? jsonRpcErrorTypeOf(answer.error.code)
    : request.tool !== undefined && result?.isError === true
      ? 'tool_error'
      : NO_ERROR;
  let tool = '';
  if (request.tool !== undefined) {
    const known = await catalog.view(scope).then(
      (view) => view.tools.resolve(request.tool!) !== undefined,
      () => false,
    );
    tool = known ? request.tool : OTHER;
  }
  // initialize's own answer names the agreed revision; other requests carry it (header, _meta) or the server negotiated it.
  const version = versionLabel(result?.protocolVersion ?? negotiated ?? request.version);
  serverOperationDuration.observe(
    { mcp_method_name: request.method, gen_ai_tool_name: tool, error_type: errorType, mcp_protocol_version: version },
    seconds,
  );
}
