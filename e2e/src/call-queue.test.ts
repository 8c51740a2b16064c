/**
 * Load past the upstream bound through the real `punk up`, with SDK clients of both eras: with 4 calls in flight
 * allowed per server and 60 queued, 64 concurrent sessions calling a slow tool all complete without an error (the
 * queue absorbs them, `punk_gateway_upstream_queue_wait_seconds` counts every call, nothing is refused); past the
 * queue's depth the next call is refused at once with JSON-RPC -32000 whose `data.retryAfterSeconds` says when to
 * retry, counted in `punk_gateway_upstream_queue_rejections_total`, and the queued calls still complete.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/client';
import { connectClient, textOf } from './clients.js';
import { punkOnTally, type TallySetup } from './distributed.js';
import { eventually, type RunningPunk } from './harness.js';
import { scrape, valueOf } from './prometheus-text.js';

let setup: TallySetup;
let punk: RunningPunk;
let stop: (() => Promise<void>) | undefined;

before(async () => {
  ({ setup, punk, stop } = await punkOnTally({
    PUNK_UPSTREAM_MAX_CONCURRENT_CALLS: '4',
    PUNK_UPSTREAM_MAX_QUEUED_CALLS: '60',
    PUNK_UPSTREAM_QUEUE_TIMEOUT_MS: '120000',
    PUNK_INITIALIZE_RATE_LIMIT: '1000',
  }));
});

after(async () => {
  await stop?.();
});

const server = () => `${setup.tenant}/tally`;

test('64 concurrent sessions past a bound of 4 calls in flight all complete, queued, without an error', async () => {
  const before = await scrape(punk.baseUrl);
  const clients = await Promise.all(
    Array.from({ length: 64 }, (_, i) => connectClient(`${punk.baseUrl}/mcp`, i % 2 === 0 ? '2025-11-25' : '2026-07-28')),
  );
  try {
    const results = await Promise.all(
      clients.map((client, i) => client.callTool({ name: 'tally__read_slowly', arguments: { ms: 100 + (i % 4) * 50 } })),
    );
    for (const result of results) {
      assert.notEqual(result.isError, true, textOf(result));
      assert.match(textOf(result), /read_slowly took \d+ ms/);
    }
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
  const now = await scrape(punk.baseUrl);
  const waits =
    valueOf(now, 'punk_gateway_upstream_queue_wait_seconds_count', { server: server() }) -
    valueOf(before, 'punk_gateway_upstream_queue_wait_seconds_count', { server: server() });
  assert.ok(waits >= 60 - 4, `the calls past the bound waited in the queue (${waits} waited)`);
  for (const reason of ['full', 'timeout'])
    assert.equal(valueOf(now, 'punk_gateway_upstream_queue_rejections_total', { server: server(), reason }), 0, reason);
});

test('past the queue depth a call is refused at once with -32000 and a retry hint; the queued calls still complete', async () => {
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28');
  try {
    // 4 slow calls hold the slots while 60 more fill the queue; on a loaded machine the 60 take seconds to arrive,
    // so the slots are held well past that.
    const held = Array.from({ length: 4 }, () => client.callTool({ name: 'tally__read_slowly', arguments: { ms: 15_000 } }));
    const queued = Array.from({ length: 60 }, () => client.callTool({ name: 'tally__count', arguments: {} }));
    const full = await eventually(async () => {
      const depth = valueOf(await scrape(punk.baseUrl), 'punk_gateway_upstream_queue_depth', { server: server() });
      return depth === 60 ? depth : undefined;
    }, 60_000);
    assert.equal(full, 60, 'the queue is full');

    await assert.rejects(client.callTool({ name: 'tally__count', arguments: {} }), (error: unknown) => {
      assert.ok(error instanceof ProtocolError, String(error));
      assert.equal(error.code, -32000);
      assert.match(
        error.message,
        /is busy on this gateway replica: 4 calls are in flight .* 60 wait \(PUNK_UPSTREAM_MAX_QUEUED_CALLS=60\); retry in 120 s/,
      );
      assert.equal((error.data as { retryAfterSeconds?: number }).retryAfterSeconds, 120);
      return true;
    });
    for (const result of await Promise.all([...held, ...queued])) assert.notEqual(result.isError, true, textOf(result));
    const after = await scrape(punk.baseUrl);
    assert.equal(valueOf(after, 'punk_gateway_upstream_queue_rejections_total', { server: server(), reason: 'full' }), 1);
    assert.equal(valueOf(after, 'punk_gateway_upstream_queue_depth', { server: server() }), 0);
  } finally {
    await client.close();
  }
});
