/**
 * mcp-front driven by real SDK clients over real HTTP, in front of the real
 * gateway and governance on a MemoryBus, with @modelcontextprotocol/server-everything
 * as the upstream server.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { openScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, streams, subjects } from '@punk/lib';
import { everything } from './replica-harness.js';
import { listen } from './listen.js';
import { createFront, namespacedName, type Front } from '../index.js';

const log = createLogger('mcp-front-test', 'silent');
const MAX_BODY_BYTES = 64 * 1024;
/** 63 characters, the longest DNS label: `<this>__echo` is longer than 64 and gets shortened. */
const LONG_SERVER = 'everything-with-a-name-long-enough-to-force-the-shortening-rule';

interface Stack {
  tenant: string;
  bus: MemoryBus;
  base: string;
  front: Front;
  close(): Promise<void>;
}

async function startStack(): Promise<Stack> {
  const tenant = `front-${randomBytes(4).toString('hex')}`;
  const bus = new MemoryBus(log);
  await bus.ensureStream(streams.ledger);
  const workDir = await mkdtemp(join(tmpdir(), 'punk-front-'));
  const governance: GovernanceService = await startGovernance({ bus, log });
  const database = await openScratchDb(log);
  const gateway: Gateway = await startGateway({
    egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
    bus,
    log,
    db: database.db,
    servers: [everything('everything', tenant), everything(LONG_SERVER, tenant)],
    workDir,
    startTimeoutMs: 60_000,
    callTimeoutMs: 30_000,
  });
  await gateway.ready();
  const front = await createFront({ bus, log, tenant, maxBodyBytes: MAX_BODY_BYTES, callTimeoutMs: 30_000 });
  const { http, base } = await listen(front);
  return {
    tenant,
    bus,
    base,
    front,
    async close() {
      await front.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      await gateway.stop();
      await database.close();
      await governance.stop();
      await bus.close();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}

const clientInfo = { name: 'front-test', version: '1.0.0' };

async function connect2025(url: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client(clientInfo);
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  return { client, transport };
}

async function connect2026(url: string): Promise<Client> {
  const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

function text(result: { content?: unknown }): string {
  const content = result.content as { type: string; text?: string }[];
  return content
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

async function rejectsWith(promise: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ProtocolError, `expected a ProtocolError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    assert.match(error.message, pattern);
    return true;
  });
}

/** Posts raw bytes to an endpoint, as a 2025 client would. */
async function post(url: string, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
}

/** The JSON-RPC error body of an HTTP error answer. */
async function errorOf(response: Response): Promise<{ jsonrpc: string; id: null; error: { code: number; message: string } }> {
  return (await response.json()) as { jsonrpc: string; id: null; error: { code: number; message: string } };
}

/** Reads a JSON-RPC response that came as JSON or as one SSE `data:` event. */
async function jsonRpcOf(response: Response): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> {
  const raw = await response.text();
  if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const data = raw
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .filter(Boolean);
    return JSON.parse(data[data.length - 1]!);
  }
  return JSON.parse(raw);
}

describe('mcp-front in front of the real gateway', { timeout: 180_000 }, () => {
  let stack: Stack;
  before(async () => {
    stack = await startStack();
  });
  after(async () => {
    await stack?.close();
  });

  it('a 2025-11-25 client lists namespaced tools, calls everything__echo, reads a resource and gets a prompt on /mcp', async () => {
    const { client, transport } = await connect2025(`${stack.base}/mcp`);
    try {
      assert.equal(client.getProtocolEra(), 'legacy');
      assert.ok(transport.sessionId, 'a 2025 session has an Mcp-Session-Id');
      const caps = client.getServerCapabilities();
      assert.deepEqual(caps?.tools, { listChanged: true });
      assert.ok(caps?.resources && caps.prompts);

      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      assert.ok(names.includes('everything__echo'), names.join(', '));
      assert.ok(
        names.every((n) => /^[A-Za-z0-9_-]{1,64}$/.test(n)),
        'every name fits what clients accept',
      );
      const echo = tools.find((t) => t.name === 'everything__echo')!;
      assert.equal(echo.inputSchema.type, 'object');

      const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello from 2025' } });
      assert.equal(result.isError ?? false, false);
      assert.equal(text(result), 'Echo: hello from 2025');

      const { resources } = await client.listResources();
      assert.ok(resources.length > 0);
      const listed = await client.readResource({ uri: resources[0]!.uri });
      assert.equal(listed.contents[0]?.uri, resources[0]!.uri);
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'demo://resource/dynamic/text/{resourceId}'));
      const templated = await client.readResource({ uri: 'demo://resource/dynamic/text/7' });
      assert.match(String((templated.contents[0] as { text?: string }).text), /Resource 7/);

      const { prompts } = await client.listPrompts();
      assert.ok(prompts.some((p) => p.name === 'everything__simple-prompt'));
      const prompt = await client.getPrompt({ name: 'everything__simple-prompt' });
      assert.match(JSON.stringify(prompt.messages), /simple prompt without arguments/);
    } finally {
      await client.close();
    }
  });

  it('a 2026-07-28 client does the same on the same endpoint, statelessly', async () => {
    const cacheControl = new Set<string | null>();
    const sessionIds = new Set<string | null>();
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      cacheControl.add(response.headers.get('cache-control'));
      sessionIds.add(response.headers.get('mcp-session-id'));
      return response;
    };
    const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack.base}/mcp`), { fetch: recording }));
    try {
      assert.equal(client.getProtocolEra(), 'modern');
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === 'everything__echo'));
      const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'hello from 2026' } });
      assert.equal(text(result), 'Echo: hello from 2026');
      const { resources } = await client.listResources();
      const read = await client.readResource({ uri: resources[0]!.uri });
      assert.equal(read.contents[0]?.uri, resources[0]!.uri);
      const prompt = await client.getPrompt({ name: 'everything__simple-prompt' });
      assert.match(JSON.stringify(prompt.messages), /simple prompt without arguments/);
      assert.deepEqual([...cacheControl], ['no-store']);
      assert.deepEqual([...sessionIds], [null], 'no session in the 2026 era');
    } finally {
      await client.close();
    }
  });

  it('a resource nobody lists is -32602 on /mcp; on a per-server endpoint the upstream answers', async () => {
    const aggregate = await connect2026(`${stack.base}/mcp`);
    const { client: direct } = await connect2025(`${stack.base}/servers/everything/mcp`);
    try {
      await rejectsWith(aggregate.readResource({ uri: 'nothing://here' }), -32602, /nothing:\/\/here is not listed by any server/);
      await assert.rejects(direct.readResource({ uri: 'nothing://here' }), (error: unknown) => {
        assert.ok(error instanceof ProtocolError);
        assert.match(error.message, /nothing:\/\/here/);
        return true;
      });
    } finally {
      await aggregate.close();
      await direct.close();
    }
  });

  it('the per-server endpoint keeps names unchanged, with or without the namespace', async () => {
    for (const path of ['/servers/everything/mcp', `/servers/${stack.tenant}/everything/mcp`]) {
      const { client } = await connect2025(`${stack.base}${path}`);
      try {
        const { tools } = await client.listTools();
        assert.ok(
          tools.some((t) => t.name === 'echo'),
          `${path}: ${tools.map((t) => t.name).join(', ')}`,
        );
        assert.ok(!tools.some((t) => t.name.includes('__')));
        assert.equal(text(await client.callTool({ name: 'echo', arguments: { message: 'direct' } })), 'Echo: direct');
      } finally {
        await client.close();
      }
    }
    const modern = await connect2026(`${stack.base}/servers/everything/mcp`);
    try {
      assert.equal(text(await modern.callTool({ name: 'echo', arguments: { message: 'direct 2026' } })), 'Echo: direct 2026');
    } finally {
      await modern.close();
    }
    const missing = await post(`${stack.base}/servers/no-such-server/mcp`, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }));
    assert.equal(missing.status, 404);
    assert.match((await errorOf(missing)).error.message, /no MCP server named no-such-server/);
  });

  it('an unknown tool is JSON-RPC error -32602 naming the tool, in both eras', async () => {
    const { client } = await connect2025(`${stack.base}/mcp`);
    const modern = await connect2026(`${stack.base}/mcp`);
    try {
      await rejectsWith(client.callTool({ name: 'everything__nope', arguments: {} }), -32602, /Unknown tool: everything__nope/);
      await rejectsWith(modern.callTool({ name: 'nope', arguments: {} }), -32602, /Unknown tool: nope/);
    } finally {
      await client.close();
      await modern.close();
    }
  });

  it('arguments not matching inputSchema are a tool error naming the field (2025-11-25 and later), -32602 before', async () => {
    const { client } = await connect2025(`${stack.base}/mcp`);
    const modern = await connect2026(`${stack.base}/mcp`);
    try {
      for (const c of [client, modern]) {
        const result = await c.callTool({ name: 'everything__echo', arguments: { message: 42 } });
        assert.equal(result.isError, true);
        assert.match(text(result), /everything__echo: field "message" must be string/);
      }
    } finally {
      await client.close();
      await modern.close();
    }

    // A 2025-06-18 client, by hand: initialize, initialized, then the bad call.
    const url = `${stack.base}/mcp`;
    const init = await post(
      url,
      JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo },
      }),
    );
    assert.equal(init.status, 200);
    const sessionId = init.headers.get('mcp-session-id')!;
    assert.equal((await jsonRpcOf(init)).result?.['protocolVersion'], '2025-06-18');
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' };
    assert.equal((await post(url, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), headers)).status, 202);
    const bad = await post(
      url,
      JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'everything__echo', arguments: {} } }),
      headers,
    );
    const answer = await jsonRpcOf(bad);
    assert.equal(answer.error?.code, -32602);
    assert.match(answer.error.message, /field "message" is required/);
    await fetch(url, { method: 'DELETE', headers });
  });

  it('long tool names are shortened deterministically and route back to the upstream tool', async () => {
    const expected = namespacedName(LONG_SERVER, 'echo');
    assert.equal(expected.length, 64);
    assert.match(expected, new RegExp(`^${LONG_SERVER.slice(0, 55)}_[0-9a-f]{8}$`));
    const { client } = await connect2025(`${stack.base}/mcp`);
    try {
      const first = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(first.includes(expected), first.join(', '));
      assert.deepEqual(
        (await client.listTools()).tools.map((t) => t.name),
        first,
        'same names on every listing',
      );
      assert.equal(text(await client.callTool({ name: expected, arguments: { message: 'long' } })), 'Echo: long');
    } finally {
      await client.close();
    }
  });

  it('DELETE ends a 2025 session; a later request with its id gets 404', async () => {
    const { client, transport } = await connect2025(`${stack.base}/mcp`);
    const sessionId = transport.sessionId!;
    await transport.terminateSession();
    await client.close();
    const after = await post(`${stack.base}/mcp`, JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }), {
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    });
    assert.equal(after.status, 404);
    assert.equal(after.headers.get('cache-control'), 'no-store');
    const body = await errorOf(after);
    assert.equal(body.error.code, -32001);
    assert.match(body.error.message, /Session not found/);
  });

  it('live 2025 sessions hear tools/list_changed when the registry changes', async () => {
    const client = new Client(clientInfo);
    const heard = new Promise<void>((resolve) => client.setNotificationHandler('notifications/tools/list_changed', () => resolve()));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack.base}/mcp`)));
    try {
      await client.listTools();
      // Give the client's GET stream a moment to open, then announce a change as the gateway would.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await stack.bus.publish(subjects.registryChanged, { tenant: stack.tenant, server: 'everything', change: 'updated' });
      await Promise.race([heard, new Promise((_, reject) => setTimeout(() => reject(new Error('no list_changed within 10 s')), 10_000))]);
    } finally {
      await client.close();
    }
  });

  it('a burst of registry changes (a registration: added, starting, ready) reaches a session as one list_changed', async () => {
    const client = new Client(clientInfo);
    let heard = 0;
    client.setNotificationHandler('notifications/tools/list_changed', () => void heard++);
    await client.connect(new StreamableHTTPClientTransport(new URL(`${stack.base}/mcp`)));
    try {
      await client.listTools();
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const change of [{ change: 'added' }, { change: 'state', state: 'starting' }, { change: 'state', state: 'ready' }]) {
        await stack.bus.publish(subjects.registryChanged, { tenant: stack.tenant, server: 'everything', ...change });
      }
      const deadline = Date.now() + 10_000;
      while (heard === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
      // Anything more would come within the window: wait several windows.
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(heard, 1);
    } finally {
      await client.close();
    }
  });

  describe('HTTP hardening', () => {
    it('a body that is not JSON is 400 with JSON-RPC parse error -32700', async () => {
      const response = await post(`${stack.base}/mcp`, '{"jsonrpc": "2.0", "id": 1, "method":');
      assert.equal(response.status, 400);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      const body = await errorOf(response);
      assert.deepEqual(body, {
        jsonrpc: '2.0',
        error: { code: -32700, message: 'Parse error: the request body is not valid JSON' },
        id: null,
      });
    });

    it('a body over maxBodyBytes is 413 with a JSON-RPC error', async () => {
      const big = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'everything__echo', arguments: { message: 'x'.repeat(MAX_BODY_BYTES) } },
      });
      const response = await post(`${stack.base}/mcp`, big);
      assert.equal(response.status, 413);
      const body = await errorOf(response);
      assert.equal(body.error.code, -32600);
      assert.match(body.error.message, new RegExp(`limit of ${MAX_BODY_BYTES} bytes`));
    });

    it('other methods are 405 with Allow', async () => {
      const response = await fetch(`${stack.base}/mcp`, { method: 'PUT', body: '{}' });
      assert.equal(response.status, 405);
      assert.equal(response.headers.get('allow'), 'GET, POST, DELETE');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.match((await errorOf(response)).error.message, /Method PUT not allowed/);
    });

    it('a non-JSON content type is 415', async () => {
      const response = await post(`${stack.base}/mcp`, 'hello', { 'content-type': 'text/plain' });
      assert.equal(response.status, 415);
    });

    it('every MCP answer carries Cache-Control: no-store, SSE included', async () => {
      const init = await post(
        `${stack.base}/mcp`,
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo },
        }),
      );
      assert.equal(init.status, 200);
      assert.equal(init.headers.get('cache-control'), 'no-store');
      await init.text();
      // A request with a progress token streams (response mode auto): the SSE answer is no-store too.
      const headers = { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
      const streamed = await post(
        `${stack.base}/mcp`,
        JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping', params: { _meta: { progressToken: 1 } } }),
        headers,
      );
      assert.match(streamed.headers.get('content-type') ?? '', /text\/event-stream/);
      assert.equal(streamed.headers.get('cache-control'), 'no-store');
      await streamed.text();
      await fetch(`${stack.base}/mcp`, {
        method: 'DELETE',
        headers: { 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' },
      });
    });
  });
});

describe('mcp-front when the gateway is slow', { timeout: 180_000 }, () => {
  it('a bus timeout is a clear error naming the server', async () => {
    const stack = await startStack();
    const slow = await createFront({ bus: stack.bus, log, tenant: stack.tenant, maxBodyBytes: MAX_BODY_BYTES, callTimeoutMs: 300 });
    const { http, base } = await listen(slow);
    const { client } = await connect2025(`${base}/mcp`);
    try {
      await rejectsWith(
        client.callTool({ name: 'everything__trigger-long-running-operation', arguments: { duration: 2, steps: 2 } }),
        -32001,
        /server "everything" did not answer tools\/call everything__trigger-long-running-operation within 300 ms \(PUNK_CALL_TIMEOUT_MS, the server sets no spec\.timeout\)/,
      );
    } finally {
      await client.close();
      await slow.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      await stack.close();
    }
  });
});
