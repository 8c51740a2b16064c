// Punk's own gateway connection code (@punk/gateway's Upstream: connect.ts, http-transport.ts) reaching a stdio
// server through the bridge, as it reaches a server pod in a cluster: an McpServer whose `url` is the bridge.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { pino } from 'pino';
import { Upstream, type UpstreamOptions } from '@punk/gateway';
import { API_VERSION, mcpServerSpecSchema, type McpServer } from '@punk/lib';
import { EVERYTHING, FIXTURE, runBridge, type BridgeProcess } from './harness.js';

const running: BridgeProcess[] = [];
after(async () => {
  for (const bridge of running) if (bridge.child.exitCode === null) await bridge.stop();
});

/** A gateway Upstream for the McpServer `name` whose url is the bridge's endpoint; started, first start awaited. */
async function upstreamThrough(
  bridge: BridgeProcess,
  name: string,
  options: Partial<UpstreamOptions> = {},
): Promise<{ upstream: Upstream; log: string[]; close(): Promise<void> }> {
  const log: string[] = [];
  const sink = new Writable({ write: (chunk, _encoding, done) => (log.push(String(chunk)), done()) });
  const workDir = await mkdtemp(join(tmpdir(), 'punk-bridge-gateway-'));
  const server: McpServer = {
    apiVersion: API_VERSION,
    kind: 'McpServer',
    metadata: { name, namespace: 'bridge-test' },
    spec: mcpServerSpecSchema.parse({ url: `${bridge.url}/mcp`, transport: 'streamable-http', timeout: '20s' }),
  };
  const upstream = new Upstream({
    server,
    log: pino({ level: 'debug' }, sink),
    workDir,
    startTimeoutMs: 15_000,
    callTimeoutMs: 15_000,
    onState: () => undefined,
    onListChanged: () => undefined,
    onResourceUpdated: () => undefined,
    ...options,
  });
  upstream.start();
  await upstream.firstStart;
  return {
    upstream,
    log,
    close: async () => {
      await upstream.stop();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}

test('the gateway connects to server-everything through the bridge over Streamable HTTP, lists and calls its tools', async () => {
  const bridge = await runBridge(EVERYTHING);
  running.push(bridge);
  const { upstream, close } = await upstreamThrough(bridge, 'everything');
  try {
    const catalog = upstream.catalog();
    assert.equal(catalog.state, 'ready', catalog.lastError);
    assert.equal(catalog.transport, 'streamable-http', 'no HTTP+SSE fallback: the bridge takes the Streamable HTTP handshake');
    assert.equal((catalog.serverInfo as { name?: string }).name, 'mcp-servers/everything');
    assert.ok(catalog.tools.some((tool) => tool.name === 'echo'));
    const outcome = await upstream.callTool('echo', { message: 'from the gateway' }, undefined);
    assert.ok(outcome.ok, JSON.stringify(outcome));
    assert.deepEqual(outcome.result.content, [{ type: 'text', text: 'Echo: from the gateway' }]);
    assert.equal(bridge.logs.filter((line) => line.msg === 'session started').length, 1);
  } finally {
    await close();
  }
  // Stopping the upstream ends its session (DELETE), and the bridge stops that child.
  await bridge.waitForLog((line) => line.msg === 'session ended');
});

test('after the bridge ends an idle session, the very next call starts a new session and is answered by a new child', async () => {
  const bridge = await runBridge(FIXTURE, ['--session-idle-timeout', '1s']);
  running.push(bridge);
  const { upstream, log, close } = await upstreamThrough(bridge, 'fixture', { initialBackoffMs: 50 });
  try {
    const pid = (outcome: Awaited<ReturnType<Upstream['callTool']>>) =>
      outcome.ok ? (outcome.result.content as { text: string }[])[0]!.text : undefined;
    const first = await upstream.callTool('pid', {}, undefined);
    assert.ok(first.ok, JSON.stringify(first));
    await bridge.waitForLog((line) => line.msg === 'session ended' && /idle/.test(String(line.reason)));
    // The bridge answers the ended session's request 404; the gateway starts a new session at once and sends the
    // call again (MCP 2025-11-25 basic/transports, session management), so the caller never sees the loss.
    const second = await upstream.callTool('pid', {}, undefined);
    assert.ok(second.ok, JSON.stringify(second));
    assert.notEqual(pid(second), pid(first));
    assert.equal(bridge.logs.filter((line) => line.msg === 'session started').length, 2);
    assert.ok(log.some((line) => /ended its session \(HTTP 404\); starting a new session and retrying once/.test(line)));
    assert.equal(upstream.catalog().state, 'ready');
  } finally {
    await close();
  }
});
