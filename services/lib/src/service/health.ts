/**
 * The HTTP listener of a service process: `/healthz`, `/readyz`, `/metrics`
 * (Prometheus), and the service's own handler (an express app) for every other path.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PunkConfig } from '../config.js';
import { collectProcessMetrics, serveMetrics } from '../metrics/exposition.js';
import { limitConnections, type ConnectionLimits } from './connection-limits.js';
import { allowedHostsOf, isAllowedHost } from './hosts.js';
import { methodNotAllowed } from './methods.js';

/** Answers one HTTP request (an express app fits). */
export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * How long a listener keeps an idle client connection open after a response, in milliseconds (node's default,
 * made explicit): a client that reuses connections (the `punk cluster` proxy) keeps them idle for less.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;

/** A bound listener whose routes can be completed once the service started. */
export interface HealthServer {
  /** `http://host:port` actually bound (port 0 resolved). */
  url: string;
  /** Sets the handler of every path other than `/healthz`, `/readyz` and `/metrics`. */
  setHandler(handler: HttpHandler): void;
  /** Closes every connection and the listener. */
  close(): Promise<void>;
}

/** How a listener treats incoming requests. */
export interface ListenOptions {
  /** Until the request head (line and headers) has arrived, in ms; a slower client (slow-loris) gets 408. Default 10 s. */
  headersTimeoutMs?: number;
  /** Until the whole request, body included, has arrived (not the response: SSE streams live on), in ms. Default 30 s. */
  requestTimeoutMs?: number;
  /** Host names the `Host` header must carry on every path but the probes (hosts.ts); others get 403. Default any. */
  allowedHosts?: readonly string[];
  /** Whether `/metrics` is served here (default true); false when a listener of its own serves it ({@link listenMetrics}). */
  serveMetrics?: boolean;
  /** Bounds on the listener's TCP connections (connection-limits.ts). Default none. */
  connections?: ConnectionLimits;
}

/**
 * The listener options configuration sets: `PUNK_HEADERS_TIMEOUT_MS`, `PUNK_REQUEST_TIMEOUT_MS`, the allowed hosts
 * (hosts.ts) and the connection bounds `PUNK_MAX_CONNECTIONS`, `PUNK_MAX_CONNECTIONS_PER_ADDRESS` (not applied
 * behind trusted proxies, `PUNK_TRUST_PROXY` > 0, whose few addresses carry every client's connections) and
 * `PUNK_CONNECTION_IDLE_TIMEOUT_MS`.
 */
