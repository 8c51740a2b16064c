/**
 * The deprecated HTTP+SSE transport of MCP 2024-11-05 on two mcp-front replicas over real NATS, in front of
 * the real gateway and governance (with a policy) and @modelcontextprotocol/server-everything, behind API keys:
 * the SDK's own `SSEClientTransport` (v2) and the MCP Inspector CLI (SDK v1's) connect to `/sse` and per
 * server; POSTs reaching the replica that does not hold the event stream are answered on it; calls are
 * governed and on the ledger; the `endpoint` event follows `X-Forwarded-Prefix` and `PUNK_PUBLIC_URL`.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Client, SSEClientTransport } from '@modelcontextprotocol/client';
import { createLogger, ledgerEventSchema, streams, subjects } from '@punk/lib';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('http-sse-test', 'silent');
const PUBLIC_HOST = 'punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const AUTH = { authorization: `Bearer ${BOOTSTRAP}` };
const repoRoot = join(import.meta.dirname, '../../../..');

/** The environment stays private: the tenant's McpPolicy `test`. */
const policies = {
  test: { rules: [{ name: 'no-env', tools: ['get-env'], decision: 'deny' as const, reason: 'the environment stays private' }] },
};

/** A fetch that sends consecutive requests to the replicas in turn (the first to `bases[0]`). */
function alternating(bases: string[]): typeof fetch {
  let next = 0;
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    url.host = new URL(bases[next++ % bases.length] ?? bases[0] ?? '').host;
    return fetch(url, init);
  };
}

/** An SDK client over the HTTP+SSE transport: the event stream on `bases[0]`, POSTs alternating from `bases[1]`. */
async function connectSse(url: string, bases: string[], capabilities: Record<string, object> = {}): Promise<Client> {
  const client = new Client({ name: 'http-sse-test', version: '1.0.0' }, { capabilities });
  const posts = alternating([...bases.slice(1), ...bases.slice(0, 1)]);

  const transport = new SSEClientTransport(new URL(url), {
    requestInit: { headers: AUTH },
    fetch: posts,
    eventSourceInit: { fetch: (input, init) => fetch(input, init) },
  });
  await client.connect(transport);
  return client;
}

function textOf(result: unknown): string {
  return ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text ?? '').join('\n');
}

/** An event stream opened with raw HTTP: its events as they arrive. */
interface RawStream {
  status: number;
  headers: IncomingMessage['headers'];
  /** Resolves with the next event (`event` is `message` when the server named none). */
  next(): Promise<{ event: string; data: string }>;
  close(): void;
}

/** Opens `GET <base><path>` with raw HTTP and the given headers (a `Host` of one's own too). */
function openRaw(base: string, path: string, headers: Record<string, string>): Promise<RawStream> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { headers: { accept: 'text/event-stream', ...AUTH, ...headers } }, (res) => {
      let buffer = '';
      const events: Array<{ event: string; data: string }> = [];
      const waiters: Array<(e: { event: string; data: string }) => void> = [];
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const lines = block.split('\n');
          const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart());
          if (data.length === 0) continue;
          const event = {
            event:
              lines
                .find((l) => l.startsWith('event:'))
                ?.slice(6)
                .trim() ?? 'message',
            data: data.join('\n'),
          };
          const waiter = waiters.shift();
          if (waiter) waiter(event);
          else events.push(event);
        }
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        next: () =>
          new Promise((r) => {
            const event = events.shift();
            if (event) r(event);
            else waiters.push(r);
          }),
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** POSTs one message to an endpoint URL (resolved against `base`). */
function postTo(base: string, endpoint: string, message: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(new URL(endpoint, base), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...AUTH, ...headers },
    body: JSON.stringify(message),
  });
}

