/**
 * Express wiring of mcp-front and its HTTP hardening:
 *
 * - `/mcp` (every server of the tenant), `/servers/<name>/mcp` and
 *   `/servers/<namespace>/<name>/mcp` (one server) accept POST, GET and
 *   DELETE (MCP 2025-11-25 basic/transports "Streamable HTTP"); any other
 *   method → 405 with `Allow: GET, POST, DELETE`.
 * - POST bodies must be `application/json` (415 otherwise), at most
 *   `maxBodyBytes` bytes (413 otherwise), and valid JSON (400 with JSON-RPC
 *   parse error -32700 otherwise). Every such answer is a JSON-RPC error body
 *   with `id: null`; express's JSON parser never answers on its own.
 * - Every response carries `Cache-Control: no-store`, SSE streams included
 *   (the SDK's own `no-cache` is replaced).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/server';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { errorMessage, type Logger } from '@punk/lib';
import type { Scope } from './aggregate.js';
import type { McpEndpoints } from './endpoint.js';
import { sendJsonRpcError } from './errors.js';

/** Methods an MCP endpoint answers. */
export const ALLOWED_METHODS = ['GET', 'POST', 'DELETE'] as const;

/** Outcome of checking that an endpoint's scope exists. */
export type ScopeCheck = { ok: true } | { ok: false; status: number; message: string };

/** What the router needs. */
export interface HttpDeps {
  log: Logger;
  /** Largest accepted request body, in bytes. */
  maxBodyBytes: number;
  endpoints: McpEndpoints;
  /** Checks that a per-server endpoint names a server of the tenant. */
  checkScope: (scope: Scope) => Promise<ScopeCheck>;
}

/** Builds the router; mount it at the root of an express app. */
export function createRouter(deps: HttpDeps): Router {
  const router = express.Router();
  const parseJson = express.json({ limit: deps.maxBodyBytes, strict: false, type: () => true });

  const serve = (scopeOf: (req: Request) => Scope) => async (req: Request, res: Response, next: NextFunction) => {
    if (!(ALLOWED_METHODS as readonly string[]).includes(req.method)) {
      sendJsonRpcError(res, 405, -32000, `Method ${req.method} not allowed on an MCP endpoint; use ${ALLOWED_METHODS.join(', ')}`, {
        Allow: ALLOWED_METHODS.join(', '),
      });
      return;
    }
    if (req.method === 'POST') {
      if (!isJsonContentType(req.headers['content-type'])) {
        sendJsonRpcError(res, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
        return;
      }
      const parseError = await new Promise<unknown>(resolve => parseJson(req, res, error => resolve(error ?? null)));
      if (parseError) {
        next(parseError);
        return;
      }
    }
    try {
      const scope = scopeOf(req);
      const check = await deps.checkScope(scope);
      if (!check.ok) {
        sendJsonRpcError(res, check.status, -32000, check.message);
        return;
      }
      await deps.endpoints.handle(scope, req, res, req.method === 'POST' ? req.body : undefined);
    } catch (error) {
      next(error);
    }
  };

  router.use(noStore);
  router.all('/mcp', serve(() => ({ kind: 'aggregate' })));
  router.all('/servers/:name/mcp', serve(req => ({ kind: 'server', server: String(req.params['name']) })));
  router.all('/servers/:namespace/:name/mcp', serve(req => ({ kind: 'server', server: String(req.params['name']), namespace: String(req.params['namespace']) })));
  router.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    if (type === 'entity.too.large') {
      sendJsonRpcError(res, 413, -32600, `Request body exceeds the limit of ${deps.maxBodyBytes} bytes`);
    } else if (type === 'entity.parse.failed') {
      sendJsonRpcError(res, 400, -32700, 'Parse error: the request body is not valid JSON');
    } else if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
      sendJsonRpcError(res, 415, -32000, `Unsupported Media Type: ${errorMessage(error)}`);
    } else if (type === 'request.aborted') {
      res.destroy();
    } else {
      deps.log.error({ err: errorMessage(error) }, 'MCP request failed');
      sendJsonRpcError(res, 500, -32603, 'Internal error in mcp-front');
    }
  });
  return router;
}

/** Sets `Cache-Control: no-store` now and again whenever a handler writes the head itself. */
function noStore(_req: IncomingMessage, res: ServerResponse, next: () => void): void {
  res.setHeader('Cache-Control', 'no-store');
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    for (const arg of args) replaceCacheControl(arg);
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
  next();
}

/** Rewrites any Cache-Control value in the headers argument of `writeHead` (object, `[k, v][]` or flat `[k, v, …]`). */
function replaceCacheControl(headers: unknown): void {
  if (!headers || typeof headers !== 'object') return;
  if (Array.isArray(headers)) {
    if (headers.every(h => Array.isArray(h))) {
      for (const pair of headers as unknown[][]) if (String(pair[0]).toLowerCase() === 'cache-control') pair[1] = 'no-store';
    } else {
      for (let i = 0; i + 1 < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'cache-control') headers[i + 1] = 'no-store';
    }
    return;
  }
  const record = headers as Record<string, unknown>;
  for (const key of Object.keys(record)) if (key.toLowerCase() === 'cache-control') record[key] = 'no-store';
}
