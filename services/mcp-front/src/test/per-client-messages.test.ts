/**
 * A `sessionMode: per-client` server behind two mcp-front replicas on real NATS: its upstream connection
 * belongs to one 2025-era client session, so what it sends outside any call reaches that client on its GET
 * stream, whichever replica holds it: log messages (at the session's log level) and `roots/list` (answered
 * with a POST to either replica). The client's `notifications/roots/list_changed` reaches the upstream.
 */
import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger, mcpServerSchema, PunkError, sendSessionMessage, subjects, type McpServer } from '@punk/lib';
import { startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('per-client-messages-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const clientInfo = { name: 'per-client-messages-test', version: '1.0.0' };
const fixture = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/session-aware.mjs');

/** The `sessionMode: per-client` server `session` of `tenant` (fixtures/session-aware.mjs). */
function sessionAware(tenant: string): McpServer[] {
  return [
    mcpServerSchema.parse({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'session', namespace: tenant },
      spec: { image: 'local/session-aware', command: [process.execPath, fixture], sessionMode: 'per-client' },
    }),
  ];
}

/**
 * A fetch whose GET goes to `get`, whose POSTs of a JSON-RPC answer go to `answers`, and whose other POSTs
 * alternate between `get` and `answers`; every POST is recorded in `posts`.
 */
function spread(get: string, answers: string, posts: { base: string; body: string }[] = []): typeof fetch {
  let next = 0;
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const body = String(init?.body ?? '');
    const isAnswer = init?.method === 'POST' && /"(result|error)"/.test(body) && !body.includes('"method"');
    const base = (init?.method ?? 'GET') === 'GET' ? get : isAnswer ? answers : [answers, get][next++ % 2]!;
    if (init?.method === 'POST') posts.push({ base, body });
    url.host = new URL(base).host;
    return fetch(url, init);
  };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

describe('a per-client server talking to its client session outside calls, across two fronts', { timeout: 120_000 }, () => {
  let replicas: ReplicaSet;

  before(async () => {
    replicas = await startReplicaSet(log, { prefix: 'messages', servers: sessionAware, startTimeoutMs: 30_000 });
  });

  after(async () => {
    await replicas?.stop();
  });

  it('a 2025-11-25 client hears the upstream log messages at its level on its GET stream (on B), and answers roots/list asked there, in a call and after roots/list_changed, with POSTs to A', async () => {
    let roots = [{ uri: 'file:///work/alpha', name: 'alpha' }];
    const client = new Client(clientInfo, { capabilities: { roots: { listChanged: true } } });
    const logs: { level: string; data: unknown }[] = [];
    client.setNotificationHandler(
      'notifications/message',
      (notification) => void logs.push({ level: notification.params.level, data: notification.params.data }),
    );
    client.setRequestHandler('roots/list', async () => ({ roots }));
    const posts: { base: string; body: string }[] = [];
    const transport = new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), {
      fetch: spread(replicas.b.base, replicas.a.base, posts),
    });
    await client.connect(transport);
    try {
      await client.setLoggingLevel('warning');
      await new Promise((done) => setTimeout(done, 300)); // the SDK's GET stream (on B) is open by now

      const logged = await client.callTool({ name: 'session__log', arguments: { levels: ['debug', 'info', 'warning', 'error'] } });
      assert.equal(logged.isError, undefined, JSON.stringify(logged));
      await until('two log messages', () => (logs.length >= 2 ? true : undefined));
      await new Promise((done) => setTimeout(done, 200)); // nothing below the level follows
      assert.deepEqual(logs, [
        { level: 'warning', data: 'a warning message' },
        { level: 'error', data: 'a error message' },
      ]);

      const inCall = await client.callTool({ name: 'session__roots', arguments: {} });
      assert.equal(inCall.isError, undefined, JSON.stringify(inCall));
      assert.match(JSON.stringify(inCall.content), /file:\/\/\/work\/alpha/);

      roots = [{ uri: 'file:///work/beta', name: 'beta' }];
      await client.sendRootsListChanged();
      const changed = await until('the upstream to log the new roots', () => logs.find((l) => String(l.data).startsWith('roots now')));
      assert.equal(changed.data, 'roots now file:///work/beta');
      const answers = posts.filter((p) => p.body.includes('"roots"') && p.body.includes('"result"'));
      assert.equal(answers.length, 2, 'both roots/list answers went back as POSTs');
      assert.ok(
        answers.every((p) => p.base === replicas.a.base),
        'to replica A, while B held the GET stream that asked',
      );
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it('a client that did not declare roots: the upstream’s roots/list gets -32601', async () => {
    const client = new Client(clientInfo);
    const transport = new StreamableHTTPClientTransport(new URL(`${replicas.b.base}/mcp`), {
      fetch: spread(replicas.a.base, replicas.b.base),
    });
    await client.connect(transport);
    try {
      const result = await client.callTool({ name: 'session__roots', arguments: {} });
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.match(JSON.stringify(result.content), /code=-32601/);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it('a malformed or unknown-session message on punk.tenant.<tenant>.session-message is refused with an error, and the fronts keep serving', async () => {
    await assert.rejects(
      replicas.core.request(
        subjects.sessionMessage(replicas.tenant),
        { sessionId: 'x', message: { method: 'notifications/message' } },
        { timeoutMs: 5_000 },
      ),
      (error: unknown) => {
        assert.ok(error instanceof PunkError && error.code === 'InvalidMessage', String(error));
        assert.match(error.message, /message\.jsonrpc/);
        return true;
      },
    );
    await assert.rejects(
      sendSessionMessage(replicas.core, replicas.tenant, {
        sessionId: 'no-such-session',
        message: { jsonrpc: '2.0', method: 'notifications/message' },
      }),
      (error: unknown) => {
        assert.ok(error instanceof PunkError && error.code === 'SessionNotFound', String(error));
        return true;
      },
    );
    const client = new Client(clientInfo);
    await client.connect(new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`)));
    assert.ok((await client.listTools()).tools.some((t) => t.name === 'session__log'));
    await client.close();
  });
});
