/**
 * The small round-robin reverse proxy in front of `punk cluster`: the
 * ingress of a laptop. Bodies stream both ways without buffering (SSE
 * included); closing either side closes the other.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '@punk/lib';

/** Backends of the proxy, as `http://host:port` base URLs. */
/** Backend URLs by group; read on every request, so removing a URL takes it out of the rotation. */
export interface ProxyBackends {
  /** Ledger replicas: `/api/v1/runs*` and `/api/v1/ledger/*`. */
  ledgers: string[];
  /**
   * mcp-front replicas: every other path (the MCP endpoints, the admin API `/api/v1/api-keys`, and
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
 * With `ledgerApi: 'internal'` the ledger paths answer 403 (naming no backend URL) instead of reaching the ledgers.
 * @throws Error naming `host:port` when it cannot listen.
 */
export async function startProxy(options: {
  host: string;
  port: number;
  backends: ProxyBackends;
  log: Logger;
  ledgerApi?: 'public' | 'internal';
}): Promise<Proxy> {
  const { backends, log } = options;
  const agent = new Agent({ keepAlive: true });
  const next = { ledgers: 0, fronts: 0 };
  const pick = (group: keyof ProxyBackends): string | undefined => {
    const list = backends[group];
    if (list.length === 0) return undefined;
    return list[next[group]++ % list.length];
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const group = isLedgerPath(path) ? 'ledgers' : 'fronts';
    if (group === 'ledgers' && options.ledgerApi === 'internal') {
      // The ledger processes do not authenticate: with authentication on, their API stays internal, and so do their URLs.
      fail(
        res,
        403,
        'InternalApi',
        "with PUNK_AUTH_MODE=on the ledger API is internal to the distributed topology (it does not authenticate callers): read it from inside the deployment, on a ledger replica's own port",
      );
      return;
    }
    const target = pick(group);
    if (!target) {
      fail(res, 503, 'NoBackend', `no ${group === 'ledgers' ? 'ledger' : 'mcp-front'} replica runs behind this proxy`);
      return;
    }
    const upstream = httpRequest(
      new URL(req.url ?? '/', target),
      { method: req.method, headers: forwardable(req.headers), agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
        res.flushHeaders();
        answer.pipe(res);
        answer.on('error', () => res.destroy());
      },
    );
    upstream.on('error', (error) => {
      log.warn({ target, path, err: error.message }, 'proxy: backend failed');
      fail(res, 502, 'BadGateway', `${target} did not answer: ${error.message}`);
    });
    // The client went away (a closed SSE stream, an aborted request): stop the backend request too.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  });
  server.requestTimeout = 0;
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
