/**
 * `punk-bridge egress-proxy`: an HTTP forward proxy that lets a server pod reach only the destinations of its
 * egress allow-list. It takes `CONNECT host:port` (RFC 9110 §9.3.6: a TCP tunnel, used for TLS) and plain HTTP
 * requests in absolute form (`GET http://host/path`, RFC 9112 §3.2.2). Each destination is decided by
 * {@link matchEgress}; a refused one is answered 403 with a body naming the host and port. The host is checked
 * and normalized once ({@link parseRequestHost}; a bad one is answered 400) and that one string is matched and
 * resolved. A name is resolved once, fully qualified, and the proxy connects to that address, so a second lookup
 * cannot lead elsewhere; a name rule never leads to a special-purpose address (loopback, private, metadata, …)
 * that no cidr rule declares ({@link chooseAddress}). Every decision is logged as one JSON line (host, port,
 * allowed, rule, and the reason of a refusal). Hop-by-hop fields are not forwarded (RFC 9110 §7.6.1) and
 * a `Via` field is added (§7.6.3). Limits: idle tunnels and connections close after `idleTimeoutMs`, connecting
 * gives up after `connectTimeoutMs`, and clients beyond `maxConnections` are answered 503. `GET /healthz` and
 * `GET /readyz` (origin form) answer 200 while it listens, for the Deployment's probes.
 */
import {
  Agent,
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { chooseAddress, lookupAddresses } from './resolution.js';
import { hasNetworkRuleFor, matchEgress, parseRequestHost, RequestHostError, type EgressDecision, type RequestHost } from './rules.js';
import type { EgressProxyFlags } from '../flags.js';
import type { Logger } from '../log.js';

/** Options of {@link startEgressProxy}: the flags of `egress-proxy` and the log. */
export interface EgressProxyOptions extends EgressProxyFlags {
  log: Logger;
}

/** A running egress proxy. */
export interface RunningEgressProxy {
  /** `http://host:port` actually bound: what HTTP_PROXY and HTTPS_PROXY name. */
  url: string;
  /** Stops listening and closes every connection and tunnel. Idempotent. */
  close(): Promise<void>;
}

/** What the proxy adds to `Via` (RFC 9110 §7.6.3). */
const VIA = '1.1 punk-egress-proxy';

/** Hop-by-hop fields (RFC 9110 §7.6.1), plus Proxy-Authorization, which is meant for this proxy alone. */
const HOP_BY_HOP = [
  'connection',
  'proxy-connection',
  'keep-alive',
  'te',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'trailer',
];

/** `headers` without hop-by-hop fields, nor those the Connection field names, with this proxy in `Via`. */
function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const connection = [headers.connection ?? []]
    .flat()
    .flatMap((value) => value.split(','))
    .map((token) => token.trim().toLowerCase());
  const dropped = new Set([...HOP_BY_HOP, ...connection]);
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !dropped.has(name)) out[name] = value;
  out.via = headers.via ? `${[headers.via].flat().join(', ')}, ${VIA}` : VIA;
  return out;
}

/** A whole HTTP/1.1 response written on a raw socket (CONNECT answers, limits), closing the connection. */
function rawResponse(socket: Duplex, status: number, reason: string, body: string): void {
  if (socket.destroyed) return;
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** A destination the proxy refused or could not reach, as an HTTP answer. */
class Refusal {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly body: string,
  ) {}
}

function refusedBody(host: string, port: number, reason: string | undefined): string {
  return reason === undefined
    ? `egress to ${host}:${port} is refused: no rule of this pod's egress allow-list (spec.sandbox.egress) matches it\n`
    : `egress to ${host}:${port} is refused: ${host} ${reason}, which no cidr rule of this pod's egress allow-list (spec.sandbox.egress) allows on port ${port}\n`;
}

/**
 * Binds `host:port` and proxies until {@link RunningEgressProxy.close}.
 * @throws Error naming `host:port` when it cannot be bound.
 */
