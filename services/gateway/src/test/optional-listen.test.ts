/**
 * The `subscriptions/listen` stream of a 2026-07-28 upstream is optional (MCP 2026-07-28
 * basic/utilities/subscriptions): an upstream that answers it with something other than an event stream
 * is ready as soon as its handshake and listings are, its tools are served and called, and only its change
 * notifications are lost (a warning names the server).
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { manifest } from './harness.js';
import { startUpstream } from './upstream-harness.js';

async function readJson(req: IncomingMessage): Promise<{ method?: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as { method?: string };
}

/** An SDK v2 server (createMcpHandler, defaults) whose `subscriptions/listen` POSTs are answered `202 Accepted` with no body. */
async function serverWithoutListenStream(): Promise<{ url: string; listens: () => number; close: () => Promise<void> }> {
  const handler = toNodeHandler(
    createMcpHandler(() => {
      const server = new McpServer({ name: 'no-listen', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
      server.registerTool('hello', { description: 'Says hello' }, () => ({ content: [{ type: 'text', text: 'hello' }] }));
      return server;
    }),
  );
  let listens = 0;
  const http = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'POST') return handler(req, res);
      const body = await readJson(req);
      if (body.method === 'subscriptions/listen') {
        listens++;
        res.writeHead(202).end();
        return;
      }
      return handler(req, res, body);
    })();
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}/mcp`,
    listens: () => listens,
    close: async () => {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

void test('an upstream whose subscriptions/listen is not an event stream is ready, and serves its tools', async (t) => {
  const server = await serverWithoutListenStream();
  t.after(() => server.close());
  const started = Date.now();
  const under = await startUpstream(manifest('t-listen', 'no-listen', { url: server.url }), { startTimeoutMs: 3_000 });
  t.after(() => under.close());
  const upstream = under.upstream;
  assert.equal(upstream.state, 'ready', upstream.error);
  const readyMs = Date.now() - started;
  assert.ok(readyMs < 2_500, `ready after ${String(readyMs)} ms: the handshake must not wait for the listen stream`);
  assert.equal(upstream.catalog().protocolVersion, '2026-07-28');
  assert.deepEqual(
    upstream.catalog().tools.map((tool) => tool.name),
    ['hello'],
  );
  const outcome = await upstream.callTool('hello', {}, undefined);
  assert.ok(outcome.ok);
  assert.deepEqual(outcome.result['content'], [{ type: 'text', text: 'hello' }]);
  assert.equal(server.listens(), 1, 'the listen stream was asked for');

  // Past the listen's acknowledgement bound: still ready, and the lost change notifications are logged.
  await new Promise((resolve) => setTimeout(resolve, 3_500));
  assert.equal(upstream.state, 'ready', upstream.error);
  assert.deepEqual(under.states, ['starting', 'ready']);
  assert.ok(
    under.lines.some((line) => line.includes('server t-listen/no-listen sends no change notifications')),
    'the degraded change notifications are logged',
  );
  assert.ok((await upstream.callTool('hello', {}, undefined)).ok);
});
