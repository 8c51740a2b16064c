/**
 * The `punk cluster` proxy in front of real HTTP backends: the ledger paths reach the ledgers, or with
 * `ledgerApi: 'fronts'` (authentication on) the fronts like every other path; an event stream's head is passed on at
 * once; a slow request head is cut at the services' bound; a reused
 * backend connection reset before any answer does not surface as a 502 for an idempotent request.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { createLogger } from '@punk/lib';
import { startProxy } from '../proxy.js';

/** An HTTP server on a free loopback port answering every request with `name`; `url` is its base URL. */
async function backend(name: string): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => res.end(name));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}` };
}

test('the ledger paths reach a ledger, or with ledgerApi fronts a front; other paths reach a front', async (t) => {
  const ledger = await backend('ledger');
  const front = await backend('front');
  const start = (ledgerApi: 'ledgers' | 'fronts') =>
    startProxy({
      host: '127.0.0.1',
      port: 0,
      backends: { ledgers: [ledger.url], fronts: [front.url] },
      log: createLogger('proxy-test', 'silent'),
      ledgerApi,
    });
  const proxies = [await start('ledgers'), await start('fronts')];
  t.after(async () => {
    for (const proxy of proxies) await proxy.close();
    for (const { server } of [ledger, front]) {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  });
  for (const path of ['/api/v1/ledger/verify', '/api/v1/runs', '/api/v1/runs/some-run']) {
    assert.equal(await (await fetch(`${proxies[0]!.url}${path}`)).text(), 'ledger', path);
    assert.equal(await (await fetch(`${proxies[1]!.url}${path}`)).text(), 'front', path);
  }
  for (const proxy of proxies) assert.equal(await (await fetch(`${proxy.url}/mcp`)).text(), 'front');
});

test("an event stream's head reaches the client before its first event; the event follows when the backend sends it", async (t) => {
  let sendEvent: (() => void) | undefined;
  const backendServer = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    sendEvent = () => res.end('data: {"ok":true}\n\n');
  });
  await new Promise<void>((resolve) => backendServer.listen(0, '127.0.0.1', resolve));
  const proxy = await startProxy({
    host: '127.0.0.1',
    port: 0,
    backends: { ledgers: [], fronts: [`http://127.0.0.1:${String((backendServer.address() as AddressInfo).port)}`] },
    log: createLogger('proxy-test', 'silent'),
  });
  t.after(async () => {
    await proxy.close();
    backendServer.closeAllConnections();
    await new Promise((done) => backendServer.close(done));
  });
  // fetch resolves on the response head, which must arrive while the backend holds its event back.
  const response = await fetch(`${proxy.url}/mcp`, { method: 'POST', body: '{}' });
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  assert.ok(sendEvent, 'the backend got the request');
  sendEvent();
  assert.equal(await response.text(), 'data: {"ok":true}\n\n');
});

test(
  'a client that sends its request head too slowly is cut with 408 at the services’ headersTimeout, not held',
  { timeout: 30_000 },
  async (t) => {
    const front = await backend('front');
    const proxy = await startProxy({
      host: '127.0.0.1',
      port: 0,
      backends: { ledgers: [], fronts: [front.url] },
      log: createLogger('proxy-test', 'silent'),
      headersTimeoutMs: 1000,
      requestTimeoutMs: 5000,
    });
    t.after(async () => {
      await proxy.close();
      front.server.closeAllConnections();
      await new Promise((done) => front.server.close(done));
    });
    const { port } = new URL(proxy.url);
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.write('POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    await new Promise((resolve) => socket.once('close', resolve));
    assert.match(answer, /^HTTP\/1\.1 408 /);
  },
);

test('a reused backend connection reset before any answer: an idempotent request is sent again on a new one, a POST is never sent twice', async (t) => {
  // The backend closes a kept-alive connection as the next request arrives on it, as one does at its keep-alive timeout.
  const connections = new Set<Socket>();
  const served = new Map<Socket, number>();
  const received: string[] = [];
  const server = createServer((req, res) => {
    received.push(`${req.method} ${req.url}`);
    const count = (served.get(req.socket) ?? 0) + 1;
    served.set(req.socket, count);
    if (count > 1) {
      req.socket.resetAndDestroy();
      return;
    }
    res.end(`answered ${req.method}`);
  });
  server.on('connection', (socket: Socket) => connections.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
  const proxy = await startProxy({
    host: '127.0.0.1',
    port: 0,
    backends: { ledgers: [], fronts: [url] },
    log: createLogger('proxy-test', 'silent'),
  });
  t.after(async () => {
    await proxy.close();
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });

  const first = await fetch(`${proxy.url}/mcp`);
  assert.equal(await first.text(), 'answered GET');
  const second = await fetch(`${proxy.url}/mcp`);
  assert.equal(second.status, 200, 'the reset of the reused connection did not surface as a 502');
  assert.equal(await second.text(), 'answered GET');
  assert.equal(connections.size, 2, 'the second GET was sent again on a new connection');

  // A POST on a reused connection that is reset: the backend may have run it, so it is not sent again.
  const post = await fetch(`${proxy.url}/mcp`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  assert.equal(await post.text(), 'answered POST', 'the POST went on the new, unused connection');
  const again = await fetch(`${proxy.url}/mcp`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  assert.equal(again.status, 502);
  assert.equal(received.filter((r) => r === 'POST /mcp').length, 2, 'each POST reached the backend once');
});
