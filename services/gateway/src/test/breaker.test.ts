/**
 * The circuit breaker of a pooled upstream on real servers: consecutive transport errors, call timeouts and
 * failed starts open it, calls then fail fast saying when it probes again, the probe (a reconnect after the
 * backoff) closes it once the server is back; errors the server answers itself never open it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PunkError } from '@punk/lib';
import { BREAKER_FAILURE_THRESHOLD } from '../upstream.js';
import { destinationPolicyOf } from '../index.js';
import { fixture, freePort, manifest, startHarness, waitFor } from './harness.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { startUpstream } from './upstream-harness.js';

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };

const counter = (tenant: string, timeout: string) =>
  manifest(tenant, 'counter', { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')], timeout });

test('a server that goes down opens the circuit after repeated failures, calls fail fast, and the probe brings it back', async (t) => {
  let server = await startProtectedMcpServer();
  const port = server.port;
  t.after(() => server.close());
  const under = await startUpstream(manifest('t-breaker', 'remote', { url: server.url }), { initialBackoffMs: 100 });
  t.after(() => under.close());
  const upstream = under.upstream;
  assert.equal(upstream.catalog().circuit, 'closed');
  assert.ok((await upstream.callTool('echo', { text: 'up' }, undefined)).ok);

  await server.close();
  for (let i = 1; i <= BREAKER_FAILURE_THRESHOLD; i++) {
    const outcome = await upstream.callTool('echo', { text: `down ${i}` }, undefined);
    assert.equal(outcome.ok, false);
    assert.equal(!outcome.ok && outcome.kind, 'unavailable');
  }
  assert.equal(upstream.state === 'failed' || upstream.state === 'starting', true, upstream.state);
  assert.notEqual(upstream.catalog().circuit, 'closed');
  await assert.rejects(upstream.callTool('echo', { text: 'while open' }, undefined), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'ServerUnavailable');
    assert.match(error.message, /circuit open after \d+ consecutive failures, next probe at \d{4}-\d\d-\d\dT[\d:.]+Z; last failure: /);
    return true;
  });
  assert.ok(!upstream.accepting);

  // The server comes back on its address: a probe reconnects and closes the circuit.
  server = await startProtectedMcpServer({ port });
  await waitFor(() => upstream.state === 'ready', 15_000, 'the probe reconnecting');
  assert.equal(upstream.catalog().circuit, 'closed');
  const back = await upstream.callTool('echo', { text: 'back' }, undefined);
  assert.ok(back.ok);
  assert.equal((back.result as ToolResult).content[0]!.text, 'back');
  assert.ok(under.lines.some((line) => line.includes('circuit open: probing the server after backoff')));
});

test('call timeouts open the circuit; errors the server answers do not', async (t) => {
  const under = await startUpstream(counter('t-timeouts', '150ms'), { initialBackoffMs: 100 });
  t.after(() => under.close());
  const upstream = under.upstream;
  for (let i = 0; i < BREAKER_FAILURE_THRESHOLD + 2; i++) {
    const failed = await upstream.callTool('reject', {}, undefined);
    assert.ok(failed.ok && failed.result.isError === true, 'a tool error');
    await assert.rejects(upstream.readResource('counter://nope', undefined), { code: 'UpstreamError' });
  }
  assert.equal(upstream.catalog().circuit, 'closed', 'tool errors and JSON-RPC errors are answers: the server is up');

  for (let i = 0; i < BREAKER_FAILURE_THRESHOLD; i++) {
    const outcome = await upstream.callTool('sleep', { ms: 2_000 }, undefined);
    assert.equal(!outcome.ok && outcome.kind, 'timeout');
  }
  assert.notEqual(upstream.catalog().circuit, 'closed');
  assert.match(
    upstream.error!,
    /circuit open after 3 consecutive failures.*calls failed 3 times in a row \(last: server t-timeouts\/counter did not answer within 150 ms/,
  );
  await waitFor(() => upstream.state === 'ready', 15_000, 'the probe');
  assert.equal(upstream.catalog().circuit, 'closed');
  assert.ok((await upstream.callTool('count', {}, undefined)).ok);
});

test('a server that keeps failing to start has its circuit open, and the gateway answers calls at once saying so', async (t) => {
  const h = await startHarness(
    (tenant) => [manifest(tenant, 'exits', { image: 'x:1', command: [process.execPath, fixture('exit-at-start.mjs')] })],
    {
      upstream: { initialBackoffMs: 50 },
    },
  );
  t.after(() => h.close());
  await waitFor(() => h.gateway.catalog(h.tenant)[0]!.circuit === 'open', 15_000, 'the circuit opening');
  const entry = h.gateway.catalog(h.tenant)[0]!;
  assert.equal(entry.state, 'failed');
  assert.match(entry.lastError!, /circuit open after \d+ consecutive failures, next probe at .*; last failure: .*exited with code 2/);
  const result = (await h.call({ method: 'tools/call', server: 'exits', name: 'anything' })) as ToolResult;
  assert.equal(result.isError, true);
  assert.match(result.content[0]!.text, /exits is unavailable .*circuit open/);
});

test('a destination the SSRF guard refuses fails for good: no retry, one record on the ledger', async (t) => {
  const h = await startHarness((tenant) => [manifest(tenant, 'metadata', { url: 'http://169.254.169.254/mcp' })], {
    upstream: { initialBackoffMs: 50 },
    egress: destinationPolicyOf({ authMode: 'on', upstreamAllowedNetworks: [] }),
  });
  t.after(() => h.close());
  await h.gateway.ready();
  const entry = h.gateway.catalog(h.tenant)[0]!;
  assert.equal(entry.state, 'failed');
  assert.match(entry.lastError!, /169\.254\.169\.254.*(metadata|link-local)/);
  await new Promise((resolve) => setTimeout(resolve, 500));
  const failures = h.events.filter((e) => e.type === 'server.state_changed' && e.server === 'metadata' && e.data.state === 'failed');
  assert.equal(failures.length, 1, 'refused once, not retried');
  assert.equal(h.gateway.catalog(h.tenant)[0]!.state, 'failed');
});

test('a server that keeps failing for one reason is recorded once, not at every probe', async (t) => {
  const port = await freePort();
  const h = await startHarness((tenant) => [manifest(tenant, 'gone', { url: `http://127.0.0.1:${port}/mcp` })], {
    upstream: { initialBackoffMs: 20 },
  });
  t.after(() => h.close());
  await h.gateway.ready();
  // Retries at 20, 40, 80, 160, 320 ms …: several probes happen within a second.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const states = h.events.filter((e) => e.type === 'server.state_changed' && e.server === 'gone').map((e) => e.data.state);
  assert.deepEqual(states, ['starting', 'failed']);
  assert.equal(h.changes.filter((c) => c.server === 'gone' && c.change === 'state').length, 2);
});
