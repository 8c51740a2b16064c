/**
 * Express wiring of mcp-front and its HTTP hardening. The aggregated
 * endpoint (`path`, default `/mcp`), `/servers/<name>/mcp` and
 * `/servers/<namespace>/<name>/mcp` check every request in this order
 * (MCP 2025-11-25 basic/transports "Streamable HTTP" and 2026-07-28), and
 * the first failed check answers, with a JSON-RPC error body (`id: null`):
 *
 * | # | check | answer |
 * |---|-------|--------|
 * | 0 | `Host` one of the allowed hosts, when a list is set: checked by the listener on every path (lib service/hosts.ts) | 403 |
 * | 1 | `Origin`: absent passes, `null` never, else a configured origin or the endpoint's own (cors.ts) | 403, -32000 |
 * |   | CORS preflight (`OPTIONS`) of an allowed origin | 204, no body |
 * | 2 | method GET, POST or DELETE | 405 with `Allow`, -32000 |
 * | 3 | `authenticate` hook, when given (it writes its own 401/403) | its answer |
 * | 4 | `Accept`: POST lists `application/json` and `text/event-stream`, GET lists `text/event-stream` | 406, -32000 |
 * | 5 | POST `Content-Type: application/json` | 415, -32000 |
 * | 6 | `MCP-Protocol-Version`, when present, one of the supported revisions of either era | 400, -32022 `UnsupportedProtocolVersion` with `data.supported` |
 * | 6 | GET or DELETE under 2026-07-28 (no sessions, no GET stream) | 405 with `Allow: POST`, -32000 |
 * | 7 | body at most `maxBodyBytes` | 413, -32600 |
 * | 8 | body present and JSON | 400, -32700 |
 * | 9 | a JSON-RPC batch (array) only under 2025-03-26 (the header absent or naming it), never empty | 400, -32600 |
 * | 9 | no deeper than 256 levels; in a batch no `initialize` and no repeated id | 400, -32600 |
 * | 9 | every message an object, every `id` a string or an integer (MCP basic "Requests": not null; JSON-RPC 2.0 §4), every method but `notifications/…` with an id | 400, -32600 |
 * | 10 | the per-server endpoint names one server of the tenant | 404 / 503, -32000 |
 *
 * Then the message (endpoint.ts): a 2026-07-28 request whose `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`
 * (standard-headers.ts) or `Mcp-Param-*` (param-headers.ts) header is missing or disagrees with the body is
 * answered 400, -32020 `HeaderMismatch` with `data.mismatch` (the header, its value, the body's field and its
 * value); this runs after reading the body, so a request that also exceeds the size limit answers 413 first.
 * Other 2026-07-28 requests go to the SDK's `createMcpHandler`; 2025-era requests to legacy.ts (sessions,
 * initialize limits).
 *
 * The HTTP+SSE endpoints of MCP 2024-11-05 (`/sse`, `/servers/<name>/sse`,
 * `/servers/<namespace>/<name>/sse`; http-sse.ts) get the same checks, except:
 * methods GET and POST; a POST needs no `Accept`; `MCP-Protocol-Version`
 * may also name 2024-11-05, never 2026-07-28.
 *
 * Every response carries `Cache-Control: no-store`, SSE streams included
 * (the SDK's own `no-cache` is replaced). Slow or endless request bodies are
 * cut by the HTTP server's `requestTimeout` (lib `listenHealth`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  DEFAULT_NEGOTIATED_PROTOCOL_VERSION,
  isJsonContentType,
  PROTOCOL_VERSION_META_KEY,
  ProtocolErrorCode,
} from '@modelcontextprotocol/server';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { errorMessage, PunkError, type Logger, type Principal } from '@punk/lib';
import { traceMcpRequest } from '@punk/lib';
import type { Scope } from './aggregate.js';
import { withCallerToken } from './auth/caller-token.js';
import type { OriginPolicy } from './cors.js';
import type { McpEndpoints } from './endpoint.js';
import type { HttpSseEndpoint } from './http-sse.js';
import { sendJsonRpcError } from './errors.js';
import { headerOf } from './get-stream.js';
import { jsonDepthRefusal } from './json-depth.js';

/** Methods an MCP endpoint answers. */
export const ALLOWED_METHODS = ['GET', 'POST', 'DELETE'] as const;

/** Methods an HTTP+SSE endpoint (MCP 2024-11-05; http-sse.ts) answers. */
export const HTTP_SSE_METHODS = ['GET', 'POST'] as const;

