/**
 * The HTTP checks of mcp-front (http.ts), in their documented order, with
 * raw HTTP against a real front on a MemoryBus (no gateway is needed: every
 * check answers before a call leaves the front): Origin, CORS preflight,
 * the authenticate hook, Accept, Content-Type, MCP-Protocol-Version, body
 * size, batches and ids; then the 2025-era initialize limits (429, 503),
 * response modes, and two replicas on real NATS sharing the rate limit.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { anonymousPrincipal, createLogger, listenHealth, LOOPBACK_HOST_NAMES, loadConfig, MemoryBus, type Principal } from '@punk/lib';
import express from 'express';
import { createFront, frontOptionsOf, type Front, type FrontOptions } from '../index.js';
import { startNats, startReplica, stopReplica, type Replica } from './replica-harness.js';

const log = createLogger('mcp-front-http-checks-test', 'silent');
const V2025 = '2025-11-25';
const V2026 = '2026-07-28';
const APP_ORIGIN = 'https://app.example.com';
const clientInfo = { name: 'http-checks-test', version: '1.0.0' };

interface TestFront {
  base: string;
  front: Front;
  close(): Promise<void>;
}

/**
 * A front of a fresh tenant on its own MemoryBus and port, served as the services serve it (lib
 * `listenHealth`, whose `allowedHosts` check comes before the front's own).
 */
async function startFront(options: Partial<FrontOptions> = {}, allowedHosts?: readonly string[]): Promise<TestFront> {
  const tenant = `checks-${randomBytes(4).toString('hex')}`;
  const bus = new MemoryBus(log);
  const front = await createFront({
    bus,
    log,
    tenant,
    maxBodyBytes: 64 * 1024,
    callTimeoutMs: 5_000,
    allowedOrigins: [APP_ORIGIN],
    ...options,
  });
  const app = express();
  app.use(front.router);
  const http = await listenHealth('127.0.0.1', 0, async () => undefined, 'test', allowedHosts ? { allowedHosts } : {});
  http.setHandler(app);
  return {
    base: http.url,
    front,
    async close() {
      await front.close();
      await http.close();
      await bus.close();
    },
  };
}

const GOOD = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...GOOD, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

function initializeBody(id: unknown = 1): unknown {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: V2025, capabilities: {}, clientInfo } };
}

/** Starts a session; resolves with its id. */
async function initialize(base: string, headers: Record<string, string> = {}): Promise<string> {
  const response = await post(`${base}/mcp`, initializeBody(), headers);
  assert.equal(response.status, 200, await response.clone().text());
  await response.body?.cancel();
  return response.headers.get('mcp-session-id')!;
}

/** Status and JSON-RPC error of an answer; `id` is the one it must carry (null where the request's is unknown). */
async function errorOf(
  response: Response,
  id: string | number | null = null,
): Promise<{ status: number; code: number; message: string; data?: unknown }> {
  const body = (await response.json()) as { id: unknown; error: { code: number; message: string; data?: unknown } };
  assert.equal(body.id, id, 'HTTP-level errors echo the request id where it could be read, else null');
  return { status: response.status, ...body.error };
}

