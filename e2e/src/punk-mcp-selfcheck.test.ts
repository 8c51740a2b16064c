/**
 * `punk mcp --selfcheck` against deployments that accept the connection and never answer: every request it makes has
 * a deadline of 5 s, so it fails within seconds (not the SDK's 60 s) and each failure names the request that timed out.
 */
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { punkCli } from './punk-mcp-client.js';

/** Listens on a free loopback port; answers `http://127.0.0.1:<port>`. */
async function listen(server: TcpServer | HttpServer): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
}

describe('punk mcp --selfcheck against a deployment that never answers', () => {
  const sockets = new Set<Socket>();
  const servers: Array<TcpServer | HttpServer> = [];

  after(async () => {
    for (const socket of sockets) socket.destroy();
    for (const server of servers) await new Promise((resolve) => server.close(resolve));
  });

  test(
    'a TCP server that accepts and never answers: the selfcheck fails within seconds naming initialize',
    { timeout: 60_000 },
    async () => {
      const silent = createTcpServer((socket) => {
        sockets.add(socket);
        socket.on('error', () => undefined);
      });
      servers.push(silent);
      const url = await listen(silent);
      const started = Date.now();
      const result = await punkCli(url, 'pk_any', ['mcp', '--selfcheck']);
      const seconds = (Date.now() - started) / 1000;
      assert.equal(result.code, 1, result.stdout + result.stderr);
      // The SDK's own deadline is 60 s; the selfcheck's 5 s plus the CLI's start (seconds on a loaded machine).
      assert.ok(seconds < 25, `the selfcheck took ${seconds.toFixed(1)} s`);
      assert.match(result.stdout, /^FAIL the deployment did not answer in time: POST \/mcp initialize: no answer within 5 s/m);
    },
  );

  test('an /mcp that answers and an API that never does: each tool fails naming its request', { timeout: 120_000 }, async () => {
    const mcp = toNodeHandler(createMcpHandler(() => new McpServer({ name: 'half-deployment', version: '1.0.0' })));
    const half = createHttpServer((req, res) => {
      sockets.add(req.socket);
      if (req.url?.startsWith('/mcp')) void mcp(req, res);
      // /api/v1 accepts the request and never answers.
    });
    servers.push(half);
    const url = await listen(half);
    const started = Date.now();
    const result = await punkCli(url, 'pk_any', ['mcp', '--selfcheck']);
    const seconds = (Date.now() - started) / 1000;
    assert.equal(result.code, 1, result.stdout + result.stderr);
    // Seven tools ask the API, one request each at 5 s (punk_explain_run and punk_test_server fail first, wanting the answers).
    assert.ok(seconds < 60, `the selfcheck took ${seconds.toFixed(1)} s`);
    assert.match(result.stdout, /^FAIL punk_list_servers: GET \/api\/v1\/mcp\/servers: no answer within 5 s/m);
    assert.match(result.stdout, /^FAIL punk_list_runs: GET \/api\/v1\/runs\?limit=5: no answer within 5 s/m);
    assert.match(result.stdout, /^FAIL punk_verify_ledger: GET \/api\/v1\/ledger\/verify: no answer within 5 s/m);
    assert.match(result.stdout, /^ok +punk_search_tools: /m, 'the /mcp part answered');
  });
});
