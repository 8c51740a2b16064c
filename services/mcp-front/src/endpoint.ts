/**
 * Both protocol eras on one endpoint (design: "Two protocol eras, one
 * endpoint"), following the SDK's legacy-routing pattern: the SDK's
 * `isLegacyRequest` classifies each request; 2025-era traffic
 * (2025-03-26 … 2025-11-25: `initialize`, `Mcp-Session-Id`, GET stream,
 * DELETE) goes to one sessionful `NodeStreamableHTTPServerTransport` per
 * session, 2026-07-28 traffic (stateless, per-request `_meta` envelope,
 * `server/discover`) to a strict `createMcpHandler(factory, { legacy: 'reject' })`
 * per endpoint scope.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  NodeStreamableHTTPServerTransport,
  toNodeHandler,
  toWebRequest,
  type NodeMcpRequestHandler,
} from '@modelcontextprotocol/node';
import { createMcpHandler, isInitializeRequest, isLegacyRequest, type McpHttpHandler, type Server } from '@modelcontextprotocol/server';
import { errorMessage, type Logger } from '@punk/lib';
import { scopeKey, type Scope } from './aggregate.js';
import type { SessionStore } from './sessions.js';

/** JSON-RPC code the SDK and MCP clients use for an unknown session (answered with HTTP 404). */
export const SESSION_NOT_FOUND_CODE = -32001;

/** What the endpoint router needs. */
export interface EndpointDeps {
  log: Logger;
  sessions: SessionStore;
  /** Builds a fresh server for a scope (one per 2025 session, one per 2026 request). */
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
  private closed = false;

  constructor(private readonly deps: EndpointDeps) {}

  /**
   * Serves one HTTP request (POST, GET or DELETE) whose JSON body, if any,
   * express already parsed into `body`. Writes the whole response.
   * 2025 era: unknown `Mcp-Session-Id` → 404 (-32001); no session id on a
   * non-initialize request → 400 (-32000), per MCP 2025-11-25 basic/transports
   * "Session Management".
   */
  async handle(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    if (req.method === 'POST') {
      const probe = await toWebRequest(req, body);
      if (!(await isLegacyRequest(probe, body, { maxRequestBodySize: this.deps.maxBodyBytes }))) {
        await this.modernHandler(scope).node(req, res, body);
        return;
      }
    }
    await this.handleLegacy(scope, req, res, body);
  }

  /**
   * Tells clients that lists changed: `notifications/*∕list_changed` to every
   * live 2025 session whose endpoint includes `server` (MCP 2025-11-25
   * server/tools "List Changed Notification"), and the same change events to
   * open 2026 `subscriptions/listen` streams. Never throws.
   */
  notifyListChanged(server: string, changes: ListChanges): void {
    for (const session of this.deps.sessions.list()) {
      if (!scopeIncludes(session.scope, server)) continue;
      const capabilities = session.server.getCapabilities();
      const sends: Promise<void>[] = [];
      if (changes.tools && capabilities.tools) sends.push(session.server.sendToolListChanged());
      if (changes.resources && capabilities.resources) sends.push(session.server.sendResourceListChanged());
      if (changes.prompts && capabilities.prompts) sends.push(session.server.sendPromptListChanged());
      Promise.all(sends).catch(error => this.deps.log.debug({ sessionId: session.id, err: errorMessage(error) }, 'list_changed not delivered'));
    }
    for (const [key, { handler }] of this.modern) {
      if (!scopeIncludes(key, server)) continue;
      if (changes.tools) handler.notify.toolsChanged();
      if (changes.resources) handler.notify.resourcesChanged();
      if (changes.prompts) handler.notify.promptsChanged();
    }
  }

  /** Ends every 2025 session and every 2026 in-flight exchange. */
  async close(): Promise<void> {
    this.closed = true;
    const sessions = this.deps.sessions.list();
    await Promise.allSettled(sessions.map(s => s.transport.close()));
    for (const s of sessions) this.deps.sessions.remove(s.id);
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

  private async handleLegacy(scope: Scope, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const key = scopeKey(scope);
    const header = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (sessionId) {
      const session = this.deps.sessions.get(sessionId, key);
      if (!session) {
        sendJsonRpcError(res, 404, SESSION_NOT_FOUND_CODE, `Session not found: ${sessionId} (it ended, or belongs to another endpoint); start a new session with initialize`);
        return;
      }
      await session.transport.handleRequest(req, res, body);
      return;
    }
    if (req.method === 'POST' && isInitializeRequest(body)) {
      if (this.closed) {
        sendJsonRpcError(res, 503, -32603, 'mcp-front is shutting down');
        return;
      }
      const server = await this.deps.buildServer(scope);
      const transport: NodeStreamableHTTPServerTransport = new NodeStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: id => this.deps.sessions.add({ id, scope: key, transport, server }),
      });
      transport.onclose = () => {
        if (transport.sessionId) this.deps.sessions.remove(transport.sessionId);
      };
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required (send initialize first to start a session)');
  }
}

/** Whether the endpoint with this scope key exposes `server`. */
function scopeIncludes(key: string, server: string): boolean {
  return key === '*' || key === server || key.endsWith(`/${server}`);
}

/** Writes a JSON-RPC error response with a null id (JSON-RPC 2.0 §5). */
export function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string, extraHeaders: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body).toString(), ...extraHeaders });
  res.end(body);
}
