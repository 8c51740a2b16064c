/**
 * The small round-robin reverse proxy in front of `punk cluster`: the
 * ingress of a laptop. Bodies stream both ways without buffering (SSE
 * included); closing either side closes the other.
 *
 * Its listener cuts slow clients as the services' do (the same `headersTimeout` and `requestTimeout`, checked every
 * second) and bounds its connections (lib connection-limits.ts). Towards the backends it keeps connections alive for
 * less than the backends keep them ({@link BACKEND_IDLE_MS} below lib's `KEEP_ALIVE_TIMEOUT_MS`), so it does not
 * reuse a connection the backend is closing; should a reused connection still be reset before any response byte,
 * a request without a body and of an idempotent method (RFC 9110 §9.2.2) is sent once more on a new connection.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { KEEP_ALIVE_TIMEOUT_MS, limitConnections, type ConnectionLimits, type Logger } from '@punk/lib';

/** How long an idle connection to a backend is kept for reuse, in milliseconds: a second below the backends' keep-alive timeout. */
export const BACKEND_IDLE_MS = KEEP_ALIVE_TIMEOUT_MS - 1000;

/** Methods whose request can be sent again without changing the outcome (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT']);

/** Backends of the proxy, as `http://host:port` base URLs. */
/** Backend URLs by group; read on every request, so removing a URL takes it out of the rotation. */
export interface ProxyBackends {
  /** Ledger replicas: `/api/v1/runs*` and `/api/v1/ledger/*` (unless `ledgerApi: 'fronts'`). */
  ledgers: string[];
  /**
   * mcp-front replicas: every other path (the MCP endpoints, the admin API `/api/v1/api-keys`, the dashboard `/ui`, and
   * `/.well-known/oauth-protected-resource…`). Empty: those paths answer 503.
   */
  fronts: string[];
}

/** A listening proxy. */
export interface Proxy {
  /** `http://host:port` it listens on. */
  url: string;
  /** Stops listening and closes every connection, streams included. */
  close(): Promise<void>;
}

/** True for the paths the ledgers serve. */
export function isLedgerPath(path: string): boolean {
  return path === '/api/v1/runs' || path.startsWith('/api/v1/runs/') || path.startsWith('/api/v1/ledger/');
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function forwardable(headers: IncomingMessage['headers']): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/** Whether a request carries a body (RFC 9112 §6.3: a `Transfer-Encoding`, or a `Content-Length` above 0). */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

function fail(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error: { code, message } }));
}

/**
 * Listens on `host:port` and forwards each request to the next backend of its
 * group (round robin). A backend that cannot be reached answers 502 naming it.
 * With `ledgerApi: 'fronts'` the ledger paths go to the fronts too (which authenticate and pass them on to a
 * ledger), not to the ledgers, whose API does not authenticate.
 * @throws Error naming `host:port` when it cannot listen.
 */
export async function startProxy(options: {
  host: string;
  port: number;
  backends: ProxyBackends;
  log: Logger;
  /** Who serves the ledger paths: the ledgers themselves (default), or the fronts (with authentication on). */
  ledgerApi?: 'ledgers' | 'fronts';
  /** Until a request head has arrived, in ms (`PUNK_HEADERS_TIMEOUT_MS`, as the services); then 408. Default 10 s. */
  headersTimeoutMs?: number;
  /** Until a whole request has arrived, in ms (`PUNK_REQUEST_TIMEOUT_MS`, as the services); then 408. Default 30 s. */
  requestTimeoutMs?: number;
  /** Bounds on the proxy's client connections (`PUNK_MAX_CONNECTIONS`, …). Default none. */
  connections?: ConnectionLimits;
}): Promise<Proxy> {
  const { backends, log } = options;
  const agent = new Agent({ keepAlive: true, timeout: BACKEND_IDLE_MS });
  const next = { ledgers: 0, fronts: 0 };
  const pick = (group: keyof ProxyBackends): string | undefined => {
    const list = backends[group];
    if (list.length === 0) return undefined;
    return list[next[group]++ % list.length];
  };
  // Slow clients are checked every second, as the services' listeners do (node's default is every 30 s).
  const server: Server = createServer({ connectionsCheckingInterval: 1000 }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    // With authentication on the ledgers' own API stays internal: the fronts serve its paths to admins (PUNK_LEDGER_URL).
    const group = isLedgerPath(path) && options.ledgerApi !== 'fronts' ? 'ledgers' : 'fronts';
    const target = pick(group);
    if (!target) {
      fail(res, 503, 'NoBackend', `no ${group === 'ledgers' ? 'ledger' : 'mcp-front'} replica runs behind this proxy`);
      return;
    }
    const url = new URL(req.url ?? '/', target);
    const headers = forwardable(req.headers);
    const replayable = IDEMPOTENT.has(req.method ?? '') && !hasBody(req);
    const send = (retry: boolean) => {
      const upstream = httpRequest(url, { method: req.method, headers, agent: retry ? false : agent }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
        // An event stream's head goes out at once (its first event may be long in coming); any other answer's head goes
        // with its first bytes, in one write (a JSON answer of a call: one segment instead of two).
        if ((answer.headers['content-type'] ?? '').startsWith('text/event-stream')) res.flushHeaders();
        answer.pipe(res);
        answer.on('error', () => res.destroy());
      });
      upstream.on('error', (error: NodeJS.ErrnoException) => {
        // A kept-alive connection the backend closed as it was reused: nothing was answered, so an idempotent request goes once more.
        if (!retry && replayable && upstream.reusedSocket && error.code === 'ECONNRESET' && !res.headersSent && !res.destroyed) {
          log.debug({ target, path }, 'proxy: a reused backend connection was reset before any answer; sending again on a new one');
          send(true);
          return;
        }
        log.warn({ target, path, err: error.message }, 'proxy: backend failed');
        fail(res, 502, 'BadGateway', `${target} did not answer: ${error.message}`);
      });
      // The client went away (a closed SSE stream, an aborted request): stop the backend request too.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      if (replayable) upstream.end();
      else req.pipe(upstream);
    };
    send(false);
  });
  server.headersTimeout = Math.min(options.headersTimeoutMs ?? 10_000, options.requestTimeoutMs ?? 30_000);
  server.requestTimeout = options.requestTimeoutMs ?? 30_000;
  if (options.connections) limitConnections(server, options.connections, 'proxy');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', (error: NodeJS.ErrnoException) => {
      const hint = error.code === 'EADDRINUSE' ? ' (another process listens there: stop it, or set PUNK_PORT)' : '';
      reject(new Error(`cannot listen on ${options.host}:${options.port}: ${error.message}${hint}`));
    });
    server.listen(options.port, options.host);
  });
  const address = server.address() as { port: number };
  return {
    url: `http://${options.host}:${address.port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
      agent.destroy();
    },
  };
}