void describe('the HTTP+SSE transport (MCP 2024-11-05) on two replicas', () => {
  let replicas: ReplicaSet;

  before(async () => {
    replicas = await startReplicaSet(log, {
      prefix: 'http-sse',
      servers: (tenant) => [everything('everything', tenant)],
      policies,
      frontOptions: () => ({
        auth: { publicUrl: `https://${PUBLIC_HOST}/punk`, bootstrapAdminKey: BOOTSTRAP },
        publicUrl: `https://${PUBLIC_HOST}/punk`,
        keepAliveMs: 200,
      }),
    });
  });

  after(async () => {
    await replicas.stop();
  });

  void it("the SDK's SSEClientTransport on /sse, its POSTs reaching both replicas: tools, progress, sampling, policy and ledger", async () => {
    const { a, b } = replicas;
    const client = await connectSse(`${a.base}/sse`, [a.base, b.base], { sampling: {} });
    try {
      client.setRequestHandler('sampling/createMessage', () => ({
        role: 'assistant',
        content: { type: 'text', text: 'a sampled answer' },
        model: 'test-model',
      }));
      const tools = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('everything__echo'), 'the aggregated names');
      assert.equal(textOf(await client.callTool({ name: 'everything__echo', arguments: { message: 'over sse' } })), 'Echo: over sse');
      const progress: number[] = [];
      const long = await client.callTool(
        { name: 'everything__trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
        { onprogress: (p) => void progress.push(p.progress) },
      );
      assert.match(textOf(long), /completed/);
      // The SDK client runs notification handlers a microtask late but responses at once, so a progress event that
      // arrives in the same read as the response is dropped by the client: the last one may be missing.
      assert.ok(progress.length >= 1, 'progress arrives on the event stream');
      assert.deepEqual(progress, [1, 2, 3].slice(0, progress.length), 'in order');
      const sampled = await client.callTool({ name: 'everything__trigger-sampling-request', arguments: { prompt: 'hello' } });
      assert.match(textOf(sampled), /a sampled answer/, 'a server-to-client request and its answer cross the replicas');
      const denied = await client.callTool({ name: 'everything__get-env', arguments: {} }).then(
        (result) => JSON.stringify(result),
        (error: unknown) => String(error),
      );
      assert.match(denied, /the environment stays private/, 'governance decides as on /mcp');
    } finally {
      await client.close();
    }
    const events = (
      await replicas.core.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 })
    ).map((m) => ledgerEventSchema.parse(m.data));
    const echoed = events.filter((e) => e.tenant === replicas.tenant && JSON.stringify(e).includes('over sse'));
    assert.ok(echoed.length >= 1, 'the call is on the ledger');
    assert.ok(
      echoed.every((e) => e.principal?.subject === 'bootstrap-admin'),
      "under the caller's subject",
    );
  });

  void it('per server, with or without the namespace, names are unchanged', async () => {
    for (const path of ['/servers/everything/sse', `/servers/${replicas.tenant}/everything/sse`]) {
      const client = await connectSse(`${replicas.b.base}${path}`, [replicas.b.base, replicas.a.base]);
      try {
        const tools = (await client.listTools()).tools.map((t) => t.name);
        assert.ok(tools.includes('echo'), `${path} lists echo`);
        assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: path } })), `Echo: ${path}`);
      } finally {
        await client.close();
      }
    }
  });

  void it('the MCP Inspector CLI (SDK v1 SSEClientTransport) lists the tools with --transport sse', async () => {
    const cli = join(repoRoot, 'node_modules/.bin/mcp-inspector-cli');
    const { stdout } = await promisify(execFile)(
      cli,
      ['--cli', `${replicas.a.base}/sse`, '--transport', 'sse', '--header', `Authorization: Bearer ${BOOTSTRAP}`, '--method', 'tools/list'],
      // The CLI reads its identity from `../package.json` of its working directory: the repository's, from e2e/.
      { timeout: 60_000, cwd: join(repoRoot, 'e2e') },
    );
    const listed = JSON.parse(stdout) as { tools: Array<{ name: string }> };
    assert.ok(listed.tools.some((t) => t.name === 'everything__echo'));
  });

  void it('the endpoint event follows X-Forwarded-Prefix, else the path of PUNK_PUBLIC_URL on its host, else none', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ 'x-forwarded-prefix': '/team/punk/' }, /^\/team\/punk\/sse\?sessionId=[0-9a-f-]{36}$/],
      [{ host: PUBLIC_HOST }, /^\/punk\/sse\?sessionId=[0-9a-f-]{36}$/],
      [{}, /^\/sse\?sessionId=[0-9a-f-]{36}$/],
    ];
    for (const [headers, expected] of cases) {
      const stream = await openRaw(replicas.a.base, '/sse', headers);
      try {
        assert.equal(stream.status, 200);
        assert.equal(stream.headers['content-type'], 'text/event-stream');
        const first = await stream.next();
        assert.equal(first.event, 'endpoint');
        assert.match(first.data, expected, JSON.stringify(headers));
      } finally {
        stream.close();
      }
    }
    const bad = await openRaw(replicas.a.base, '/sse', { 'x-forwarded-prefix': 'http://evil.example/' });
    assert.equal(bad.status, 400, 'a prefix that is not a path is refused, naming the header');
    bad.close();
  });

  void it('a 2024-11-05 client by hand: agreed at 2024-11-05, answered and notified on the stream, and the session ends with it', async () => {
    const { a, b } = replicas;
    const stream = await openRaw(a.base, '/sse', {});
    const endpoint = (await stream.next()).data;
    const init = await postTo(b.base, endpoint, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    assert.equal(init.status, 202);
    const result = JSON.parse((await stream.next()).data) as { id: number; result: { protocolVersion: string } };
    assert.equal(result.id, 1);
    assert.equal(result.result.protocolVersion, '2024-11-05');
    assert.equal((await postTo(a.base, endpoint, { jsonrpc: '2.0', method: 'notifications/initialized' })).status, 202);
    const headers = { 'mcp-protocol-version': '2024-11-05' };
    assert.equal((await postTo(b.base, endpoint, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers)).status, 202);
    const listed = JSON.parse((await stream.next()).data) as { id: number; result: { tools: unknown[] } };
    assert.equal(listed.id, 2);
    assert.ok(listed.result.tools.length > 0);
    await replicas.core.publish(subjects.registryChanged, { tenant: replicas.tenant, server: 'everything', change: 'updated' });
    assert.match((await stream.next()).data, /notifications\/(tools|resources|prompts)\/list_changed/, 'session-wide notifications too');

    const again = await postTo(a.base, endpoint, {
      jsonrpc: '2.0',
      id: 3,
      method: 'initialize',
      params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    assert.equal(again.status, 400, 'initialize once per session');
    const noSession = await postTo(a.base, '/sse', { jsonrpc: '2.0', id: 4, method: 'tools/list' });
    assert.equal(noSession.status, 400);
    assert.match(await noSession.text(), /GET \/sse to open an event stream/);
    const anonymous = await fetch(new URL(endpoint, a.base), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }),
    });
    assert.equal(anonymous.status, 401, 'the same authentication as /mcp');
    const foreign = await openRaw(a.base, '/sse', { origin: 'https://evil.example' });
    assert.equal(foreign.status, 403, 'the same Origin check as /mcp');
    foreign.close();

    stream.close();
    let status = 0;
    for (let i = 0; i < 50 && status !== 404; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await postTo(b.base, endpoint, { jsonrpc: '2.0', id: 6, method: 'tools/list' })).status;
    }
    assert.equal(status, 404, 'closing the event stream ends the session on every replica');
  });
});