/**
 * Protocol revisions of the 2026 era the SDK's `createMcpHandler` serves
 * (its `SUPPORTED_MODERN_PROTOCOL_VERSIONS`, which the package does not export).
 */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const;

/** Revisions of the 2025 era an `MCP-Protocol-Version` header may name (the header exists since 2025-06-18; 2025-03-26 is its default). */
export const LEGACY_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;

/** Every revision an `MCP-Protocol-Version` header may name, newest first. */
export const SUPPORTED_VERSIONS: readonly string[] = [...MODERN_PROTOCOL_VERSIONS, ...LEGACY_PROTOCOL_VERSIONS];

/**
 * Revisions of an HTTP+SSE session: those of the 2025 era and the transport's own, 2024-11-05 (`initialize` may
 * agree to each; SDK clients name the agreed one in `MCP-Protocol-Version`).
 */
export const HTTP_SSE_VERSIONS: readonly string[] = [...LEGACY_PROTOCOL_VERSIONS, '2024-11-05'];

/** Outcome of checking that an endpoint's scope exists. */
export type ScopeCheck = { ok: true } | { ok: false; status: number; message: string };

/** What the router needs. */
export interface HttpDeps {
  log: Logger;
  /** Path of the aggregated endpoint (`/mcp`). */
  path: string;
  /** Largest accepted request body, in bytes. */
  maxBodyBytes: number;
  /** Which browser origins may call, and the CORS answers. */
  origins: OriginPolicy;
  /**
   * Who is calling: resolves with the principal, or with null after writing
   * the refusal itself (401 with a `WWW-Authenticate` challenge, 403).
   * Called after the Origin check and CORS preflight handling, before any
   * other check. Absent: every caller is `anonymous(req)`.
   */
  authenticate?: (req: IncomingMessage, res: ServerResponse) => Promise<Principal | null>;
  /** The OAuth access token of a principal `authenticate` resolved with (for token exchange); absent: none has one. */
  accessTokenOf?: (principal: Principal) => string | undefined;
  /** The principal of a caller when there is no `authenticate` hook. */
  anonymous: (req: IncomingMessage) => Principal;
  endpoints: McpEndpoints;
  /** Serves the HTTP+SSE endpoints (`/sse`, per server `…/sse`). */
  httpSse: HttpSseEndpoint;
  /** Checks that a per-server endpoint names a server of the tenant. */
  checkScope: (scope: Scope) => Promise<ScopeCheck>;
  /** Whether the bus carries messages now (`Bus.isConnected`); while it does not, requests answer 503 at once. */
  busConnected: () => boolean;
}

/** The `Retry-After` of a 503 while the bus is down, in seconds: NATS clients reconnect every 2 s. */
export const BUS_DOWN_RETRY_AFTER_S = 2;

/** Answers 503 with `Retry-After` (RFC 9110 §10.2.3): the bus is down, so nothing behind the front can be reached. */
function sendBusDown(res: ServerResponse): void {
  sendJsonRpcError(
    res,
    503,
    -32000,
    `Service Unavailable: mcp-front has no connection to the message bus (NATS), so no gateway can be reached; retry in ${BUS_DOWN_RETRY_AFTER_S} s`,
    { 'Retry-After': String(BUS_DOWN_RETRY_AFTER_S) },
  );
}

