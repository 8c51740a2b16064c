/**
 * Both protocol eras on one endpoint (design: "Two protocol eras, one
 * endpoint"), following the SDK's legacy-routing pattern: the SDK's
 * `isLegacyRequest` classifies each POST; 2025-era traffic (2025-03-26 …
 * 2025-11-25: `initialize`, `Mcp-Session-Id`, GET stream, DELETE) goes to the
 * replica-independent sessions of legacy.ts, 2026-07-28 traffic (stateless,
 * per-request `_meta` envelope, `server/discover`) to a strict
 * `createMcpHandler(factory, { legacy: 'reject' })` per endpoint scope. Its SSE streams (a call's answer once
 * it streams: handlers.ts turns a long call's answer into one; `subscriptions/listen`) carry a `: keepalive`
 * comment every `keepAliveMs`.
 *
 * `subscriptions/listen` streams are bounded per principal and per replica (listen-limits.ts): past a bound the
 * request is answered HTTP 429 with `Retry-After`. A stream's slot is given back the moment its HTTP response
 * closes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toNodeHandler, toWebRequest, type NodeMcpRequestHandler } from '@modelcontextprotocol/node';
import {
  createMcpHandler,
  isLegacyRequest,
  PROTOCOL_VERSION_META_KEY,
  type AuthInfo,
  type McpHttpHandler,
  type Server,
} from '@modelcontextprotocol/server';
import type { Logger, Principal } from '@punk/lib';
import { scopeIncludes, scopeKey, type Scope } from './aggregate.js';
import { HEADER_MISMATCH_CODE, SERVER_BUSY_CODE, sendJsonRpcError, type HeaderMismatch } from './errors.js';
import type { LegacyEndpoint } from './legacy.js';
import { LISTEN_RETRY_AFTER_SECONDS, type ListenSlots } from './listen-limits.js';
import { MODERN_PROTOCOL_VERSIONS } from './http.js';
import { limitOwnerOf } from './limit-owner.js';
import type { FastPath } from './fast-path.js';
import { paramHeaderMismatch } from './param-headers.js';
import { standardHeaderMismatch } from './standard-headers.js';

/** What the endpoint router needs. */
export interface EndpointDeps {
  log: Logger;
  /** Serves 2025-era requests. */
  legacy: LegacyEndpoint;
  /** Builds a fresh server for one 2026-era request on a scope, acting as `principal`. */
  buildServer: (scope: Scope, principal: Principal) => Promise<Server>;
  /**
   * How 2026-era POSTs are answered: `auto` (JSON until the server sends anything before the result,
   * then SSE: the SDK's own rule), `json` (JSON only; mid-call notifications are dropped), `always` (SSE).
   */
  responseMode: ResponseMode;
  /** Interval of SSE keep-alive comments on 2026 POST and `subscriptions/listen` streams, in milliseconds. */
  keepAliveMs: number;
  /** Largest request body, in bytes; bodies are already parsed and bounded by http.ts. */
  maxBodyBytes: number;
  /** Subscribes the upstreams to the resources a 2026 `subscriptions/listen` body names, before it is served (listen-subscriptions.ts). */
  subscribeListened: (scope: Scope, body: unknown) => Promise<void>;
  /** The `inputSchema` of a tool exposed on a scope, by exposed name; undefined when unknown (the handler answers that). */
  toolInputSchema: (scope: Scope, name: string) => Promise<unknown>;
  /** The open `subscriptions/listen` streams of this replica and their bounds. */
  listenSlots: ListenSlots;
  /** The client's address (forwarded.ts), which counts an anonymous caller's listen streams. */
  clientAddress: (req: IncomingMessage) => string;
  /** Serves forwarded calls without an SDK server; absent: the SDK serves every request. */
  fastPath?: FastPath;
}

/** How POSTs are answered (`PUNK_RESPONSE_MODE`). */
export type ResponseMode = 'auto' | 'json' | 'always';

/** Which list notifications to send. */
export interface ListChanges {
  tools: boolean;
  resources: boolean;
  prompts: boolean;
}

/** Serves MCP requests of both eras for every endpoint scope. */
export class McpEndpoints {
  private readonly modern = new Map<string, { handler: McpHttpHandler; node: NodeMcpRequestHandler }>();

  constructor(private readonly deps: EndpointDeps) {}