describe('mcp-front HTTP checks, in order', () => {
  let t: TestFront;
  before(async () => {
    t = await startFront();
  });
  after(async () => {
    await t.close();
  });

  it('Origin: absent passes, null never, a foreign origin is 403, the own and configured origins pass', async () => {
    const url = `${t.base}/mcp`;
    assert.equal((await post(url, initializeBody())).status, 200);
    for (const origin of ['null', 'http://evil.example', 'not a url', 'http://127.0.0.1.evil.example']) {
      const refused = await errorOf(await post(url, initializeBody(), { origin }));
      assert.equal(refused.status, 403, origin);
      assert.match(refused.message, /Origin/);
    }
    assert.equal((await post(url, initializeBody(), { origin: `${t.base}/x` })).status, 403, 'an origin with a path is not an origin');
    assert.equal((await post(url, initializeBody(), { origin: t.base })).status, 200, 'the endpoint’s own origin');
    assert.equal((await post(url, initializeBody(), { origin: APP_ORIGIN })).status, 200, 'a configured origin');
  });

  it('Host: with an allow-list (a loopback listener), a rebound name is 403 before anything else', async () => {
    const guarded = await startFront({}, LOOPBACK_HOST_NAMES);
    try {
      const port = new URL(guarded.base).port;
      const send = (host: string) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const body = JSON.stringify(initializeBody());
          const req = httpRequest(
            `${guarded.base}/mcp`,
            { method: 'POST', headers: { ...GOOD, host, origin: `http://${host}` } },
            (res) => {
              let text = '';
              res
                .setEncoding('utf8')
                .on('data', (chunk) => (text += chunk))
                .on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
            },
          );
          req.on('error', reject).end(body);
        });
      const refused = await send('evil.example');
      assert.equal(refused.status, 403);
      assert.match((JSON.parse(refused.body) as { error: { message: string } }).error.message, /Host "evil.example"/);
      assert.equal((await send(`evil.example:${port}`)).status, 403);
      assert.equal((await send(`localhost:${port}`)).status, 200);
      assert.equal((await send(`127.0.0.1:${port}`)).status, 200);
    } finally {
      await guarded.close();
    }
  });

  it('initialize asking for a revision the endpoint does not accept gets a counter-offer of one it does', async () => {
    const response = await post(`${t.base}/mcp`, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo },
    });
    assert.equal(response.status, 200);
    const { result } = (await response.json()) as { result: { protocolVersion: string } };
    assert.equal(result.protocolVersion, V2025);
  });

  it('a 2025-era request without a session is 400 naming both ways on: initialize first, or a stateless 2026-07-28 request', async () => {
    const refused = await errorOf(await post(`${t.base}/mcp`, { jsonrpc: '2.0', id: 3, method: 'tools/list' }));
    assert.equal(refused.status, 400);
    assert.equal(refused.code, -32000);
    assert.match(refused.message, /Mcp-Session-Id header is required \(send initialize first .*stateless in protocol 2026-07-28/);
  });

  it('initialize on a live session is refused: a session is initialized once', async () => {
    const sessionId = await initialize(t.base);
    const again = await errorOf(
      await post(`${t.base}/mcp`, initializeBody(5), { 'mcp-session-id': sessionId, 'mcp-protocol-version': V2025 }),
      5,
    );
    assert.equal(again.status, 400);
    assert.match(again.message, /initialized already/);
  });

  it('a request failing several checks gets the first one’s status', async () => {
    const url = `${t.base}/mcp`;
    const huge = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(100 * 1024) } });
    const cases: { name: string; init: RequestInit; status: number; code: number; id?: number }[] = [
      {
        name: 'Origin before everything',
        init: { method: 'PUT', headers: { origin: 'http://evil.example', accept: 'text/plain', 'content-type': 'text/plain' } },
        status: 403,
        code: -32000,
      },
      { name: 'method before Accept', init: { method: 'PUT', headers: { accept: 'text/plain' } }, status: 405, code: -32000 },
      {
        name: 'Accept before Content-Type',
        init: { method: 'POST', headers: { accept: 'application/json', 'content-type': 'text/plain' }, body: '{}' },
        status: 406,
        code: -32000,
      },
      {
        name: 'Content-Type before protocol version',
        init: { method: 'POST', headers: { ...GOOD, 'content-type': 'text/plain', 'mcp-protocol-version': '1999-01-01' }, body: '{}' },
        status: 415,
        code: -32000,
      },
      {
        name: 'protocol version before session id',
        init: {
          method: 'POST',
          headers: { ...GOOD, 'mcp-protocol-version': '1999-01-01' },
          body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
        },
        status: 400,
        code: -32022,
        id: 1,
      },
      {
        name: 'protocol version before body size',
        init: { method: 'POST', headers: { ...GOOD, 'mcp-protocol-version': '1999-01-01' }, body: huge },
        status: 400,
        code: -32022,
      },
      {
        name: 'body size before JSON',
        init: { method: 'POST', headers: GOOD, body: `{${'x'.repeat(100 * 1024)}` },
        status: 413,
        code: -32600,
      },
      { name: 'JSON before session', init: { method: 'POST', headers: GOOD, body: '{"jsonrpc":' }, status: 400, code: -32700 },
      { name: 'GET Accept before session id', init: { method: 'GET', headers: { accept: 'application/json' } }, status: 406, code: -32000 },
      {
        name: 'GET under 2026-07-28 has no stream',
        init: { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-protocol-version': V2026 } },
        status: 405,
        code: -32000,
      },
      { name: 'then the session id', init: { method: 'GET', headers: { accept: 'text/event-stream' } }, status: 400, code: -32000 },
    ];
    for (const c of cases) {
      const response = await fetch(url, c.init);
      const error = await errorOf(response, c.id ?? null);
      assert.equal(error.status, c.status, `${c.name}: ${error.message}`);
      assert.equal(error.code, c.code, `${c.name}: ${error.message}`);
      if (c.status === 405) assert.equal(response.headers.get('allow'), c.init.method === 'GET' ? 'POST' : 'GET, POST, DELETE');
      if (c.status === 413) assert.match(error.message, /exceeds the limit of \d+ bytes \(PUNK_MAX_BODY_BYTES\)/);
    }
  });

  it('an unsupported MCP-Protocol-Version is 400 with the request id, naming and listing every version (a 2026-style request: those of its era)', async () => {
    const error = await errorOf(
      await post(`${t.base}/mcp`, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-protocol-version': '2024-01-01' }),
      1,
    );
    assert.equal(error.status, 400);
    assert.match(error.message, /2024-01-01/);
    assert.match(error.message, /2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26/);
    assert.deepEqual(error.data, { supported: [V2026, V2025, '2025-06-18', '2025-03-26'], requested: '2024-01-01' }, 'as the message');
    const meta = {
      'io.modelcontextprotocol/protocolVersion': 'v999',
      'io.modelcontextprotocol/clientInfo': clientInfo,
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const modern = await errorOf(
      await post(
        `${t.base}/mcp`,
        { jsonrpc: '2.0', id: 'd-1', method: 'server/discover', params: { _meta: meta } },
        { 'mcp-protocol-version': 'v999' },
      ),
      'd-1',
    );
    assert.deepEqual(modern.data, { supported: [V2026], requested: 'v999' }, 'a 2026-style request lists what server/discover reports');
    // Its message lists the same, and names the 2025 era's versions apart (a trial read them as contradicting data).
    assert.match(
      modern.message,
      /supported versions: 2026-07-28 \(2025-era clients: 2025-11-25, 2025-06-18, 2025-03-26, with initialize and a session\)/,
    );
  });

  it('2026-07-28: the SDK checks MCP-Protocol-Version against _meta and Mcp-Method/Mcp-Name against the body (400, -32020 HeaderMismatch)', async () => {
    const meta = {
      'io.modelcontextprotocol/protocolVersion': V2026,
      'io.modelcontextprotocol/clientInfo': clientInfo,
      'io.modelcontextprotocol/clientCapabilities': {},
    };
    const body = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: meta } };
    const versionMismatch = await post(`${t.base}/mcp`, body, { 'mcp-protocol-version': V2025, 'mcp-method': 'tools/list' });
    assert.equal(versionMismatch.status, 400);
    assert.equal(((await versionMismatch.json()) as { error: { code: number } }).error.code, -32020);
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'a', _meta: meta } };
    for (const [what, message, headers] of [
      ['Mcp-Method naming another method', body, { 'mcp-protocol-version': V2026, 'mcp-method': 'tools/call' }],
      ['Mcp-Method absent', body, { 'mcp-protocol-version': V2026 }],
      ['MCP-Protocol-Version absent', body, { 'mcp-method': 'tools/list' }],
      ['Mcp-Name naming another tool', call, { 'mcp-protocol-version': V2026, 'mcp-method': 'tools/call', 'mcp-name': 'b' }],
    ] as const) {
      const answer = await post(`${t.base}/mcp`, message, headers);
      assert.equal(answer.status, 400, what);
      assert.equal(((await answer.json()) as { error: { code: number } }).error.code, -32020, what);
    }
  });

  it('batches only under 2025-03-26; ids must be strings or integers', async () => {
    const id = await initialize(t.base);
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ];
    const refused = await errorOf(await post(`${t.base}/mcp`, batch, { 'mcp-session-id': id, 'mcp-protocol-version': V2025 }));
    assert.equal(refused.status, 400);
    assert.equal(refused.code, -32600);
    assert.match(refused.message, /only allowed under protocol version 2025-03-26/);
    const allowed = await post(`${t.base}/mcp`, batch, { 'mcp-session-id': id, 'mcp-protocol-version': '2025-03-26' });
    assert.equal(allowed.status, 200);
    const answers = (await allowed.json()) as { id: number }[];
    assert.deepEqual(answers.map((a) => a.id).sort(), [1, 2]);
    assert.equal((await errorOf(await post(`${t.base}/mcp`, [], { 'mcp-session-id': id }))).code, -32600, 'an empty batch');
  });
});

