/**
 * The connection bounds of a service listener (`listenHealth`) against a few hundred raw TCP sockets: one address
 * holding its share is refused at once while another address still gets answered; the total bound holds for every
 * address; a freed share lets the first address in again; a connection that never sends a byte is closed after the
 * idle timeout, while one that started a request head is left to `headersTimeout` (408). Every refusal is counted.
 */
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { httpConnectionsRejected, listenHealth, type HealthServer } from '../index.js';

/** A raw TCP connection from `localAddress` to the listener; resolves once connected. */
function open(url: string, localAddress: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Resolves once `socket` is closed (by either side). */
const closed = (socket: Socket) => new Promise<void>((resolve) => (socket.closed ? resolve() : socket.once('close', () => resolve())));

/** GET /healthz from `localAddress`: the status, or the error that ended it. */
function health(url: string, localAddress: string): Promise<number | string> {
  return new Promise((resolve) => {
    const request = get(`${url}/healthz`, { localAddress, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    request.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

/** Polls `condition` every 50 ms for up to 30 s. */
async function waitFor(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 50) {
    if (waited > 30_000) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function rejected(reason: string): Promise<number> {
  return (
    (await httpConnectionsRejected.get()).values.find((v) => v.labels.listener === 'service' && v.labels.reason === reason)?.value ?? 0
  );
}

async function listen(t: { after: (fn: () => Promise<void>) => void }, connections: Parameters<typeof listenHealth>[4]) {
  const server: HealthServer = await listenHealth('127.0.0.1', 0, async () => undefined, undefined, connections);
  t.after(() => server.close());
  return server;
}

test('one address at its share is refused at once while another address gets in; the total bound holds; a freed share lets it in again', async (t) => {
  const server = await listen(t, { connections: { maxConnections: 120, maxConnectionsPerAddress: 50, idleTimeoutMs: 600_000 } });
  const before = { perAddress: await rejected('max_connections_per_address'), total: await rejected('max_connections') };
  const sockets: Socket[] = [];
  t.after(() => sockets.forEach((s) => s.destroy()));

  // 80 sockets from 127.0.0.1: its share is 50, the other 30 are closed at once by the listener.
  const first = await Promise.all(Array.from({ length: 80 }, () => open(server.url, '127.0.0.1')));
  sockets.push(...first);
  let closedCount = 0;
  for (const socket of first) void closed(socket).then(() => closedCount++);
  await waitFor(() => closedCount >= 30, 'the connections past the share closed');
  assert.equal((await rejected('max_connections_per_address')) - before.perAddress, 30);
  assert.equal(typeof (await health(server.url, '127.0.0.1')), 'string', 'the holder gets no further connection');
  assert.equal(await health(server.url, '127.0.0.2'), 200, 'another address is answered');
  assert.equal(closedCount, 30, 'the 50 of the share stay open');

  // Up to the total of 120: 50 from 127.0.0.2, 20 from 127.0.0.3; then even a new address is refused.
  sockets.push(...(await Promise.all(Array.from({ length: 50 }, () => open(server.url, '127.0.0.2')))));
  sockets.push(...(await Promise.all(Array.from({ length: 20 }, () => open(server.url, '127.0.0.3')))));
  let status: number | string = 200;
  for (let attempt = 0; attempt < 50 && status === 200; attempt++) status = await health(server.url, '127.0.0.4');
  assert.equal(typeof status, 'string', 'at the total bound a new address is refused too');
  assert.ok((await rejected('max_connections')) > before.total, 'the total bound is counted');

  // The holder closes its connections: 127.0.0.1 gets in again.
  await Promise.all(first.map((socket) => (socket.destroy(), closed(socket))));
  let again: number | string = 'refused';
  for (let attempt = 0; attempt < 50 && again !== 200; attempt++) again = await health(server.url, '127.0.0.1');
  assert.equal(again, 200);
});

test('a connection that sends nothing is closed after the idle timeout; one that began a request head gets 408 at headersTimeout', async (t) => {
  const server = await listen(t, {
    headersTimeoutMs: 3000,
    connections: { maxConnections: 1000, maxConnectionsPerAddress: 1000, idleTimeoutMs: 1000 },
  });
  const before = await rejected('idle');
  const silent = await Promise.all(Array.from({ length: 200 }, () => open(server.url, '127.0.0.1')));
  const slow = await open(server.url, '127.0.0.1');
  let answer = '';
  slow.on('data', (chunk: Buffer) => (answer += chunk.toString()));
  slow.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
  await Promise.all(silent.map(closed));
  assert.equal((await rejected('idle')) - before, 200, 'every silent connection is counted');
  await closed(slow);
  assert.match(answer, /^HTTP\/1\.1 408 /, 'the slow request head was cut by headersTimeout, not by the idle timeout');
});
