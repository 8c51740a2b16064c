/**
 * The pool entry of each (tenant, server) on real servers: the idle connection closed and reopened by the next
 * call while the catalog keeps serving the last listings, the bound on calls in flight and its queue, the review of every
 * tools listing, and the eviction of pooled connections (shared and per-client) when a registration changes.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { PunkError, type CatalogReply } from '@punk/lib';
import { descendantPids, fixture, manifest, startHarness, waitFor } from './harness.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { startUpstream } from './upstream-harness.js';
import { queueDepth, queueRejections } from '../metrics.js';

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };

const counter = (tenant: string, name = 'counter', extra: Record<string, unknown> = {}) =>
  manifest(tenant, name, { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')], ...extra });
const pidOf = (result: unknown) => Number(/pid=(\d+)/.exec((result as ToolResult).content[0]!.text)![1]);

test('an idle connection is closed, the catalog keeps its tools, and the next call reconnects transparently', async (t) => {
  const h = await startHarness((tenant) => [counter(tenant)], { upstream: { idleTimeoutMs: 300 } });
  t.after(() => h.close());
  await h.gateway.ready();
  const first = await h.call({ method: 'tools/call', server: 'counter', name: 'count' });
  const firstPid = pidOf(first);

  await waitFor(() => h.gateway.catalog(h.tenant)[0]!.state === 'idle', 10_000, 'idle close');
  await waitFor(async () => !(await descendantPids()).includes(firstPid), 10_000, 'the idle server process stopped');
  // What fronts list comes from the catalog: the idle server's tools are still there.
  const listed = (await h.call({ method: 'catalog/list' })) as CatalogReply;
  const entry = listed.servers.find((s) => s.name === 'counter')!;
  assert.equal(entry.state, 'idle');
  assert.equal(entry.lastError, undefined);
  assert.ok(entry.tools.some((tool) => tool.name === 'count'));

  const again = await h.call({ method: 'tools/call', server: 'counter', name: 'count' });
  assert.match((again as ToolResult).content[0]!.text, /calls=1 /, 'a new process answered');
  assert.notEqual(pidOf(again), firstPid);
  assert.equal(h.gateway.catalog(h.tenant)[0]!.state, 'ready');
  // The idle close and the reconnect change nothing clients see: no broadcast (no list_changed storm), no ledger entry.
  const states = h.changes.filter((c) => c.server === 'counter' && c.change === 'state').map((c) => c.state);
  assert.deepEqual(states, ['starting', 'ready']);
  assert.ok(!h.events.some((e) => e.type === 'server.state_changed' && e.data.state === 'idle'));
});

test('calls beyond maxConcurrentCalls wait in the queue; past its depth they are refused with ServerBusy and a retry hint', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const h = await startHarness((tenant) => [manifest(tenant, 'slow', { url: server.url })], {
    upstream: { maxConcurrentCalls: 2, maxQueuedCalls: 1, queueTimeoutMs: 120_000 },
  });
  t.after(() => h.close());
  await h.gateway.ready();
  const held = [
    h.call({ method: 'tools/call', server: 'slow', name: 'wait' }),
    h.call({ method: 'tools/call', server: 'slow', name: 'wait' }),
  ];
  await waitFor(() => server.waiting === 2, 10_000, 'two calls held by the server');
  const queued = h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: 'queued' } });
  const depth = async () => (await queueDepth.get()).values.find((v) => v.labels.server === `${h.tenant}/slow`)?.value;
  await waitFor(async () => (await depth()) === 1, 10_000, 'the third call queued (punk_gateway_upstream_queue_depth)');

  await assert.rejects(
    h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: 'one more' } }),
    (error: unknown) => {
      assert.ok(error instanceof PunkError);
      assert.equal(error.code, 'ServerBusy');
      assert.match(
        error.message,
        new RegExp(
          `server ${h.tenant}/slow is busy on this gateway replica: 2 calls are in flight \\(PUNK_UPSTREAM_MAX_CONCURRENT_CALLS=2\\) and 1 wait \\(PUNK_UPSTREAM_MAX_QUEUED_CALLS=1\\); retry in 120 s`,
        ),
      );
      assert.equal(error.details?.['retryAfterSeconds'], 120);
      return true;
    },
  );
  assert.equal(server.waiting, 2, 'neither the queued nor the refused call reached the server');
  await waitFor(
    () => h.events.some((e) => e.type === 'tool.completed' && e.data.name === 'echo' && /is busy/.test(String(e.data.error))),
    5_000,
    'the refusal on the ledger',
  );

  const full = (await queueRejections.get()).values.find((v) => v.labels.server === `${h.tenant}/slow` && v.labels.reason === 'full');
  assert.equal(full?.value, 1, 'the refusal is counted in punk_gateway_upstream_queue_rejections_total');

  server.release();
  for (const result of await Promise.all(held)) assert.equal((result as ToolResult).content[0]!.text, 'released');
  assert.equal(((await queued) as ToolResult).content[0]!.text, 'queued', 'the queued call ran once a slot was free');
  assert.equal(await depth(), 0);
  const after = (await h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: 'room again' } })) as ToolResult;
  assert.equal(after.content[0]!.text, 'room again');
});

test('a queued call that waits longer than queueTimeoutMs is refused with ServerBusy, and a cancelled one leaves the queue', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const under = await startUpstream(manifest('t-queue', 'slow', { url: server.url }), {
    maxConcurrentCalls: 1,
    maxQueuedCalls: 4,
    queueTimeoutMs: 200,
  });
  t.after(() => under.close());
  const { upstream } = under;
  const held = upstream.callTool('wait', {}, undefined);
  await waitFor(() => server.waiting === 1, 10_000, 'one call held by the server');
  await assert.rejects(upstream.callTool('echo', { text: 'late' }, undefined), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'ServerBusy');
    assert.match(error.message, /waited 200 ms \(PUNK_UPSTREAM_QUEUE_TIMEOUT_MS\) behind 1 calls in flight/);
    assert.equal(error.details?.['retryAfterSeconds'], 1);
    return true;
  });
  const abort = new AbortController();
  const cancelled = upstream.callTool('echo', { text: 'gone' }, undefined, undefined, abort.signal);
  await waitFor(() => upstream.callsQueued === 1, 10_000, 'the call queued');
  abort.abort();
  const outcome = await cancelled;
  assert.equal(outcome.ok, false);
  assert.equal(!outcome.ok && outcome.kind, 'cancelled');
  assert.equal(upstream.callsQueued, 0);
  server.release();
  const released = await held;
  assert.ok(released.ok);
  assert.equal(upstream.callsInFlight, 0, 'every slot was given back');
  assert.equal(server.waiting, 0);
});

test('one principal holds at most its share of the queue: another principal and the anonymous caller still wait their turn', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const h = await startHarness((tenant) => [manifest(tenant, 'slow', { url: server.url })], {
    upstream: { maxConcurrentCalls: 1, maxQueuedCalls: 10, queueTimeoutMs: 120_000, maxCallsPerPrincipal: 2 },
  });
  t.after(() => h.close());
  await h.gateway.ready();
  const as = (subject: string) => ({ principal: { subject, tenant: h.tenant, groups: [] } });
  const held = h.call({ method: 'tools/call', server: 'slow', name: 'wait', ...as('api-key:heavy') });
  await waitFor(() => server.waiting === 1, 10_000, 'the heavy key holds the slot');
  const heavyQueued = h.call({
    method: 'tools/call',
    server: 'slow',
    name: 'echo',
    arguments: { text: 'heavy 2' },
    ...as('api-key:heavy'),
  });
  const depth = async () => (await queueDepth.get()).values.find((v) => v.labels.server === `${h.tenant}/slow`)?.value;
  await waitFor(async () => (await depth()) === 1, 10_000, 'the heavy key queued its second call');

  await assert.rejects(
    h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: 'heavy 3' }, ...as('api-key:heavy') }),
    (error: unknown) => {
      assert.ok(error instanceof PunkError);
      assert.equal(error.code, 'ServerBusy');
      assert.match(
        error.message,
        /this principal already has 2 calls in flight or waiting, its share \(PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL=2\)/,
      );
      return true;
    },
  );
  // Others are not refused for the heavy key's calls: they wait in the same line.
  const light = h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: 'light' }, ...as('api-key:light') });
  const anonymous = [1, 2, 3].map((n) => h.call({ method: 'tools/call', server: 'slow', name: 'echo', arguments: { text: `anon ${n}` } }));
  await waitFor(async () => (await depth()) === 5, 10_000, 'everyone else queued');
  const principal = (await queueRejections.get()).values.find(
    (v) => v.labels.server === `${h.tenant}/slow` && v.labels.reason === 'principal',
  );
  assert.equal(principal?.value, 1);

  server.release();
  const texts = (await Promise.all([held, heavyQueued, light, ...anonymous])).map((r) => (r as ToolResult).content[0]!.text);
  assert.deepEqual(texts, ['released', 'heavy 2', 'light', 'anon 1', 'anon 2', 'anon 3']);
  // The heavy key's share is free again once its calls ended.
  const again = (await h.call({
    method: 'tools/call',
    server: 'slow',
    name: 'echo',
    arguments: { text: 'heavy again' },
    ...as('api-key:heavy'),
  })) as ToolResult;
  assert.equal(again.content[0]!.text, 'heavy again');
});

test('reviewTools decides what is served; when it fails the previous listing is kept', async (t) => {
  let reviews = 0;
  const under = await startUpstream(counter('t-review'), {
    reviewTools: async (upstream, tools) => {
      reviews++;
      assert.equal(upstream.key, 't-review/counter');
      if (reviews > 1) throw new Error('the pinning store is down');
      return tools.filter((tool) => tool.name !== 'delete_everything');
    },
  });
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready');
  assert.equal(under.upstream.knownTool('delete_everything'), undefined, 'the dropped tool is not served');
  assert.ok(under.upstream.knownTool('count'));
  const servedFirst = under.upstream.catalog().tools.map((tool) => tool.name);

  // `grow` adds a tool and sends notifications/tools/list_changed: the refreshed listing's review fails.
  const grown = await under.upstream.callTool('grow', {}, undefined);
  assert.ok(grown.ok);
  const added = (grown.result as ToolResult).content[0]!.text;
  await waitFor(() => reviews === 2, 10_000, 'the second review');
  await waitFor(() => under.listChanges === 1, 10_000, 'the refresh');
  assert.equal(under.upstream.knownTool(added), undefined, 'the unreviewed listing is not served');
  assert.deepEqual(
    under.upstream.catalog().tools.map((tool) => tool.name),
    servedFirst,
  );
  assert.ok(under.lines.some((line) => line.includes('the pinning store is down') && line.includes('the previous listing is kept')));
});

test('a changed registration evicts the pooled connections, shared and per-client', async (t) => {
  const h = await startHarness((tenant) => [counter(tenant, 'pooled'), counter(tenant, 'solo', { sessionMode: 'per-client' })]);
  t.after(() => h.close());
  await h.gateway.ready();
  const sessionId = randomUUID();
  const pooledPid = pidOf(await h.call({ method: 'tools/call', server: 'pooled', name: 'count' }));
  const soloPid = pidOf(await h.call({ method: 'tools/call', server: 'solo', name: 'count', sessionId }));
  assert.notEqual(pooledPid, soloPid);
  const live = await descendantPids();
  assert.ok(live.includes(pooledPid) && live.includes(soloPid));

  // The registrations change (a new env entry): every connection made under the old ones is closed.
  await h.gateway.setServers([
    counter(h.tenant, 'pooled', { env: [{ name: 'REVISION', value: '2' }] }),
    counter(h.tenant, 'solo', { sessionMode: 'per-client', env: [{ name: 'REVISION', value: '2' }] }),
  ]);
  const after = await descendantPids();
  assert.ok(!after.includes(pooledPid), 'the shared connection was closed');
  assert.ok(!after.includes(soloPid), 'the per-client session was closed');
  assert.ok(h.changes.some((c) => c.server === 'pooled' && c.change === 'updated'));

  await h.gateway.ready();
  const pooled = await h.call({ method: 'tools/call', server: 'pooled', name: 'count' });
  const solo = await h.call({ method: 'tools/call', server: 'solo', name: 'count', sessionId });
  assert.notEqual(pidOf(pooled), pooledPid);
  assert.notEqual(pidOf(solo), soloPid);
  assert.match((solo as ToolResult).content[0]!.text, /calls=1 /, 'the session reconnected to the new registration');
});
