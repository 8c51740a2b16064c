import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PunkError } from '@punk/lib';
import { descendantPids, fixture, manifest, startHarness, waitFor } from './harness.js';

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };

const counter = (tenant: string, name = 'counter', extra: Record<string, unknown> = {}) =>
  manifest(tenant, name, { image: 'example/counter:1', command: [process.execPath, fixture('counter.mjs')], ...extra });

test('servers that cannot start fail with a clear lastError, and the others still serve', async (t) => {
  const h = await startHarness(
    (tenant) => [
      manifest(tenant, 'missing', { image: 'x:1', command: ['punk-no-such-command-xyz', '--flag'] }),
      manifest(tenant, 'exits', { image: 'x:1', command: [process.execPath, '$(FIXTURES)/exit-at-start.mjs'] }),
      manifest(tenant, 'silent', { image: 'x:1', command: [process.execPath, fixture('silent.mjs')] }),
      manifest(tenant, 'image-only', { image: 'ghcr.io/example/server:1' }),
      manifest(tenant, 'not-installed', { package: { registry: 'npm', name: '@punk-test/not-installed', version: '1.0.0' } }),
      manifest(tenant, 'secret', {
        image: 'x:1',
        command: ['true'],
        env: [{ name: 'API_TOKEN', valueFrom: { secretKeyRef: { name: 'tokens', key: 'api' } } }],
      }),
      counter(tenant),
    ],
    // Servers that failed retry after the backoff; a long one keeps them `failed` while the test reads them.
    { startTimeoutMs: 4000, upstream: { initialBackoffMs: 60_000 } },
  );
  t.after(() => h.close());
  const started = Date.now();
  await h.gateway.ready();
  assert.ok(Date.now() - started < 15_000, 'ready() does not wait for servers that keep failing');
  const byName = Object.fromEntries(h.gateway.catalog(h.tenant).map((s) => [s.name, s]));
  assert.equal(byName.missing!.state, 'failed');
  assert.match(byName.missing!.lastError!, /punk-no-such-command-xyz.*ENOENT/);
  assert.equal(byName.exits!.state, 'failed');
  assert.match(byName.exits!.lastError!, /exited with code 2/);
  assert.match(byName.exits!.lastError!, /DATABASE_URL is not set/);
  assert.equal(byName.silent!.state, 'failed');
  assert.match(byName.silent!.lastError!, /did not complete its MCP handshake within 4000 ms/);
  assert.equal(byName['image-only']!.state, 'failed');
  assert.match(byName['image-only']!.lastError!, /set spec.command/);
  assert.equal(byName['not-installed']!.state, 'failed');
  assert.match(byName['not-installed']!.lastError!, /npm package @punk-test\/not-installed@1\.0\.0 is not installed.*does not download/);
  assert.equal(byName.secret!.state, 'failed');
  assert.match(byName.secret!.lastError!, /API_TOKEN/);
  assert.equal(byName.counter!.state, 'ready');

  // A call to a failed server is a tool error saying why, not a hang.
  const result = (await h.call({ method: 'tools/call', server: 'exits', name: 'anything' })) as ToolResult;
  assert.equal(result.isError, true);
  assert.match(result.content[0]!.text, /exits is unavailable.*exited with code 2/);
  // The attempt is on the ledger: a decision and an outcome without an upstream call.
  await waitFor(() => h.events.some((e) => e.type === 'tool.completed' && e.server === 'exits' && e.data.upstreamCalled === false));
  assert.ok(h.events.some((e) => e.type === 'governance.decision' && e.server === 'exits'));

  // State transitions were broadcast and recorded.
  assert.ok(h.changes.some((c) => c.server === 'exits' && c.change === 'state' && c.state === 'failed'));
  await waitFor(() => h.events.some((e) => e.type === 'server.state_changed' && e.server === 'exits' && e.data.state === 'failed'));
});