  /**
   * Serves one HTTP request (POST, GET or DELETE) of `principal` whose JSON
   * body, if any, express already parsed into `body`. Writes the whole response.
   */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    if (req.method === 'POST') {
      const era =
        eraOf(req, body) ??
        ((await isLegacyRequest(await toWebRequest(req, body), body, { maxRequestBodySize: this.deps.maxBodyBytes }))
          ? 'legacy'
          : 'modern');
      if (era === 'modern') {
        // The SDK hands `req.auth` to the server factory as `authInfo`; the token itself is never kept.
        (req as IncomingMessage & { auth?: AuthInfo }).auth = { token: '', clientId: principal.subject, scopes: [], extra: { principal } };
        const refusal = standardHeaderMismatch(req, body) ?? (await this.paramHeaderMismatch(scope, req, body));
        if (refusal) {
          const { message, mismatch } = refusal;
          sendJsonRpcError(
            res,
            400,
            HEADER_MISMATCH_CODE,
            `Bad Request: ${message}`,
            {},
            { mismatch },
            (body as { id: string | number }).id,
          );
          return;
        }
        if ((body as { method?: unknown }).method === 'subscriptions/listen') {
          await this.serveListen(scope, req, res, body, principal);
          return;
        }
        await (this.deps.fastPath?.serveModern(scope, principal, req, res, body) ?? this.modernHandler(scope).node(req, res, body));
        return;
      }
    }
    await this.deps.legacy.handle(scope, req, res, body, principal);
  }

  /**
   * Tells this replica's open 2026 `subscriptions/listen` streams whose
   * endpoint includes `server` that lists changed. Every replica hears each
   * registry change, so streams anywhere in the cluster are told. (2025
   * sessions are told once each, through their stored GET streams: fan-out.ts.)
   */
  notifyListChanged(server: string, changes: ListChanges): void {
    for (const [key, { handler }] of this.modern) {
      if (!scopeIncludes(key, server)) continue;
      if (changes.tools) handler.notify.toolsChanged();
      if (changes.resources) handler.notify.resourcesChanged();
      if (changes.prompts) handler.notify.promptsChanged();
    }
  }

  /**
   * Tells this replica's open 2026 `subscriptions/listen` streams whose endpoint includes `server` and whose
   * `resourceSubscriptions` hold `uri` that the resource changed (`notifications/resources/updated`).
   */
  notifyResourceUpdated(server: string, uri: string): void {
    for (const [key, { handler }] of this.modern) if (scopeIncludes(key, server)) handler.notify.resourceUpdated(uri);
  }

  /** Refuses new 2025 sessions and ends every 2026 in-flight exchange. */
  async close(): Promise<void> {
    this.deps.legacy.close();
    await Promise.allSettled([...this.modern.values()].map((m) => m.handler.close()));
    this.modern.clear();
  }

  /**
   * Serves a 2026 `subscriptions/listen` within the listen bounds: 429 with `Retry-After` past one; else the
   * upstreams are subscribed to the resources it names and the SDK serves the stream, whose slot is given back
   * when the response closes.
   */
  private async serveListen(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    const slot = this.deps.listenSlots.take(limitOwnerOf(principal, this.deps.clientAddress(req)));
    if ('refusal' in slot) {
      sendJsonRpcError(
        res,
        429,
        SERVER_BUSY_CODE,
        slot.refusal,
        { 'Retry-After': String(LISTEN_RETRY_AFTER_SECONDS) },
        { retryAfterSeconds: LISTEN_RETRY_AFTER_SECONDS },
        (body as { id?: string | number }).id ?? null,
      );
      return;
    }
    // A client gone before this point closed its response already: 'close' will not come again.
    if (res.closed || res.destroyed) slot.release();
    else res.once('close', slot.release);
    await this.deps.subscribeListened(scope, body);
    await this.modernHandler(scope).node(req, res, body);
  }

  /** The `Mcp-Param-*` headers of a 2026 `tools/call`, checked against its arguments (param-headers.ts). */
  private async paramHeaderMismatch(scope: Scope, req: IncomingMessage, body: unknown): Promise<HeaderMismatch | undefined> {
    const request = body as { method?: unknown; params?: { name?: unknown; arguments?: unknown } };
    if (request.method !== 'tools/call' || typeof request.params?.name !== 'string') return undefined;
    const schema = await this.deps.toolInputSchema(scope, request.params.name);
    return schema === undefined ? undefined : paramHeaderMismatch(req.headers, schema, request.params.arguments);
  }

  private modernHandler(scope: Scope): { handler: McpHttpHandler; node: NodeMcpRequestHandler } {
    const key = scopeKey(scope);
    let entry = this.modern.get(key);
    if (!entry) {
      const onerror = (error: Error) => this.deps.log.debug({ scope: key, err: error.message }, '2026-era request rejected or failed');
      const responseMode = this.deps.responseMode === 'always' ? 'sse' : this.deps.responseMode;
      const factory = ({ authInfo }: { authInfo?: AuthInfo }) => this.deps.buildServer(scope, authInfo!.extra!['principal'] as Principal);
      const handler = createMcpHandler(factory, {
        legacy: 'reject',
        onerror,
        maxRequestBodySize: this.deps.maxBodyBytes,
        responseMode,
        keepAliveMs: this.deps.keepAliveMs,
        // Punk bounds listen streams itself, per principal and per replica (serveListen).
        maxSubscriptions: Number.MAX_SAFE_INTEGER,
      });
      entry = { handler, node: toNodeHandler(handler, { onerror, maxRequestBodySize: this.deps.maxBodyBytes }) };
      this.modern.set(key, entry);
    }
    return entry;
  }
}

/**
 * The era of a POST that is one JSON-RPC request other than `initialize`, as the SDK's `isLegacyRequest` would classify
 * it, without building a web request: 2026-07-28 (served by `createMcpHandler`, which also refuses a bad envelope)
 * when its `_meta` claims a protocol version or its `MCP-Protocol-Version` header names a 2026 revision, else the
 * 2025 era. Undefined for any other body (the SDK classifies those).
 */
function eraOf(req: IncomingMessage, body: unknown): 'legacy' | 'modern' | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const { jsonrpc, id, method, params } = body as Record<string, unknown>;
  if (jsonrpc !== '2.0' || typeof method !== 'string' || method === 'initialize') return undefined;
  if (!(typeof id === 'string' || typeof id === 'number')) return undefined;
  if (params !== undefined && (typeof params !== 'object' || params === null || Array.isArray(params))) return undefined;
  const meta = (params as { _meta?: unknown } | undefined)?._meta;
  const claims = typeof meta === 'object' && meta !== null && !Array.isArray(meta) && PROTOCOL_VERSION_META_KEY in meta;
  const header = req.headers['mcp-protocol-version'];
  return claims || (typeof header === 'string' && header.trim() >= MODERN_PROTOCOL_VERSIONS[0]) ? 'modern' : 'legacy';
}