export async function startEgressProxy(options: EgressProxyOptions): Promise<RunningEgressProxy> {
  const { log, rules } = options;
  /** Client connections (what --max-connections bounds) and the sockets of open tunnels. */
  const clients = new Set<Socket>();
  const upstreams = new Set<Socket>();
  const refusedSockets = new WeakSet<Socket>();
  const agent = new Agent({ keepAlive: true, timeout: options.idleTimeoutMs });

  /** Checks the host, decides on the destination and resolves it: the address to connect to, or the refusal to answer. */
  const decide = async (
    method: string,
    rawHost: string,
    port: number,
  ): Promise<{ host: string; address: string; decision: EgressDecision } | Refusal> => {
    let parsed: RequestHost;
    try {
      parsed = parseRequestHost(rawHost);
    } catch (error) {
      if (!(error instanceof RequestHostError)) throw error;
      log.info({ method, host: rawHost, port, allowed: false, rule: null, reason: error.message }, 'egress refused');
      return new Refusal(400, 'Bad Request', `${error.message}\n`);
    }
    const { host } = parsed;
    let decision = matchEgress(rules, { host, port });
    let address = parsed.family !== 0 ? host : undefined;
    let reason: string | undefined;
    let failure: string | undefined;
    // A name no name rule allows is resolved only when an address rule could still allow it.
    if (address === undefined && (decision.allowed || hasNetworkRuleFor(rules, port))) {
      try {
        const choice = chooseAddress(rules, port, decision, await lookupAddresses(host));
        address = choice.address;
        decision = choice.allowed ? { allowed: true, rule: choice.rule } : { allowed: false, rule: undefined };
        if (!choice.allowed) reason = choice.reason;
      } catch (error) {
        failure = (error as Error).message;
      }
    }
    log.info(
      {
        method,
        host,
        port,
        allowed: decision.allowed,
        rule: decision.rule ?? null,
        ...(address && { address }),
        ...(reason && { reason }),
      },
      decision.allowed ? 'egress allowed' : 'egress refused',
    );
    if (!decision.allowed) return new Refusal(403, 'Forbidden', refusedBody(host, port, reason));
    if (address === undefined)
      return new Refusal(
        502,
        'Bad Gateway',
        `egress to ${host}:${port} is allowed, but ${host} could not be resolved: ${failure ?? 'no address'}\n`,
      );
    return { host, address, decision };
  };

  const tunnel = async (req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> => {
    const target = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(req.url ?? '');
    if (!target || Number(target[2]) < 1 || Number(target[2]) > 65535) {
      rawResponse(client, 400, 'Bad Request', `CONNECT needs a host:port target (RFC 9110 §9.3.6), got ${JSON.stringify(req.url)}\n`);
      return;
    }
    const port = Number(target[2]);
    const decided = await decide('CONNECT', target[1]!, port);
    if (decided instanceof Refusal) {
      rawResponse(client, decided.status, decided.reason, decided.body);
      return;
    }
    const upstream = connect({ host: decided.address, port });
    upstreams.add(upstream);
    const connectTimer = setTimeout(() => {
      upstream.destroy();
      rawResponse(
        client,
        504,
        'Gateway Timeout',
        `egress to ${decided.host}:${port} (${decided.address}) did not connect within ${options.connectTimeoutMs} ms\n`,
      );
    }, options.connectTimeoutMs);
    upstream.once('connect', () => {
      clearTimeout(connectTimer);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.setTimeout(options.idleTimeoutMs, () => upstream.destroy());
      client.pipe(upstream).pipe(client);
    });
    upstream.on('error', (error) => {
      clearTimeout(connectTimer);
      if (upstream.connecting || !upstream.remoteAddress)
        rawResponse(client, 502, 'Bad Gateway', `egress to ${decided.host}:${port} (${decided.address}) failed: ${error.message}\n`);
      else client.destroy();
    });
    upstream.on('close', () => {
      upstreams.delete(upstream);
      client.destroy();
    });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
  };

  const forward = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    // Origin-form requests are for the proxy itself: only its probes.
    const path = (req.url ?? '').split('?')[0];
    if (path === '/healthz' || path === '/readyz') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      return void res.end(JSON.stringify({ status: path === '/healthz' ? 'ok' : 'ready' }));
    }
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      return void res.end('this is an HTTP forward proxy: send CONNECT host:port, or requests in absolute form (GET http://host/path)\n');
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
      return void res.end(
        `only http: requests are forwarded in absolute form; use CONNECT for ${url.protocol} (got ${url.protocol}//${url.host})\n`,
      );
    }
    const port = url.port === '' ? 80 : Number(url.port);
    const decided = await decide(req.method ?? 'GET', url.hostname, port);
    if (decided instanceof Refusal) {
      res.writeHead(decided.status, { 'content-type': 'text/plain; charset=utf-8' });
      return void res.end(decided.body);
    }
    const headers = forwardedHeaders(req.headers);
    headers.host = url.host;
    const upstream = httpRequest({
      host: decided.address,
      port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers,
      setHost: false,
      agent,
    });
    let timedOut = false;
    const connectTimer = setTimeout(() => {
      timedOut = true;
      upstream.destroy(new Error(`did not connect within ${options.connectTimeoutMs} ms`));
    }, options.connectTimeoutMs);
    upstream.once('socket', (socket) => {
      if (!socket.connecting) clearTimeout(connectTimer);
      else socket.once('connect', () => clearTimeout(connectTimer));
    });
    upstream.on('response', (response) => {
      res.writeHead(response.statusCode ?? 502, response.statusMessage, forwardedHeaders(response.headers));
      response.pipe(res);
    });
    upstream.on('error', (error) => {
      clearTimeout(connectTimer);
      if (res.headersSent) return void res.destroy();
      res.writeHead(timedOut ? 504 : 502, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`egress to ${decided.host}:${port} (${decided.address}) failed: ${error.message}\n`);
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  };

  const server = createServer({ connectionsCheckingInterval: 1000 });
  server.timeout = options.idleTimeoutMs;
  server.on('connection', (socket: Socket) => {
    if (clients.size >= options.maxConnections) {
      refusedSockets.add(socket);
      log.warn({ maxConnections: options.maxConnections, remote: socket.remoteAddress }, 'refused a connection: at the connection limit');
      rawResponse(
        socket,
        503,
        'Service Unavailable',
        `the egress proxy is at its limit of ${options.maxConnections} connections (--max-connections); retry later\n`,
      );
      return;
    }
    clients.add(socket);
    socket.on('close', () => clients.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (refusedSockets.has(req.socket)) return void res.destroy();
    forward(req, res).catch((error: unknown) => {
      log.error({ err: (error as Error).message }, 'proxying failed');
      res.destroy();
    });
  });
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    if (refusedSockets.has(req.socket)) return void client.destroy();
    (client as Socket).setTimeout(options.idleTimeoutMs, () => client.destroy());
    tunnel(req, client, head).catch((error: unknown) => {
      log.error({ err: (error as Error).message }, 'tunnel failed');
      client.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot listen on ${options.host}:${options.port}: ${error.message}`, { cause: error })),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  log.info({ url, rules: rules.map((rule) => rule.text) }, 'egress proxy listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const socket of [...clients, ...upstreams]) socket.destroy();
        server.closeAllConnections();
        agent.destroy();
        await closed;
        log.info('egress proxy stopped');
      })()),
  };
}
