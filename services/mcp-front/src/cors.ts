/**
 * Which browser origins may use the MCP endpoint (MCP 2025-11-25
 * basic/transports "Security Warning": servers MUST validate `Origin` to
 * prevent DNS rebinding) and the CORS answers that let them (Fetch
 * standard "CORS protocol"), through the `cors` package:
 *
 * - no `Origin` header (a non-browser client): allowed;
 * - `Origin: null` (sandboxed frames, `file:`, redirects): never allowed;
 * - otherwise allowed when it is one of the configured origins or the
 *   endpoint's own origin (the request's scheme and `Host`).
 *
 * The `Host` header is checked before, by the listener (lib service/hosts.ts:
 * DNS-rebinding protection on every path of a loopback listener).
 *
 * Preflights (`OPTIONS`) of allowed origins are answered 204 with the
 * methods and MCP request headers allowed; responses expose
 * `Mcp-Session-Id`, `MCP-Protocol-Version` and `WWW-Authenticate`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from 'cors';
import { schemeOf } from './forwarded.js';

/** Headers a browser client may send. */
const ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Accept',
  'Mcp-Session-Id',
  'MCP-Protocol-Version',
  'Mcp-Method',
  'Mcp-Name',
  'Last-Event-ID',
];
/** Methods that change nothing (RFC 9110 §9.2.1), which {@link OriginPolicy.refuseForeignWrites} lets through. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Response headers a browser client may read. */
const EXPOSED_HEADERS = ['Mcp-Session-Id', 'MCP-Protocol-Version', 'WWW-Authenticate'];

/** The origin policy of one endpoint. */
export class OriginPolicy {
  private readonly allowed: Set<string>;

  /**
   * @param allowedOrigins serialized origins (`https://app.example.com`) allowed besides the endpoint's own.
   * @param trustedProxies reverse proxies whose `X-Forwarded-Proto` tells the endpoint's own scheme.
   * @throws TypeError when an entry is not a URL.
   */
  constructor(
    allowedOrigins: readonly string[],
    private readonly trustedProxies: number,
  ) {
    this.allowed = new Set(allowedOrigins.map((origin) => new URL(origin).origin));
  }

  /** Whether the request's `Origin` may use the endpoint (see the module comment); a repeated `Origin` header never may. */
  allows(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    if (typeof origin !== 'string' || origin === 'null') return false;
    let normalized: string;
    try {
      normalized = new URL(origin).origin;
    } catch {
      return false;
    }
    // A serialized origin is scheme://host[:port] and nothing else (RFC 6454 §6.2); anything else is not a browser's.
    if (normalized === 'null' || normalized !== origin.toLowerCase()) return false;
    if (this.allowed.has(normalized)) return true;
    const host = req.headers.host;
    if (!host) return false;
    try {
      return new URL(`${schemeOf(req, this.trustedProxies)}://${host}`).origin === normalized;
    } catch {
      return false;
    }
  }

  /**
   * Middleware of the REST API (`/api/v1`): a request that may change something (any method but GET, HEAD and
   * OPTIONS) from an Origin {@link allows} refuses is answered 403 `ForbiddenOrigin` and goes no further. A POST
   * without a body is a CORS "simple" request, sent by any page without a preflight (cross-site request forgery); with
   * authentication off nothing else would stop it. Reads are left to CORS: another origin cannot read their answers.
   */
  refuseForeignWrites(): (req: IncomingMessage, res: ServerResponse, next: () => void) => void {
    return (req, res, next) => {
      if (SAFE_METHODS.has(req.method ?? '') || this.allows(req)) {
        next();
        return;
      }
      // Express's originalUrl is the path before the mount point was taken off; the query is left out.
      const path = ((req as { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?')[0];
      const message = `Origin ${JSON.stringify(req.headers.origin)} may not ${String(req.method)} ${path}: a page of another origin may only read (allowed: the endpoint's own origin and PUNK_ALLOWED_ORIGINS)`;
      res.writeHead(403, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store' });
      res.end(JSON.stringify({ error: { code: 'ForbiddenOrigin', message } }));
    };
  }

  /**
   * Middleware answering preflights and adding CORS headers for allowed
   * origins; call it only for requests `allows` accepted.
   * @param methods the methods the endpoint answers (`Access-Control-Allow-Methods`).
   */
  middleware(methods: readonly string[]): (req: IncomingMessage, res: ServerResponse, next: (error?: unknown) => void) => void {
    return cors({
      origin: true,
      methods: [...methods],
      allowedHeaders: ALLOWED_HEADERS,
      exposedHeaders: EXPOSED_HEADERS,
      maxAge: 600,
      optionsSuccessStatus: 204,
    });
  }
}