/** Builds the router; mount it at the root of an express app. */
export function createRouter(deps: HttpDeps): Router {
  const router = express.Router();
  const parseJson = express.json({ limit: deps.maxBodyBytes, strict: false, type: () => true });
  const corsOf = { 'streamable-http': deps.origins.middleware(ALLOWED_METHODS), 'http-sse': deps.origins.middleware(HTTP_SSE_METHODS) };

  const serve = (scopeOf: ScopeOf, kind: TransportKind) => async (req: Request, res: Response, next: NextFunction) => {
    const httpSse = kind === 'http-sse';
    const cors = corsOf[kind];
    const methods: readonly string[] = httpSse ? HTTP_SSE_METHODS : ALLOWED_METHODS;
    try {
      if (!deps.origins.allows(req)) {
        sendJsonRpcError(
          res,
          403,
          -32000,
          `Forbidden: Origin ${JSON.stringify(req.headers.origin)} may not use this endpoint (allowed: the endpoint's own origin and PUNK_ALLOWED_ORIGINS)`,
        );
        return;
      }
      if (req.method === 'OPTIONS') {
        cors(req, res, () => res.writeHead(204).end());
        return;
      }
      await new Promise<void>((resolve, reject) =>
        cors(req, res, (error: unknown) => (error ? reject(error instanceof Error ? error : new Error(JSON.stringify(error))) : resolve())),
      );
      if (!methods.includes(req.method)) {
        sendJsonRpcError(res, 405, -32000, `Method ${req.method} not allowed on an MCP endpoint; use ${methods.join(', ')}`, {
          Allow: methods.join(', '),
        });
        return;
      }
      // Fail fast: a request made while the bus is down would wait out its deadline, even after the bus is back.
      if (!deps.busConnected()) {
        sendBusDown(res);
        return;
      }
      const principal = deps.authenticate ? await deps.authenticate(req, res) : deps.anonymous(req);
      if (!principal) return;
      const refusal = checkMediaTypes(req, httpSse);
      if (refusal) {
        sendJsonRpcError(res, refusal.status, refusal.code, refusal.message, {}, refusal.data);
        return;
      }
      // The body is read before the version check so that its refusal can echo the request's id (2026-07-28
      // basic/transports: every error response carries the id); a body error still answers after it.
      const parseError =
        req.method === 'POST' ? await new Promise<unknown>((resolve) => parseJson(req, res, (error) => resolve(error ?? null))) : null;
      const body: unknown = parseError ? undefined : req.body;
      const versionRefusal = checkVersion(req, body, httpSse);
      if (versionRefusal) {
        sendJsonRpcError(
          res,
          versionRefusal.status,
          versionRefusal.code,
          versionRefusal.message,
          {},
          versionRefusal.data,
          requestIdOf(body),
        );
        return;
      }
      if (req.method !== 'POST' && (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(headerOf(req, 'mcp-protocol-version') ?? '')) {
        sendJsonRpcError(
          res,
          405,
          -32000,
          `Method ${req.method} not allowed under ${headerOf(req, 'mcp-protocol-version')}: it has no sessions or GET streams; POST every request (subscriptions/listen for notifications)`,
          { Allow: 'POST' },
        );
        return;
      }
      if (req.method === 'POST') {
        if (parseError) {
          next(parseError);
          return;
        }
        if (req.body === undefined) {
          sendJsonRpcError(res, 400, -32700, 'Parse error: the request has no body (a POST carries one JSON-RPC message)');
          return;
        }
        const depthRefusal = jsonDepthRefusal(req.body);
        const batchRefusal = (depthRefusal && `Invalid Request: ${depthRefusal}`) ?? checkBatch(req, req.body) ?? checkMessages(req.body);
        if (batchRefusal) {
          sendJsonRpcError(res, 400, ProtocolErrorCode.InvalidRequest, batchRefusal);
          return;
        }
      }
      const scope = scopeOf(req);
      const check = await deps.checkScope(scope);
      if (!check.ok) {
        sendJsonRpcError(res, check.status, -32000, check.message);
        return;
      }
      const message: unknown = req.method === 'POST' ? req.body : undefined;
      await withCallerToken(deps.accessTokenOf?.(principal), () =>
        traceMcpRequest(req, res, message, principal.tenant, () =>
          (httpSse ? deps.httpSse : deps.endpoints).handle(scope, req, res, message, principal),
        ),
      );
    } catch (error) {
      next(error);
    }
  };

  router.use(noStore);
  const aggregate: ScopeOf = () => ({ kind: 'aggregate' });
  const server: ScopeOf = (req) => ({ kind: 'server', server: String(req.params['name']) });
  const namespaced: ScopeOf = (req) => ({ kind: 'server', server: String(req.params['name']), namespace: String(req.params['namespace']) });
  for (const [aggregatePath, last, kind] of [
    [deps.path, 'mcp', 'streamable-http'],
    ['/sse', 'sse', 'http-sse'],
  ] as const) {
    router.all(aggregatePath, serve(aggregate, kind));
    router.all(`/servers/:name/${last}`, serve(server, kind));
    router.all(`/servers/:namespace/:name/${last}`, serve(namespaced, kind));
  }
  router.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    if (type === 'entity.too.large') {
      sendJsonRpcError(res, 413, -32600, `Request body exceeds the limit of ${deps.maxBodyBytes} bytes (PUNK_MAX_BODY_BYTES)`, {
        Connection: 'close',
      });
    } else if (type === 'entity.parse.failed') {
      sendJsonRpcError(res, 400, -32700, 'Parse error: the request body is not valid JSON');
    } else if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendJsonRpcError(res, 415, -32000, `Unsupported Media Type: ${errorMessage(error)}`);
    } else if (type === 'request.aborted' || type === 'request.size.invalid' || (error as { code?: unknown })?.code === 'ECONNRESET') {
      res.destroy();
    } else if (error instanceof PunkError && (error.code === 'BusUnavailable' || error.code === 'BusClosed' || !deps.busConnected())) {
      // The bus went down during the request (a session read, a stream write): the client may retry shortly.
      deps.log.warn({ err: errorMessage(error) }, 'MCP request failed: the bus is unavailable');
      sendBusDown(res);
    } else {
      deps.log.error({ err: errorMessage(error) }, 'MCP request failed');
      sendJsonRpcError(res, 500, -32603, 'Internal error in mcp-front');
    }
  });
  return router;
}

