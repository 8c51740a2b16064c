/**
 * The real `punk up` under a flood of idle TCP connections, with low configured bounds: 300 raw sockets from one
 * address keep only their share (the rest are closed at once and counted), another address is still answered,
 * the total bound holds, and once the holders close an MCP client from the first address works again.
 */
import assert from 'node:assert/strict';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { connectClient, listAllTools } from './clients.js';
import { punkOnTally } from './distributed.js';
import { eventually, type RunningPunk } from './harness.js';
import { scrape, valueOf } from './prometheus-text.js';

let punk: RunningPunk;
let stop: (() => Promise<void>) | undefined;

before(async () => {
  ({ punk, stop } = await punkOnTally({
    PUNK_MAX_CONNECTIONS: '250',
    PUNK_MAX_CONNECTIONS_PER_ADDRESS: '100',
    PUNK_CONNECTION_IDLE_TIMEOUT_MS: '600000',
  }));
});

after(async () => {
  await stop?.();
});

function open(localAddress: string): Promise<Socket> {
  const { hostname, port } = new URL(punk.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** GET /healthz from `localAddress`: the status, or the error code that ended it. */
function health(localAddress: string): Promise<number | string> {
  return new Promise((resolve) => {
    const request = get(`${punk.baseUrl}/healthz`, { localAddress, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    request.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });
}

test('300 idle sockets from one address keep only its share; another address gets in; after the holders close, a client does again', async () => {
  const holders = await Promise.all(Array.from({ length: 300 }, () => open('127.0.0.1')));
  let closed = 0;
  for (const socket of holders) socket.once('close', () => closed++);
  try {
    assert.ok(await eventually(async () => (closed >= 200 ? true : undefined), 30_000), `200 sockets closed (${closed})`);
    assert.equal(closed, 200, 'the share of 100 stays open');
    assert.equal(await health('127.0.0.2'), 200, 'another address is answered');

    // 100 from 127.0.0.2 and 49 from 127.0.0.3 reach the total of 250 with the one above; then a new address is refused too.
    const others = await Promise.all([
      ...Array.from({ length: 100 }, () => open('127.0.0.2')),
      ...Array.from({ length: 50 }, () => open('127.0.0.3')),
    ]);
    try {
      const refused = await eventually(async () => {
        const status = await health('127.0.0.4');
        return typeof status === 'string' ? status : undefined;
      }, 30_000);
      assert.ok(refused, 'at the total bound a new address is refused');
    } finally {
      others.forEach((socket) => socket.destroy());
    }
  } finally {
    holders.forEach((socket) => socket.destroy());
  }
  // The holder's own scrape gets in again too.
  const metrics = await eventually(() => scrape(punk.baseUrl).catch(() => undefined), 30_000);
  assert.ok(metrics);
  assert.ok(
    valueOf(metrics, 'punk_http_connections_rejected_total', { listener: 'service', reason: 'max_connections_per_address' }) >= 200,
  );
  assert.ok(valueOf(metrics, 'punk_http_connections_rejected_total', { listener: 'service', reason: 'max_connections' }) >= 1);
  const client = await eventually(() => connectClient(`${punk.baseUrl}/mcp`, '2025-11-25').catch(() => undefined), 30_000);
  assert.ok(client, 'an MCP client from the first address connects again');
  try {
    assert.ok((await listAllTools(client)).some((tool) => tool.name === 'tally__count'));
  } finally {
    await client.close();
  }
});
