/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) of Punk's MCP endpoints, built from the configured
 * public URL (`PUNK_PUBLIC_URL`), never from the request's scheme or host: behind an ingress that
 * terminates TLS the documents still say `https`.
 *
 * - `GET /.well-known/oauth-protected-resource`: the resource is the public URL itself (a prefix of
 *   every endpoint, RFC 9728 §3.1);
 * - `GET /.well-known/oauth-protected-resource<path>` for each endpoint path (`/mcp`,
 *   `/servers/<name>/mcp`, `/servers/<namespace>/<name>/mcp`, and their HTTP+SSE twins `/sse`,
 *   `/servers/<name>/sse`, `/servers/<namespace>/<name>/sse`): the resource is that endpoint's canonical
 *   URL (MCP 2025-11-25 basic/authorization "Canonical Server URI").
 *
 * When the public URL has a path (`https://example.com/punk`), the well-known segment goes between host and
 * path (RFC 9728 §3.1: `https://example.com/.well-known/oauth-protected-resource/punk/mcp`), and the
 * ingress must pass those paths to Punk unchanged.
 */
import express, { type Router } from 'express';

/** Path segment of the metadata documents (RFC 9728 §3). */
export const WELL_KNOWN_PATH = '/.well-known/oauth-protected-resource';

/** What the metadata documents say. */
export interface ResourceMetadataOptions {
  /** `PUNK_PUBLIC_URL`. */
  publicUrl: string;
  /** Path of the aggregated endpoint (default `/mcp`). */
  mcpPath: string;
  /** Authorization servers' issuer identifiers (`authorization_servers`); empty when only API keys are used. */
  authorizationServers: readonly string[];
  /** `scopes_supported`; omitted when empty. */
  scopes: readonly string[];
  /** `resource_name`, for people. */
  resourceName: string;
}

/** URLs of the protected resources under one public URL. */
export class ResourceUrls {
  private readonly origin: string;
  private readonly basePath: string;

  /** @throws TypeError when `publicUrl` is not a URL. */
  constructor(publicUrl: string) {
    const url = new URL(publicUrl);
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/+$/, '');
  }

  /** The canonical URL of the resource at `path` (`/mcp`): lower-case scheme and host, no trailing slash. */
  canonical(path = ''): string {
    return `${this.origin}${this.basePath}${path}`;
  }

  /** The URL of the metadata document of the resource at `path` (RFC 9728 §3.1). */
  metadataUrl(path: string): string {
    return `${this.origin}${WELL_KNOWN_PATH}${this.basePath}${path}`;
  }
}

/** Whether `path` is an MCP endpoint path of this front. */
export function isEndpointPath(path: string, mcpPath: string): boolean {
  return path === mcpPath || path === '/sse' || /^\/servers\/[^/]+(\/[^/]+)?\/(mcp|sse)$/.test(path);
}

/** The RFC 9728 §2 document of the resource at `path` ('' for the public URL itself). */
export function resourceMetadata(options: ResourceMetadataOptions, urls: ResourceUrls, path: string): Record<string, unknown> {
  return {
    resource: urls.canonical(path),
    ...(options.authorizationServers.length > 0 && { authorization_servers: [...options.authorizationServers] }),
    ...(options.scopes.length > 0 && { scopes_supported: [...options.scopes] }),
    bearer_methods_supported: ['header'],
    resource_name: options.resourceName,
  };
}

/**
 * Serves the metadata documents (GET, and the CORS preflight OPTIONS; other paths under the well-known
 * prefix fall through, to a 404). Public documents: any origin may read them (`Access-Control-Allow-Origin: *`),
 * with any request headers (MCP clients send `MCP-Protocol-Version`).
 */
export function metadataRouter(options: ResourceMetadataOptions): Router {
  const urls = new ResourceUrls(options.publicUrl);
  const basePath = new URL(options.publicUrl).pathname.replace(/\/+$/, '');
  const router = express.Router();
  const documentPath = /^\/\.well-known\/oauth-protected-resource(\/.*)?$/;
  router.options(documentPath, (req, res) => {
    const requested = req.headers['access-control-request-headers'];
    res
      .set({
        'Cache-Control': 'no-store',
        'Access-Control-Allow-Origin': '*',
        'Access-Control-Allow-Methods': 'GET',
        ...(requested && { 'Access-Control-Allow-Headers': requested }),
      })
      .status(204)
      .end();
  });
  router.get(documentPath, (req, res, next) => {
    let path = req.path.slice(WELL_KNOWN_PATH.length);
    if (basePath && (path === basePath || path.startsWith(`${basePath}/`))) path = path.slice(basePath.length);
    if (path !== '' && !isEndpointPath(path, options.mcpPath)) {
      next();
      return;
    }
    res.set({ 'Cache-Control': 'no-store', 'Access-Control-Allow-Origin': '*' }).json(resourceMetadata(options, urls, path));
  });
  return router;
}