test('a server that crashes mid-call: the call gets a tool error quickly and the server comes back', async (t) => {
  const h = await startHarness((tenant) => [counter(tenant)]);
  t.after(() => h.close());
  await h.gateway.ready();
  const first = (await h.call({ method: 'tools/call', server: 'counter', name: 'count' })) as ToolResult;
  assert.match(first.content[0]!.text, /calls=1/);
  const firstPid = /pid=(\d+)/.exec(first.content[0]!.text)![1];

  const started = Date.now();
  const crashed = (await h.call({ method: 'tools/call', server: 'counter', name: 'crash' })) as ToolResult;
  assert.ok(Date.now() - started < 3000, 'the in-flight call is answered quickly');
  assert.equal(crashed.isError, true);
  assert.match(crashed.content[0]!.text, /counter exited during the call \(exit code 3\)/);
  await waitFor(() => h.events.some((e) => e.type === 'tool.completed' && e.data.name === 'crash'));
  const completed = h.events.find((e) => e.type === 'tool.completed' && e.data.name === 'crash')!;
  assert.equal(completed.data.isError, true);

  // The server restarts after the backoff and answers again, as a new process.
  await waitFor(() => h.gateway.catalog(h.tenant)[0]!.state === 'ready', 10_000, 'restart');
  const again = (await h.call({ method: 'tools/call', server: 'counter', name: 'count' })) as ToolResult;
  assert.match(again.content[0]!.text, /calls=1/);
  assert.notEqual(/pid=(\d+)/.exec(again.content[0]!.text)![1], firstPid);
  // The restart after a failure is a retry: broadcast are the failure and the recovery.
  const states = h.changes.filter((c) => c.change === 'state').map((c) => c.state);
  assert.deepEqual(states, ['starting', 'ready', 'failed', 'ready']);
});