export function listenOptionsOf(
  config: Pick<
    PunkConfig,
    | 'allowedHosts'
    | 'host'
    | 'publicUrl'
    | 'headersTimeoutMs'
    | 'requestTimeoutMs'
    | 'maxConnections'
    | 'maxConnectionsPerAddress'
    | 'connectionIdleTimeoutMs'
    | 'trustProxy'
  >,
): ListenOptions {
  const allowedHosts = allowedHostsOf(config);
  return {
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    connections: {
      maxConnections: config.maxConnections,
      ...(config.trustProxy === 0 && { maxConnectionsPerAddress: config.maxConnectionsPerAddress }),
      idleTimeoutMs: config.connectionIdleTimeoutMs,
    },
    ...(allowedHosts && { allowedHosts }),
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * Binds `host:port` and serves `/healthz` (200 while the process runs) and
 * `/readyz` (200 `{status:"ready"}` when `ready()` resolves, else 503
 * `{status:"not-ready", reason}` with the reason it threw), both to GET and HEAD (other methods get 405), and `/metrics`: the
 * process's Prometheus metrics (metrics/exposition.ts; other methods than GET and HEAD
 * get 405), whose process metrics it starts collecting. Other paths go to
 * the handler set later, or answer 404 (503 while none is set).
 *
 * `portHint` says how to choose another port when this one is taken.
 * Request heads larger than node's `maxHeaderSize` (16 KiB) answer 431;
 * slow requests are cut per `options` (checked every second), connections bounded per `options.connections`, and with
 * `options.allowedHosts` a request for another `Host` is 403 (hosts.ts), except on
 * the probes and `/metrics`, which kubelets and scrapers reach by pod IP.
 *
 * @throws Error naming `host:port` when the port cannot be bound.
 */
export async function listenHealth(
  host: string,
  port: number,
  ready: () => Promise<void>,
  portHint = 'set PUNK_PORT',
  options: ListenOptions = {},
): Promise<HealthServer> {
  let handler: HttpHandler | undefined;
  const requestTimeout = options.requestTimeoutMs ?? 30_000;
  const headersTimeout = Math.min(options.headersTimeoutMs ?? 10_000, requestTimeout);
  const { allowedHosts } = options;
  const metricsHere = options.serveMetrics ?? true;
  collectProcessMetrics();
  const server: Server = createServer({ requestTimeout, headersTimeout, connectionsCheckingInterval: 1000 }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if ((path === '/healthz' || path === '/readyz') && req.method !== 'GET' && req.method !== 'HEAD') {
      methodNotAllowed(req, res, path, ['GET', 'HEAD']);
      return;
    }
    if (path === '/healthz') {
      json(res, 200, { status: 'ok' });
      return;
    }
    if (path === '/readyz') {
      ready().then(
        () => json(res, 200, { status: 'ready' }),
        (error: unknown) => json(res, 503, { status: 'not-ready', reason: error instanceof Error ? error.message : String(error) }),
      );
      return;
    }
    if (path === '/metrics' && metricsHere) {
      serveMetrics(req, res);
      return;
    }
    if (allowedHosts && !isAllowedHost(req.headers.host, allowedHosts)) {
      json(res, 403, {
        error: {
          code: 'ForbiddenHost',
          message: `Host ${JSON.stringify(req.headers.host ?? '')} is not a name of this listener (PUNK_ALLOWED_HOSTS)`,
        },
      });
      return;
    }
    if (handler) {
      handler(req, res);
      return;
    }
    json(res, 503, { error: { code: 'Starting', message: 'the service is starting' } });
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  if (options.connections) limitConnections(server, options.connections, 'service');
  const url = await bind(server, host, port, portHint);
  return {
    url,
    setHandler: (h) => (handler = h),
    close: () => closeServer(server),
  };
}

/** A listener that serves only `/metrics`. */
export interface MetricsServer {
  /** `http://host:port` actually bound. */
  url: string;
  /** Closes every connection and the listener. */
  close(): Promise<void>;
}

/**
 * Binds `host:port` and serves only `GET /metrics` (any `Host`; other methods 405, other paths 404): a port of
 * its own for Prometheus, so a NetworkPolicy can admit scrapers to the metrics and nothing else of the process.
 * @throws Error naming `host:port` when the port cannot be bound.
 */
export async function listenMetrics(host: string, port: number, portHint = 'set PUNK_METRICS_PORT'): Promise<MetricsServer> {
  collectProcessMetrics();
  const server = createServer({ requestTimeout: 30_000, headersTimeout: 10_000, connectionsCheckingInterval: 1000 }, (req, res) => {
    if ((req.url ?? '/').split('?')[0] === '/metrics') {
      serveMetrics(req, res);
      return;
    }
    json(res, 404, { error: { code: 'NotFound', message: 'this listener serves only /metrics' } });
  });
  const url = await bind(server, host, port, portHint);
  return { url, close: () => closeServer(server) };
}

/** Listens on `host:port`; resolves with the bound URL. @throws Error naming `host:port` and `portHint` when taken. */
async function bind(server: Server, host: string, port: number, portHint: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', (error: NodeJS.ErrnoException) => {
      const hint = error.code === 'EADDRINUSE' ? ` (another process listens there: stop it, or ${portHint})` : '';
      reject(new Error(`cannot listen on ${host}:${port}: ${error.message}${hint}`));
    });
    server.listen(port, host);
  });
  const address = server.address() as AddressInfo;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${shown}:${address.port}`;
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((done) => server.close(() => done()));
}
