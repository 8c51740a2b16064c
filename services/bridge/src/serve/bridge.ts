/**
 * `punk-bridge serve`: the HTTP listener in front of a stdio MCP server. Each MCP session (MCP 2025-11-25
 * basic/transports, Streamable HTTP with `Mcp-Session-Id`) is made by an `initialize` POST and gets its own child
 * process, because a stdio server serves one client; at most `maxSessions` live at once. Also `/healthz`
 * (the process runs) and `/readyz` (listening, not stopping, and the command is an executable file).
 *
 * A request without a session that is not `initialize` (a 2026-07-28 stateless request, which carries its
 * protocol version in `_meta` and never initializes) is answered `400 Bad Request` with a JSON-RPC error that is
 * not one of the modern era's errors: per the 2026-07-28 versioning rules a dual-era client then falls back to
 * `initialize`, and Punk's gateway (the bridge's one client in a cluster) does exactly that. Serving modern
 * requests would need a child per request or a shared child answering several clients, which a stdio server
 * cannot be assumed to allow.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BridgeSession } from './session.js';
import { findCommand } from './command.js';
import type { Logger } from '../log.js';
import type { ServeFlags } from '../flags.js';

/** Largest POST body read by the bridge itself (the initialize request), in bytes; the SDK transport's own bound. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** Options of {@link startBridge}: the flags of `serve`, the child's environment and the log. */
export interface BridgeOptions extends ServeFlags {
  /** The child's environment (default: the bridge's own, `process.env`). */
  env?: NodeJS.ProcessEnv;
  log: Logger;
}

/** A running bridge. */
export interface RunningBridge {
  /** `http://host:port` actually bound. */
  url: string;
  /** Live sessions. */
  sessionCount(): number;
  /** What SIGTERM does: stop accepting, end every session (children stopped), close the listener. Idempotent. */
  close(): Promise<void>;
}

function jsonRpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  id: unknown = null,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', id: id ?? null, error: { code, message } }));
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/** Reads a request body up to {@link MAX_BODY_BYTES}; undefined when it is larger. */
async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function idOf(body: unknown): unknown {
  return body !== null && typeof body === 'object' && 'id' in body ? body.id : null;
}

/**
 * Binds `host:port` and serves the bridge until {@link RunningBridge.close}.
 * @throws Error naming `host:port` when it cannot be bound.
 */
export async function startBridge(options: BridgeOptions): Promise<RunningBridge> {
  const { log } = options;
  const env = Object.fromEntries(
    Object.entries(options.env ?? process.env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  const sessions = new Map<string, BridgeSession>();
  /** Sessions whose child is starting or whose initialize has not minted an id yet: they count against the limit. */
  let starting = 0;
  let stopping = false;

  const ready = async (): Promise<string | undefined> => {
    if (stopping) return 'the bridge is shutting down';
    const found = await findCommand(options.command, env.PATH);
    return found
      ? undefined
      : `the command ${JSON.stringify(options.command)} is not an executable file${options.command.includes('/') ? '' : ' on PATH'}`;
  };

  const newSession = async (req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> => {
    if (sessions.size + starting >= options.maxSessions) {
      log.warn({ sessions: sessions.size, maxSessions: options.maxSessions }, 'refused a new session: at the session limit');
      const message = `the bridge already serves its limit of ${options.maxSessions} sessions (--max-sessions), one MCP server process each; end a session (HTTP DELETE) or retry later`;
      jsonRpcError(res, 503, -32000, message, idOf(body), { 'retry-after': '5' });
      return;
    }
    starting++;
    let registered = false;
    let session: BridgeSession;
    try {
      session = await BridgeSession.start({
        command: options.command,
        args: options.args,
        env,
        idleTimeoutMs: options.sessionIdleTimeoutMs,
        log,
        onInitialized: (started) => {
          registered = true;
          starting--;
          sessions.set(started.id!, started);
          log.info({ session: started.id, pid: started.pid, sessions: sessions.size }, 'session started');
          // Started while the bridge was stopping: close() has already ended the sessions it knew of.
          if (stopping) void started.end('the bridge is shutting down');
        },
        onEnded: (ended, reason) => {
          if (ended.id !== undefined && sessions.get(ended.id) === ended) sessions.delete(ended.id);
          log.info({ session: ended.id, pid: ended.pid, reason, sessions: sessions.size }, 'session ended');
        },
      });
    } catch (error) {
      starting--;
      log.error({ err: (error as Error).message }, 'could not start the MCP server process');
      jsonRpcError(res, 502, -32603, (error as Error).message, idOf(body));
      return;
    }
    try {
      await session.http.handleRequest(req, res, body);
    } finally {
      if (!registered) {
        starting--;
        void session.end('the initialize request was refused');
      }
    }
  };

  const mcp = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (stopping) {
      jsonRpcError(res, 503, -32000, 'the bridge is shutting down', null, { connection: 'close' });
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      // MCP 2025-11-25 basic/transports: an unknown or ended session is 404, and the client starts a new one.
      if (!session) {
        jsonRpcError(
          res,
          404,
          -32001,
          `Session not found: ${sessionId} does not exist or has ended; send initialize to start a new session`,
        );
        return;
      }
      session.touch();
      return session.http.handleRequest(req, res);
    }
    if (req.method !== 'POST') {
      jsonRpcError(
        res,
        400,
        -32000,
        `Bad Request: ${req.method} needs the Mcp-Session-Id header of a session; a session starts with an initialize POST`,
      );
      return;
    }
    const text = await readBody(req);
    if (text === undefined) {
      jsonRpcError(res, 413, -32000, `Payload Too Large: the request body exceeds ${MAX_BODY_BYTES} bytes`);
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      jsonRpcError(res, 400, -32700, 'Parse error: the request body is not JSON');
      return;
    }
    const method = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as { method?: unknown }).method : undefined;
    if (method === 'initialize') return newSession(req, res, body);
    // Also the answer to a 2026-07-28 stateless request: not a modern error, so a dual-era client falls back to initialize.
    jsonRpcError(
      res,
      400,
      -32000,
      'Bad Request: Mcp-Session-Id header is required. This endpoint serves MCP sessions (protocol 2025-11-25 and earlier): start one with initialize',
      idOf(body),
    );
  };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      json(res, 200, { status: 'ok' });
      return;
    }
    if (path === '/readyz') {
      void ready().then((reason) =>
        reason === undefined ? json(res, 200, { status: 'ready' }) : json(res, 503, { status: 'not-ready', reason }),
      );
      return;
    }
    if (path !== options.path) {
      json(res, 404, { error: `no route for ${path}: the MCP endpoint is ${options.path}` });
      return;
    }
    mcp(req, res).catch((error: unknown) => {
      log.error({ err: (error as Error).message }, 'request failed');
      jsonRpcError(res, 500, -32603, `Internal error: ${(error as Error).message}`);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot listen on ${options.host}:${options.port}: ${error.message}`, { cause: error })),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  log.info(
    { url: `${url}${options.path}`, command: options.command, args: options.args, maxSessions: options.maxSessions },
    'bridge listening',
  );
  const unready = await ready();
  if (unready) log.warn({ reason: unready }, 'not ready');

  let closing: Promise<void> | undefined;
  return {
    url,
    sessionCount: () => sessions.size,
    close: () =>
      (closing ??= (async () => {
        stopping = true;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        await Promise.all([...sessions.values()].map((session) => session.end('the bridge is shutting down')));
        server.closeAllConnections();
        await closed;
        log.info('bridge stopped');
      })()),
  };
}