test('governance: a level-4 tool fails closed naming the rule; a declared level wins', async (t) => {
  const h = await startHarness((tenant) => [
    counter(tenant),
    counter(tenant, 'declared', {
      tools: { overrides: [{ name: 'delete_everything', sideEffectLevel: 2, annotations: { destructiveHint: false } }] },
    }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const refused = (await h.call({ method: 'tools/call', server: 'counter', name: 'delete_everything' })) as ToolResult;
  assert.equal(refused.isError, true);
  assert.match(refused.content[0]!.text, /destroy:counter\/delete_everything requires an approval/);
  assert.match(refused.content[0]!.text, /default\/approval-for-level-4/);
  assert.ok(
    !h.events.some((e) => e.type === 'tool.called' && e.data.name === 'delete_everything' && e.server === 'counter'),
    'nothing was called',
  );
  await waitFor(() => h.events.some((e) => e.type === 'governance.decision' && e.data.decision === 'approval_required'));

  const [, declared] = h.gateway.catalog(h.tenant);
  assert.equal(declared!.sideEffectLevels.delete_everything, 2);
  assert.deepEqual(declared!.tools.find((tool) => tool.name === 'delete_everything')!.annotations, { destructiveHint: false });
  const allowed = (await h.call({ method: 'tools/call', server: 'declared', name: 'delete_everything' })) as ToolResult;
  assert.equal(allowed.content[0]!.text, 'deleted');
});

test('allow lists hide the other tools; tool errors pass through; JSON-RPC errors keep their code; calls time out', async (t) => {
  const h = await startHarness((tenant) => [
    counter(tenant, 'limited', { tools: { allow: ['count', 'reject', 'sleep'] }, timeout: '300ms' }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const [server] = h.gateway.catalog(h.tenant);
  assert.deepEqual(server!.tools.map((tool) => tool.name).sort(), ['count', 'reject', 'sleep']);
  // A listed tool the allow list leaves out answers which rule; a name the server does not list is not found.
  const hidden = (await h.call({ method: 'tools/call', server: 'limited', name: 'crash' })) as ToolResult;
  assert.equal(hidden.isError, true);
  assert.match(hidden.content[0]!.text, /tool crash of server limited is not served: the server's spec\.tools\.allow does not list it/);
  await assert.rejects(h.call({ method: 'tools/call', server: 'limited', name: 'nope' }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'ToolNotFound');
    assert.match(error.message, /nope.*limited/);
    return true;
  });
  // A tool that fails reports its own error result, untouched.
  const rejected = (await h.call({ method: 'tools/call', server: 'limited', name: 'reject' })) as ToolResult;
  assert.equal(rejected.isError, true);
  assert.match(rejected.content[0]!.text, /the field "x" is required/);
  // A JSON-RPC error keeps its code and data, so the front can answer with the same error.
  const calls = (await h.call({ method: 'resources/read', server: 'limited', uri: 'counter://calls' })) as { contents: { text: string }[] };
  assert.equal(calls.contents[0]!.text, '0');
  await assert.rejects(h.call({ method: 'resources/read', server: 'limited', uri: 'counter://nope' }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'UpstreamError');
    assert.equal(error.details?.mcpCode, -32602);
    assert.deepEqual(error.details?.data, { uri: 'counter://nope' });
    assert.match(error.message, /Resource not found: counter:\/\/nope/);
    return true;
  });
  await waitFor(() => h.events.some((e) => e.type === 'resource.completed' && e.data.uri === 'counter://nope' && e.data.isError === true));
  const slow = (await h.call({ method: 'tools/call', server: 'limited', name: 'sleep', arguments: { ms: 2000 } })) as ToolResult;
  assert.equal(slow.isError, true);
  assert.match(slow.content[0]?.text ?? '', /did not answer within 300 ms \(the server's spec\.timeout 300ms\): the call timed out/);
  const fine = (await h.call({ method: 'tools/call', server: 'limited', name: 'sleep', arguments: { ms: 10 } })) as ToolResult;
  assert.equal(fine.content[0]!.text, 'slept 10');
});

test('servers run with a scrubbed environment in their own working directory', async (t) => {
  process.env.PUNK_TEST_SECRET = 'must-not-leak';
  t.after(() => delete process.env.PUNK_TEST_SECRET);
  const h = await startHarness((tenant) => [
    counter(tenant, 'envy', {
      env: [
        { name: 'GREETING', value: 'hi' },
        { name: 'BOTH', value: '$(GREETING)-$(FIXTURES)-$(UNKNOWN)' },
      ],
      args: ['$(GREETING)'],
    }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const result = (await h.call({ method: 'tools/call', server: 'envy', name: 'env' })) as ToolResult;
  const seen = JSON.parse(result.content[0]!.text) as { env: Record<string, string>; cwd: string; argv: string[] };
  const home = `${h.workDir}/${h.tenant}/envy`;
  assert.equal(seen.cwd, home);
  assert.equal(seen.env.HOME, home);
  assert.equal(seen.env.GREETING, 'hi');
  assert.match(seen.env.BOTH!, /^hi-\/.*fixtures\/?-\$\(UNKNOWN\)$/);
  assert.deepEqual(seen.argv, ['hi']);
  assert.equal(seen.env.PUNK_TEST_SECRET, undefined);
  assert.deepEqual(Object.keys(seen.env).sort(), ['BOTH', 'GREETING', 'HOME', 'LANG', 'PATH', 'TMPDIR']);
});

test('setServers starts added servers, stops removed ones, and restarts changed ones', async (t) => {
  const h = await startHarness((tenant) => [counter(tenant, 'one')]);
  t.after(() => h.close());
  await h.gateway.ready();
  const tenant = h.tenant;
  await h.gateway.setServers([counter(tenant, 'one'), counter(tenant, 'two')]);
  await h.gateway.ready();
  assert.deepEqual(
    h.gateway.catalog(tenant).map((s) => [s.name, s.state]),
    [
      ['one', 'ready'],
      ['two', 'ready'],
    ],
  );
  const before = (await h.call({ method: 'tools/call', server: 'one', name: 'count' })) as ToolResult;
  await h.gateway.setServers([counter(tenant, 'one', { tools: { deny: ['crash'] } })]);
  await h.gateway.ready();
  assert.deepEqual(
    h.gateway.catalog(tenant).map((s) => s.name),
    ['one'],
  );
  const after = (await h.call({ method: 'tools/call', server: 'one', name: 'count' })) as ToolResult;
  assert.notEqual(/pid=(\d+)/.exec(after.content[0]!.text)![1], /pid=(\d+)/.exec(before.content[0]!.text)![1], 'a changed server restarts');
  await assert.rejects(h.call({ method: 'tools/call', server: 'two', name: 'count' }), { code: 'ServerNotFound' });
  assert.ok(h.changes.some((c) => c.server === 'two' && c.change === 'added'));
  assert.ok(h.changes.some((c) => c.server === 'two' && c.change === 'removed'));
  assert.ok(h.changes.some((c) => c.server === 'one' && c.change === 'updated'));
  assert.equal((await descendantPids()).length, 1, 'only the current server process runs');
});

test('a tools/list_changed from the upstream refreshes the catalog and is broadcast', async (t) => {
  const h = await startHarness((tenant) => [counter(tenant)]);
  t.after(() => h.close());
  await h.gateway.ready();
  const grown = (await h.call({ method: 'tools/call', server: 'counter', name: 'grow' })) as ToolResult;
  const added = grown.content[0]!.text;
  await waitFor(() => h.gateway.catalog(h.tenant)[0]!.tools.some((tool) => tool.name === added), 5000, 'refreshed catalog');
  await waitFor(() => h.changes.some((c) => c.server === 'counter' && c.change === 'list_changed'), 5000, 'list_changed broadcast');
  const called = (await h.call({ method: 'tools/call', server: 'counter', name: added })) as ToolResult;
  assert.equal(called.content[0]!.text, added);
});
