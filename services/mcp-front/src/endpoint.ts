/**
 * Both protocol eras on one endpoint (design: "Two protocol eras, one
 * endpoint"), following the SDK's legacy-routing pattern: the SDK's
 * `isLegacyRequest` classifies each POST; 2025-era traffic (2025-03-26 …
 * 2025-11-25: `initialize`, `Mcp-Session-Id`, GET stream, DELETE) goes to the
 * replica-independent sessions of legacy.ts, 2026-07-28 traffic (stateless,
 * per-request `_meta` envelope, `server/discover`) to a strict
 * `createMcpHandler(factory, { legacy: 'reject' })` per endpoint scope.
 *
 * A 2026 call forwarded upstream (`tools/call`, `resources/read`, `prompts/get`, `completion/complete`) is
 * answered as SSE in response mode `auto` (every POST accepts `text/event-stream`: http.ts), by a second
 * handler of the scope in the SDK's mode `sse`: its stream carries a `: keepalive` comment every
 * `keepAliveMs`, so a call that runs for minutes keeps its connection busy through proxies that drop idle
 * ones, with or without a progress token. Other requests keep the SDK's `auto` (JSON unless something is
 * sent before the result).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toNodeHandler, toWebRequest, type NodeMcpRequestHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, isLegacyRequest, type AuthInfo, type McpHttpHandler, type Server } from '@modelcontextprotocol/server';
import type { Logger, Principal } from '@punk/lib';
import { scopeIncludes, scopeKey, type Scope } from './aggregate.js';
import { HEADER_MISMATCH_CODE, sendJsonRpcError } from './errors.js';
import type { LegacyEndpoint } from './legacy.js';
import { paramHeaderMismatch } from './param-headers.js';

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
}

/** How POSTs are answered (`PUNK_RESPONSE_MODE`). */
export type ResponseMode = 'auto' | 'json' | 'always';

/** Which list notifications to send. */
export interface ListChanges {
  tools: boolean;
  resources: boolean;
  prompts: boolean;
}

/** The SDK handlers of one scope's 2026 requests: `calls` answers forwarded calls as SSE, `rest` everything else (listen streams included). */
interface ModernHandlers {
  rest: { handler: McpHttpHandler; node: NodeMcpRequestHandler };
  calls: { handler: McpHttpHandler; node: NodeMcpRequestHandler };
}

/** 2026 methods forwarded to an upstream, which may run long (see the module comment). */
const FORWARDED_CALLS = new Set(['tools/call', 'resources/read', 'prompts/get', 'completion/complete']);

/** Serves MCP requests of both eras for every endpoint scope. */
export class McpEndpoints {
  private readonly modern = new Map<string, ModernHandlers>();

  constructor(private readonly deps: EndpointDeps) {}

  /**
   * Serves one HTTP request (POST, GET or DELETE) of `principal` whose JSON
   * body, if any, express already parsed into `body`. Writes the whole response.
   */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    if (req.method === 'POST') {
      const probe = await toWebRequest(req, body);
      if (!(await isLegacyRequest(probe, body, { maxRequestBodySize: this.deps.maxBodyBytes }))) {
        // The SDK hands `req.auth` to the server factory as `authInfo`; the token itself is never kept.
        (req as IncomingMessage & { auth?: AuthInfo }).auth = { token: '', clientId: principal.subject, scopes: [], extra: { principal } };
        const mismatch = await this.paramHeaderMismatch(scope, req, body);
        if (mismatch) {
          sendJsonRpcError(res, 400, HEADER_MISMATCH_CODE, `Bad Request: ${mismatch}`, {}, undefined, (body as { id: string | number }).id);
          return;
        }
        await this.deps.subscribeListened(scope, body);
        const handlers = this.modernHandlers(scope);
        const forwarded = FORWARDED_CALLS.has(String((body as { method?: unknown } | undefined)?.method));
        await (forwarded ? handlers.calls : handlers.rest).node(req, res, body);
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
    for (const [
      key,
      {
        rest: { handler },
      },
    ] of this.modern) {
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
    for (const [key, { rest }] of this.modern) if (scopeIncludes(key, server)) rest.handler.notify.resourceUpdated(uri);
  }

  /** Refuses new 2025 sessions and ends every 2026 in-flight exchange. */
  async close(): Promise<void> {
    this.deps.legacy.close();
    await Promise.allSettled([...this.modern.values()].flatMap((m) => [m.rest.handler.close(), m.calls.handler.close()]));
    this.modern.clear();
  }

  /** The `Mcp-Param-*` headers of a 2026 `tools/call`, checked against its arguments (param-headers.ts). */
  private async paramHeaderMismatch(scope: Scope, req: IncomingMessage, body: unknown): Promise<string | undefined> {
    const request = body as { method?: unknown; params?: { name?: unknown; arguments?: unknown } };
    if (request.method !== 'tools/call' || typeof request.params?.name !== 'string') return undefined;
    const schema = await this.deps.toolInputSchema(scope, request.params.name);
    return schema === undefined ? undefined : paramHeaderMismatch(req.headers, schema, request.params.arguments);
  }

  private modernHandlers(scope: Scope): ModernHandlers {
    const key = scopeKey(scope);
    let entry = this.modern.get(key);
    if (!entry) {
      const onerror = (error: Error) => this.deps.log.debug({ scope: key, err: error.message }, '2026-era request rejected or failed');
      const factory = ({ authInfo }: { authInfo?: AuthInfo }) => this.deps.buildServer(scope, authInfo!.extra!['principal'] as Principal);
      const make = (responseMode: 'auto' | 'json' | 'sse') => {
        const handler = createMcpHandler(factory, {
          legacy: 'reject',
          onerror,
          maxRequestBodySize: this.deps.maxBodyBytes,
          responseMode,
          keepAliveMs: this.deps.keepAliveMs,
        });
        return { handler, node: toNodeHandler(handler, { onerror, maxRequestBodySize: this.deps.maxBodyBytes }) };
      };
      const rest = this.deps.responseMode === 'always' ? 'sse' : this.deps.responseMode;
      entry = { rest: make(rest), calls: make(rest === 'auto' ? 'sse' : rest) };
      this.modern.set(key, entry);
    }
    return entry;
  }
}