/** The endpoint scope a route's request names. */
type ScopeOf = (req: Request) => Scope;

/** Which transport a route serves: Streamable HTTP (both eras) or the HTTP+SSE transport of 2024-11-05. */
type TransportKind = 'streamable-http' | 'http-sse';

/** A failed header check. */
interface Refusal {
  status: number;
  code: number;
  message: string;
  data?: unknown;
}

/** Checks 4 and 5 of the module comment: `Accept` (HTTP+SSE POSTs name none), `Content-Type`. */
function checkMediaTypes(req: IncomingMessage, httpSse: boolean): Refusal | undefined {
  const accepted = mediaRangesOf(req.headers.accept);
  if (req.method === 'POST' && !httpSse && !(accepted.has('application/json') && accepted.has('text/event-stream'))) {
    return { status: 406, code: -32000, message: 'Not Acceptable: a POST must list both application/json and text/event-stream in Accept' };
  }
  if (req.method === 'GET' && !accepted.has('text/event-stream')) {
    return { status: 406, code: -32000, message: 'Not Acceptable: a GET stream needs Accept: text/event-stream' };
  }
  if (req.method === 'POST' && !isJsonContentType(req.headers['content-type'])) {
    return { status: 415, code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' };
  }
  return undefined;
}

/**
 * Check 6: `MCP-Protocol-Version`, when present, names a supported revision. `data.supported` lists, for a
 * request carrying the per-request `_meta` envelope, those `server/discover` reports (2026-07-28
 * basic/versioning `UnsupportedProtocolVersionError`); on an HTTP+SSE endpoint, {@link HTTP_SSE_VERSIONS} (a 2026-07-28
 * request is told where that revision is served);
 * otherwise every revision of either era, as the message does (a 2025-era client may move to 2026-07-28).
 */
function checkVersion(req: IncomingMessage, body: unknown, httpSse: boolean): Refusal | undefined {
  const version = req.headers['mcp-protocol-version'];
  const supported = httpSse ? HTTP_SSE_VERSIONS : SUPPORTED_VERSIONS;
  if (version === undefined || supported.includes(String(version))) return undefined;
  const modern = !httpSse && hasRequestEnvelope(body);
  // The message lists what `data.supported` lists, and for a 2026-07-28 request names the 2025 era's apart.
  const listed = modern ? MODERN_PROTOCOL_VERSIONS : supported;
  const legacy = modern ? ` (2025-era clients: ${LEGACY_PROTOCOL_VERSIONS.join(', ')}, with initialize and a session)` : '';
  // 2026-07-28 is served, only not by HTTP+SSE: the answer says where (a trial read its absence as "not supported").
  const elsewhere =
    httpSse && (MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(String(version))
      ? `; ${String(version)} is served on the Streamable HTTP endpoint (this path with /mcp in place of /sse), not on HTTP+SSE`
      : '';
  return {
    status: 400,
    code: ProtocolErrorCode.UnsupportedProtocolVersion,
    message: `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(version)}; supported versions: ${listed.join(', ')}${legacy}${elsewhere}`,
    data: { supported: [...listed], requested: String(version) },
  };
}

/** Whether a body is a 2026-07-28 request: its `params._meta` names a protocol version. */
function hasRequestEnvelope(body: unknown): boolean {
  const meta = (body as { params?: { _meta?: Record<string, unknown> } } | undefined)?.params?._meta;
  return typeof meta === 'object' && meta !== null && PROTOCOL_VERSION_META_KEY in meta;
}

/** The JSON-RPC id of a single request body, when it has a valid one; null otherwise. */
function requestIdOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : null;
}

/**
 * Check 9: JSON-RPC batches exist only in MCP 2025-03-26 (removed by
 * 2025-06-18 basic "JSON-RPC batching"); the revision is the header's, or
 * 2025-03-26 when it is absent (MCP 2025-06-18 basic/transports
 * "Protocol Version Header"). Returns the refusal's message.
 */
function checkBatch(req: IncomingMessage, body: unknown): string | undefined {
  if (!Array.isArray(body)) return undefined;
  const version = headerOf(req, 'mcp-protocol-version') ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION;
  if (version !== '2025-03-26')
    return `Invalid Request: JSON-RPC batches are only allowed under protocol version 2025-03-26, not ${version}; send one message per POST`;
  if (body.length === 0) return 'Invalid Request: an empty JSON-RPC batch';
  // MCP 2025-03-26 basic/lifecycle: "The initialization request MUST NOT be part of a JSON-RPC batch".
  if (body.some((m) => (m as { method?: unknown } | null)?.method === 'initialize'))
    return 'Invalid Request: initialize must not be part of a JSON-RPC batch; send it alone';
  const ids = body.filter((m) => typeof m === 'object' && m !== null && 'id' in m && 'method' in m).map((m) => (m as { id: unknown }).id);
  const repeated = ids.find((id, i) => ids.indexOf(id) !== i);
  if (repeated !== undefined)
    return `Invalid Request: the batch has two requests with id ${JSON.stringify(repeated)}; each answer must be told apart by its id`;
  return undefined;
}

/**
 * Check 9: every message is a JSON object (JSON-RPC 2.0 §4), an `id`, where a message has one, is a string
 * or an integer (MCP 2025-11-25 basic "Requests": "MUST be a string or integer", "MUST NOT be null"; the
 * same ids come back on responses), and a message of any method but a notification's (`notifications/…`, MCP
 * 2025-11-25 basic "Notifications") is a request, with an id. Returns the refusal's message.
 */
function checkMessages(body: unknown): string | undefined {
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      return `Invalid Request: a JSON-RPC message is an object, not ${message === null ? 'null' : Array.isArray(message) ? 'an array' : `a ${typeof message}`}`;
    }
    if (!('id' in message)) {
      const method = (message as { method?: unknown }).method;
      // Without an id a message is a notification (JSON-RPC 2.0 §4.1), answered by nothing: a request method
      // (every MCP notification is `notifications/…`) sent so would get a silent 202 and its call be lost.
      if (typeof method === 'string' && !method.startsWith('notifications/'))
        return `Invalid Request: ${method} is a request and needs an id (a string or an integer); without one it is a notification, which gets no answer, and MCP notifications are named notifications/…`;
      continue;
    }
    const id = (message as { id: unknown }).id;
    if (typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))) continue;
    return `Invalid Request: a JSON-RPC id must be a string or an integer, not ${id === null ? 'null' : Array.isArray(id) ? 'an array' : typeof id === 'number' ? `the number ${id}` : `a ${typeof id}`}`;
  }
  return undefined;
}

