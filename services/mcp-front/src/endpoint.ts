/**
 * Both protocol eras on one endpoint (design: "Two protocol eras, one
 * endpoint"), following the SDK's legacy-routing pattern: the SDK's
 * `isLegacyRequest` classifies each POST; 2025-era traffic (2025-03-26 …
 * 2025-11-25: `initialize`, `Mcp-Session-Id`, GET stream, DELETE) goes to the
 * replica-independent sessions of legacy.ts, 2026-07-28 traffic (stateless,
 * per-request `_meta` envelope, `server/discover`) to a strict
 * `createMcpHandler(factory, { legacy: 'reject' })` per endpoint scope.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { toNodeHandler, toWebRequest, type NodeMcpRequestHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, isLegacyRequest, type McpHttpHandler, type Server } from '@modelcontextprotocol/server';
import type { Logger } from '@punk/lib';
import { scopeIncludes, scopeKey, type Scope } from './aggregate.js';
import type { LegacyEndpoint } from './legacy.js';

/** What the endpoint router needs. */
export interface EndpointDeps {
  log: Logger;
  /** Serves 2025-era requests. */
  legacy: LegacyEndpoint;
  /** Builds a fresh server for one 2026-era request on a scope. */
  buildServer: (scope: Scope) => Promise<Server>;
  /** Largest request body, in bytes; bodies are already parsed and bounded by http.ts. */
  maxBodyBytes: number;
}

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
   * Serves one HTTP request (POST, GET or DELETE) whose JSON body, if any,
   * express already parsed into `body`. Writes the whole response.
   */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    if (req.method === 'POST') {
      const probe = await toWebRequest(req, body);
      if (!(await isLegacyRequest(probe, body, { maxRequestBodySize: this.deps.maxBodyBytes }))) {
        await this.modernHandler(scope).node(req, res, body);
        return;
      }
    }
    await this.deps.legacy.handle(scope, req, res, body);
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

  /** Refuses new 2025 sessions and ends every 2026 in-flight exchange. */
  async close(): Promise<void> {
    this.deps.legacy.close();
    await Promise.allSettled([...this.modern.values()].map(m => m.handler.close()));
    this.modern.clear();
  }

  private modernHandler(scope: Scope): { handler: McpHttpHandler; node: NodeMcpRequestHandler } {
    const key = scopeKey(scope);
    let entry = this.modern.get(key);
    if (!entry) {
      const onerror = (error: Error) => this.deps.log.debug({ scope: key, err: error.message }, '2026-era request rejected or failed');
      const handler = createMcpHandler(() => this.deps.buildServer(scope), { legacy: 'reject', onerror, maxRequestBodySize: this.deps.maxBodyBytes });
      entry = { handler, node: toNodeHandler(handler, { onerror, maxRequestBodySize: this.deps.maxBodyBytes }) };
      this.modern.set(key, entry);
    }
    return entry;
  }
}
