// `punk-bridge serve` as a pod runs it: the built binary as a child process, real stdio MCP servers behind it
// (server-everything, server-memory, the fixture), and the SDK's real Client over Streamable HTTP in front.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/client';
import {
  connectClient,
  eventually,
  EVERYTHING,
  FIXTURE,
  isRunning,
  MEMORY,
  runBridge,
  runToExit,
  textOf,
  type BridgeProcess,
} from './harness.js';

const running: BridgeProcess[] = [];
after(async () => {
  for (const bridge of running) if (bridge.child.exitCode === null) await bridge.stop();
});
async function bridgeOf(...args: Parameters<typeof runBridge>): Promise<BridgeProcess> {
  const bridge = await runBridge(...args);
  running.push(bridge);
  return bridge;
}

/** POSTs one JSON-RPC message without a session, as a raw HTTP client. */
async function post(
  bridge: BridgeProcess,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: { error?: { code: number; message: string } } }> {
  const response = await fetch(new URL('/mcp', bridge.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as { error?: { code: number; message: string } } };
}

const initialize = (id: number) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

describe('punk-bridge serve', () => {
  test('a client lists and calls the tools of server-everything, with progress, sampling, elicitation and resource updates relayed', async () => {
    const bridge = await bridgeOf(EVERYTHING);
    const { client } = await connectClient(bridge, { capabilities: { sampling: {}, elicitation: { form: {} } } });
    client.setRequestHandler('sampling/createMessage', async () => ({
      role: 'assistant',
      content: { type: 'text', text: 'a sampled answer' },
      model: 'test-model',
    }));
    client.setRequestHandler('elicitation/create', async (request) => {
      assert.match(String(request.params.message), /provide inputs/);
      return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
    });
    const updated: string[] = [];
    client.setNotificationHandler('notifications/resources/updated', (notification) => void updated.push(notification.params.uri));

    const tools = (await client.listTools()).tools.map((tool) => tool.name);
    for (const name of ['echo', 'get-sum', 'trigger-long-running-operation', 'trigger-sampling-request', 'trigger-elicitation-request'])
      assert.ok(tools.includes(name), `${name} is listed`);
    assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { message: 'through the bridge' } })), 'Echo: through the bridge');
    assert.match(textOf(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } })), /42/);

    const progress: number[] = [];
    const long = await client.callTool(
      { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
      { onprogress: (p) => void progress.push(p.progress) },
    );
    assert.match(textOf(long), /completed/);
    assert.deepEqual(progress, [1, 2, 3]);

    assert.match(textOf(await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello' } })), /a sampled answer/);
    assert.match(JSON.stringify(await client.callTool({ name: 'trigger-elicitation-request', arguments: {} })), /Ada Lovelace/);

    // A server-initiated notification with no request in flight reaches the client on the session's GET stream.
    const uri = (await client.listResources()).resources[0]!.uri;
    await client.subscribeResource({ uri });
    await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
    await eventually(() => updated.includes(uri), `notifications/resources/updated for ${uri}`);
    await client.close();
  });

  test('two clients get two child processes; one ending its session leaves the other working', async () => {
    const bridge = await bridgeOf(FIXTURE);
    const first = await connectClient(bridge);
    const second = await connectClient(bridge);
    const firstPid = Number(textOf(await first.client.callTool({ name: 'pid', arguments: {} })));
    const secondPid = Number(textOf(await second.client.callTool({ name: 'pid', arguments: {} })));
    assert.notEqual(firstPid, secondPid);
    assert.ok(isRunning(firstPid) && isRunning(secondPid));

    await first.transport.terminateSession();
    await first.client.close();
    await eventually(() => !isRunning(firstPid), `the first session's child ${firstPid} ends`);
    assert.equal(Number(textOf(await second.client.callTool({ name: 'pid', arguments: {} }))), secondPid);
    const ended = await bridge.waitForLog((line) => line.msg === 'session ended' && line.pid === firstPid);
    assert.match(String(ended.reason), /DELETE/);
    await second.client.close();
  });

  test('the pod environment reaches the child, and its stderr becomes log lines', async () => {
    const bridge = await bridgeOf(FIXTURE, [], { PUNK_TEST_GREETING: 'hello from the pod' });
    const { client } = await connectClient(bridge);
    assert.equal(textOf(await client.callTool({ name: 'env', arguments: { name: 'PUNK_TEST_GREETING' } })), 'hello from the pod');
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    const line = await bridge.waitForLog((l) => l.stream === 'stderr' && String(l.msg).startsWith('bridge-fixture ready'));
    assert.equal(line.pid, pid);
    assert.equal(line.msg, `bridge-fixture ready pid=${pid}`);
    await client.close();
  });

  test('server-memory (examples/memory.yaml) answers through the bridge', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'punk-bridge-memory-'));
    try {
      const bridge = await bridgeOf(MEMORY, [], { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') });
      const { client } = await connectClient(bridge);
      await client.callTool({
        name: 'create_entities',
        arguments: { entities: [{ name: 'Punk', entityType: 'project', observations: ['bridges stdio to HTTP'] }] },
      });
      const graph = await client.callTool({ name: 'read_graph', arguments: {} });
      assert.match(JSON.stringify(graph), /bridges stdio to HTTP/);
      await client.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a child that crashes: its pending call fails naming exit code 3, the session ends, a new session works', async () => {
    const bridge = await bridgeOf(FIXTURE);
    const { client } = await connectClient(bridge);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    await assert.rejects(client.callTool({ name: 'crash', arguments: {} }), (error: unknown) => {
      assert.ok(error instanceof ProtocolError, String(error));
      assert.match(error.message, /exited with code 3/);
      return true;
    });
    const ended = await bridge.waitForLog((line) => line.msg === 'session ended' && line.pid === pid);
    assert.match(String(ended.reason), /exited with code 3/);
    await bridge.waitForLog((line) => line.stream === 'stderr' && line.msg === 'about to crash');
    // The ended session is gone (404: the client must start a new one), and a new one gets a new child.
    await assert.rejects(client.callTool({ name: 'pid', arguments: {} }), /404|Session not found/);
    const again = await connectClient(bridge);
    assert.notEqual(Number(textOf(await again.client.callTool({ name: 'pid', arguments: {} }))), pid);
    await again.client.close();
    await client.close().catch(() => undefined);
  });

  test("a server that exits before answering initialize: the client's initialize fails naming the exit code", async () => {
    const bridge = await bridgeOf([process.execPath, '-e', 'process.stderr.write("no config\\n"); process.exit(1)']);
    await assert.rejects(connectClient(bridge), /exited with code 1 before answering/);
    await bridge.waitForLog((line) => line.msg === 'session ended' && /exited with code 1/.test(String(line.reason)));
    await bridge.waitForLog((line) => line.stream === 'stderr' && line.msg === 'no config');
  });

  test('--max-sessions: one session too many is answered 503 naming the limit; ending one makes room', async () => {
    const bridge = await bridgeOf(FIXTURE, ['--max-sessions', '2']);
    const first = await connectClient(bridge);
    const second = await connectClient(bridge);
    const refused = await post(bridge, initialize(7));
    assert.equal(refused.status, 503);
    assert.equal((refused.body as { id?: unknown }).id, 7);
    assert.match(refused.body.error!.message, /limit of 2 sessions \(--max-sessions\)/);
    await assert.rejects(connectClient(bridge), /503|max-sessions/);

    await first.transport.terminateSession();
    await first.client.close();
    const third = await connectClient(bridge);
    assert.ok(Number(textOf(await third.client.callTool({ name: 'pid', arguments: {} }))) > 0);
    await second.client.close();
    await third.client.close();
  });

  test('--session-idle-timeout: an idle session ends and its child with it; the client then gets 404', async () => {
    const bridge = await bridgeOf(FIXTURE, ['--session-idle-timeout', '1s']);
    const { client } = await connectClient(bridge);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    const ended = await bridge.waitForLog((line) => line.msg === 'session ended' && line.pid === pid);
    assert.match(String(ended.reason), /idle for 1000 ms/);
    await eventually(() => !isRunning(pid), `the idle session's child ${pid} ends`);
    await assert.rejects(client.callTool({ name: 'pid', arguments: {} }), /404|Session not found/);
    await client.close().catch(() => undefined);
  });

  test('a request without a session that is not initialize (a 2026-07-28 stateless request) gets 400 with a legacy error, and a dual-era client falls back', async () => {
    const bridge = await bridgeOf(FIXTURE);
    const modern = await post(
      bridge,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientInfo': { name: 'm', version: '1' },
          },
        },
      },
      { 'mcp-protocol-version': '2026-07-28' },
    );
    assert.equal(modern.status, 400);
    assert.equal(modern.body.error!.code, -32000);
    assert.match(modern.body.error!.message, /Mcp-Session-Id header is required.*initialize/);

    const { client } = await connectClient(bridge, { versionNegotiation: { mode: 'auto' } });
    assert.ok((await client.listTools()).tools.some((tool) => tool.name === 'pid'));
    await client.close();
  });

  test('/healthz and /readyz; a command that does not exist is not ready, and initialize says why', async () => {
    const good = await bridgeOf(FIXTURE);
    assert.equal((await fetch(new URL('/healthz', good.url))).status, 200);
    assert.deepEqual(await (await fetch(new URL('/readyz', good.url))).json(), { status: 'ready' });

    const missing = await bridgeOf(['/nonexistent/mcp-server', '--stdio']);
    assert.equal((await fetch(new URL('/healthz', missing.url))).status, 200);
    const ready = await fetch(new URL('/readyz', missing.url));
    assert.equal(ready.status, 503);
    assert.match(((await ready.json()) as { reason: string }).reason, /\/nonexistent\/mcp-server.*not an executable file/);
    const refused = await post(missing, initialize(1));
    assert.equal(refused.status, 502);
    assert.match(refused.body.error!.message, /"\/nonexistent\/mcp-server" could not be started: .*ENOENT/);
  });

  test('SIGTERM ends the sessions, stops the children and exits 0', async () => {
    const bridge = await bridgeOf(FIXTURE);
    const { client } = await connectClient(bridge);
    const pid = Number(textOf(await client.callTool({ name: 'pid', arguments: {} })));
    assert.deepEqual(await bridge.stop(), { code: 0, signal: null });
    await bridge.waitForLog((line) => line.msg === 'session ended' && line.reason === 'the bridge is shutting down');
    await eventually(() => !isRunning(pid), `the child ${pid} ends with the bridge`);
    await client.close().catch(() => undefined);
  });

  test('bad flags: a usage error naming the flag, exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['serve', '--port', 'eighty', '--', 'x'], /--port "eighty" must be a whole number/],
      [['serve', '--bogus', '--', 'x'], /Unknown option '--bogus'/],
      [['serve', '--max-sessions', '0', '--', 'x'], /--max-sessions "0" must be a whole number from 1/],
      [['serve', '--session-idle-timeout', '10', '--', 'x'], /--session-idle-timeout "10" must be a positive duration/],
      [['serve', '--path', 'mcp', '--', 'x'], /--path "mcp" must be an absolute URL path/],
      [['serve', '--port', '8080'], /the stdio MCP server to run is missing: give it after --/],
      [['egress-proxy', '--allow', 'not a host'], /--allow "not a host"/],
      [['egress-proxy', '--allow', 'example.com:99999'], /--allow "example.com:99999": ports must be numbers from 1 to 65535/],
      [['launch'], /unknown command "launch"/],
      [[], /a command is required/],
    ];
    for (const [args, message] of cases) {
      const run = await runToExit(args);
      assert.equal(run.code, 2, `punk-bridge ${args.join(' ')} exits 2`);
      assert.match(run.stderr, message);
      assert.match(run.stderr, /Usage:/);
    }
  });
});