/** The media ranges an `Accept` header lists with a non-zero quality (RFC 9110 §12.5.1), lower-cased, parameters dropped. */
function mediaRangesOf(accept: string | undefined): Set<string> {
  const ranges = new Set<string>();
  for (const part of (accept ?? '').split(',')) {
    const [range, ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (!range) continue;
    const q = params.find((p) => p.startsWith('q='));
    if (q !== undefined && !(Number(q.slice(2)) > 0)) continue;
    ranges.add(range);
  }
  return ranges;
}

/** Sets `Cache-Control: no-store` now and again whenever a handler writes the head itself. */
function noStore(_req: IncomingMessage, res: ServerResponse, next: () => void): void {
  res.setHeader('Cache-Control', 'no-store');
  const writeHead = res.writeHead.bind(res);
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    for (const arg of args) replaceCacheControl(arg);
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  };
  next();
}

/** Rewrites any Cache-Control value in the headers argument of `writeHead` (object, `[k, v][]` or flat `[k, v, …]`). */
function replaceCacheControl(headers: unknown): void {
  if (!headers || typeof headers !== 'object') return;
  if (Array.isArray(headers)) {
    if (headers.every((h) => Array.isArray(h))) {
      for (const pair of headers as unknown[][]) if (String(pair[0]).toLowerCase() === 'cache-control') pair[1] = 'no-store';
    } else {
      for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'cache-control') headers[i + 1] = 'no-store';
    }
    return;
  }
  const record = headers as Record<string, unknown>;
  for (const key of Object.keys(record)) if (key.toLowerCase() === 'cache-control') record[key] = 'no-store';
}