describe('CORS and the authenticate hook', () => {
  let t: TestFront;
  const seen: string[] = [];
  before(async () => {
    t = await startFront({
      authenticate: async (req, res): Promise<Principal | null> => {
        seen.push(req.method!);
        const token = req.headers.authorization;
        if (token === 'Bearer alice' || token === 'Bearer bob') return { ...anonymousPrincipal('x'), subject: token.slice(7) };
        res
          .writeHead(401, { 'WWW-Authenticate': 'Bearer realm="test"', 'Content-Type': 'application/json' })
          .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Unauthorized"}}');
        return null;
      },
    });
  });
  after(async () => {
    await t.close();
  });

  it('a preflight of an allowed origin is 204 with the MCP headers allowed, without authentication; a foreign origin is 403', async () => {
    seen.length = 0;
    const preflight = await fetch(`${t.base}/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: APP_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, mcp-session-id, mcp-protocol-version',
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), APP_ORIGIN);
    const allowed = preflight.headers.get('access-control-allow-headers')!.toLowerCase();
    for (const header of [
      'authorization',
      'content-type',
      'mcp-session-id',
      'mcp-protocol-version',
      'mcp-method',
      'mcp-name',
      'last-event-id',
    ])
      assert.ok(allowed.includes(header), header);
    assert.match(preflight.headers.get('access-control-allow-methods')!, /POST/);
    assert.equal(preflight.headers.get('cache-control'), 'no-store');
    assert.deepEqual(seen, [], 'preflights are not authenticated');
    const foreign = await fetch(`${t.base}/mcp`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    assert.equal(foreign.status, 403);
  });

  it('Origin comes before authentication; then the hook answers 401; actual answers expose the MCP headers', async () => {
    assert.equal((await post(`${t.base}/mcp`, initializeBody(), { origin: 'http://evil.example' })).status, 403);
    const unauthenticated = await post(`${t.base}/mcp`, initializeBody(), { origin: APP_ORIGIN, accept: 'text/plain' });
    assert.equal(unauthenticated.status, 401, 'authentication comes before Accept');
    assert.ok(unauthenticated.headers.get('www-authenticate'));
    const ok = await post(`${t.base}/mcp`, initializeBody(), { origin: APP_ORIGIN, authorization: 'Bearer alice' });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('access-control-allow-origin'), APP_ORIGIN);
    const exposed = ok.headers.get('access-control-expose-headers')!.toLowerCase();
    for (const header of ['mcp-session-id', 'mcp-protocol-version', 'www-authenticate']) assert.ok(exposed.includes(header), header);
  });

  it('the principal the hook returns owns the session: another principal gets 404', async () => {
    const id = await initialize(t.base, { authorization: 'Bearer alice' });
    const ping = { jsonrpc: '2.0', id: 2, method: 'ping' };
    assert.equal(
      (await post(`${t.base}/mcp`, ping, { authorization: 'Bearer alice', 'mcp-session-id': id, 'mcp-protocol-version': V2025 })).status,
      200,
    );
    assert.equal(
      (await post(`${t.base}/mcp`, ping, { authorization: 'Bearer bob', 'mcp-session-id': id, 'mcp-protocol-version': V2025 })).status,
      404,
    );
  });
});

describe('2025-era initialize limits and response modes', () => {
  it('more initialize requests per minute than the limit from one address are 429 with Retry-After; X-Forwarded-For counts only behind a trusted proxy', async () => {
    const direct = await startFront({ initializeRateLimit: 2 });
    try {
      await initialize(direct.base);
      await initialize(direct.base);
      const refused = await post(`${direct.base}/mcp`, initializeBody(), { 'x-forwarded-for': '203.0.113.9' });
      const error = await errorOf(refused);
      assert.equal(error.status, 429, 'a spoofed X-Forwarded-For does not help');
      assert.match(error.message, /more than 2 initialize requests per minute from this address \(PUNK_INITIALIZE_RATE_LIMIT\)/);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    } finally {
      await direct.close();
    }
    const proxied = await startFront({ initializeRateLimit: 2, trustProxy: 1 });
    try {
      await initialize(proxied.base, { 'x-forwarded-for': '203.0.113.1' });
      await initialize(proxied.base, { 'x-forwarded-for': '203.0.113.1' });
      assert.equal((await post(`${proxied.base}/mcp`, initializeBody(), { 'x-forwarded-for': '203.0.113.1' })).status, 429);
      await initialize(proxied.base, { 'x-forwarded-for': '203.0.113.1, 203.0.113.2' });
    } finally {
      await proxied.close();
    }
  });

  it('initialize beyond the maximum of sessions is 503 with Retry-After; ending a session makes room', async () => {
    const t = await startFront({ maxSessions: 2, sessionTtlMs: 60_000 });
    try {
      const first = await initialize(t.base);
      await initialize(t.base);
      const refused = await post(`${t.base}/mcp`, initializeBody());
      const unavailable = await errorOf(refused);
      assert.equal(unavailable.status, 503);
      assert.match(unavailable.message, /holds its maximum of 2 sessions \(PUNK_MAX_SESSIONS\)/);
      assert.equal(refused.headers.get('retry-after'), '15');
      assert.equal((await fetch(`${t.base}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': first } })).status, 204);
      await initialize(t.base);
    } finally {
      await t.close();
    }
  });

  it('auto answers JSON unless the call streams (a progress token); always answers SSE with X-Accel-Buffering: no; json never streams', async () => {
    for (const [mode, plain, withProgress] of [
      ['auto', 'application/json', 'text/event-stream'],
      ['always', 'text/event-stream', 'text/event-stream'],
      ['json', 'application/json', 'application/json'],
    ] as const) {
      const t = await startFront({ responseMode: mode });
      try {
        const id = await initialize(t.base);
        const headers = { 'mcp-session-id': id, 'mcp-protocol-version': V2025 };
        const a = await post(`${t.base}/mcp`, { jsonrpc: '2.0', id: 2, method: 'ping' }, headers);
        assert.equal(a.headers.get('content-type')?.split(';')[0], plain, `${mode}: ping`);
        await a.text();
        const b = await post(
          `${t.base}/mcp`,
          { jsonrpc: '2.0', id: 3, method: 'ping', params: { _meta: { progressToken: 'p' } } },
          headers,
        );
        assert.equal(b.headers.get('content-type')?.split(';')[0], withProgress, `${mode}: ping with a progress token`);
        if (withProgress === 'text/event-stream') {
          assert.equal(b.headers.get('x-accel-buffering'), 'no');
          assert.equal(b.headers.get('cache-control'), 'no-store');
        }
        await b.text();
      } finally {
        await t.close();
      }
    }
  });

  it('the GET stream carries X-Accel-Buffering: no, no-store, and a priming event with retry:', async () => {
    const t = await startFront({ sseRetryMs: 300 });
    try {
      const id = await initialize(t.base);
      const controller = new AbortController();
      const stream = await fetch(`${t.base}/mcp`, {
        headers: { accept: 'text/event-stream', 'mcp-session-id': id, 'mcp-protocol-version': V2025 },
        signal: controller.signal,
      });
      assert.equal(stream.status, 200);
      assert.equal(stream.headers.get('x-accel-buffering'), 'no');
      assert.equal(stream.headers.get('cache-control'), 'no-store');
      const reader = stream.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      assert.match(first, /^id: \S+\nretry: 300\ndata: \n\n/);
      controller.abort();
    } finally {
      await t.close();
    }
  });

  it('configuration reaches the endpoint: path, serverInfo, instructions, logging off', async () => {
    const config = loadConfig({
      PUNK_MCP_PATH: '/rpc',
      PUNK_SERVER_TITLE: 'Punk under test',
      PUNK_SERVER_WEBSITE_URL: 'https://punk.example.com',
      PUNK_SERVER_INSTRUCTIONS: 'Use the tools kindly.',
      PUNK_LOGGING_CAPABILITY: 'false',
    });
    const t = await startFront(frontOptionsOf(config));
    try {
      assert.equal((await post(`${t.base}/mcp`, initializeBody())).status, 404, 'the default path is gone');
      const answer = await post(`${t.base}/rpc`, initializeBody());
      const { result } = (await answer.json()) as {
        result: { serverInfo: Record<string, unknown>; instructions?: string; capabilities: Record<string, unknown> };
      };
      assert.deepEqual(result.serverInfo, {
        name: 'punk',
        version: '0.1.0',
        title: 'Punk under test',
        websiteUrl: 'https://punk.example.com',
      });
      assert.equal(result.instructions, 'Use the tools kindly.');
      assert.equal(result.capabilities['logging'], undefined);
    } finally {
      await t.close();
    }
  });

  it('options are checked at start with a clear error', async () => {
    const bus = new MemoryBus(log);
    const base = { bus, log, tenant: 'opts', maxBodyBytes: 1024, callTimeoutMs: 1000 };
    await assert.rejects(createFront({ ...base, pageSize: 5000 }), /pageSize must be an integer from 1 to 1000, got 5000/);
    await assert.rejects(createFront({ ...base, path: 'mcp' }), /path must be an absolute URL path/);
    await assert.rejects(createFront({ ...base, allowedOrigins: ['nope'] }), /allowedOrigins has "nope"/);
    await assert.rejects(createFront({ ...base, toolTimeouts: { a__b: -1 } }), /toolTimeouts\["a__b"\]/);
    await bus.close();
  });
});

describe('two replicas on NATS', () => {
  let nats: Awaited<ReturnType<typeof startNats>>;
  let a: Replica;
  let b: Replica;
  before(async () => {
    nats = await startNats(log);
    const tenant = `checks-${randomBytes(4).toString('hex')}`;
    a = await startReplica(nats.url, tenant, 'a', log, { initializeRateLimit: 4, maxSessions: 3 });
    b = await startReplica(nats.url, tenant, 'b', log, { initializeRateLimit: 4, maxSessions: 3 });
  });
  after(async () => {
    await stopReplica(a);
    await stopReplica(b);
    await nats.stop();
  });

  it('the maximum of sessions and the initialize rate limit hold across replicas', async () => {
    await initialize(a.base);
    await initialize(b.base);
    await initialize(a.base);
    assert.equal((await post(`${b.base}/mcp`, initializeBody())).status, 503, 'a fourth session, on the other replica');
    assert.equal((await post(`${a.base}/mcp`, initializeBody())).status, 429, 'a fifth initialize within the minute');
  });
});
