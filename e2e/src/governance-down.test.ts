/**
 * Governance down in the distributed topology (governance, gateway and mcp-front as their own OS processes over
 * NATS). The gateway decides calls in process from the tenant's McpPolicy objects and asks governance only when a
 * rate limit covers the call (its counters are governance's shared state). So with governance killed under calls,
 * calls no rate limit covers keep working, each decision on the ledger; a rate-limited call is refused with an
 * error naming governance and its subject (for a hung governance, SIGSTOP: the deadline too), never a missing
 * gateway or a silent server, and every refusal is on the ledger.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ProtocolError, type Client } from '@modelcontextprotocol/client';
import { buckets, createLogger, deadlines, kvKey, NatsBus, streams, subjects, type LedgerEvent } from '@punk/lib';
import { connectClient } from './clients.js';
import { tallyWorld, type TallyWorld } from './distributed.js';
import { startService, type ServiceProcess } from './processes.js';

let world: TallyWorld;
let bus: NatsBus;
let governance: ServiceProcess;
let front: ServiceProcess;
let client: Client;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  bus = await NatsBus.connect({ url: world.nats.url, name: 'governance-down-test', log: createLogger('test', 'silent') });
  // `read_slowly` is rate limited (a limit no test reaches): deciding it needs governance's counters; `count` is not.
  const policies = await bus.keyValue(buckets.mcpPolicies);
  await policies.put(kvKey(world.setup.tenant, 'quota'), {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpPolicy',
    metadata: { name: 'quota', namespace: world.setup.tenant },
    spec: { rateLimits: [{ name: 'reads', tools: ['read_slowly'], requests: 100_000, per: '1m' }] },
  });
  governance = await startService('governance', world.env);
  running.push(governance, await startService('gateway', world.env));
  front = await startService('mcp-front', world.env);
  running.push(front);
  client = await connectClient(`${front.url}/servers/${world.setup.tenant}/tally/mcp`, '2025-11-25');
});

after(async () => {
  await client?.close();
  if (governance.process.pid !== undefined && governance.process.exitCode === null) governance.process.kill('SIGCONT');
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await bus?.close();
  await world.setup.killServers();
  await world.stop();
});

/** What one call ended with: the tool's text, or the JSON-RPC error. */
type Outcome = { ok: true } | { ok: false; error: ProtocolError };

async function call(name: 'count' | 'read_slowly', n: number): Promise<Outcome> {
  try {
    const result = await client.callTool({ name, arguments: name === 'count' ? { n } : { ms: 1 } });
    assert.notEqual(result.isError, true, JSON.stringify(result));
    return { ok: true };
  } catch (error) {
    assert.ok(error instanceof ProtocolError, `expected a ProtocolError, got ${String(error)}`);
    return { ok: false, error };
  }
}

/** The tenant's events on the ledger stream (no ledger process runs: the stream is the record). */
async function ledger(): Promise<LedgerEvent[]> {
  const stored = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 100_000 });
  return stored.map((m) => m.data as LedgerEvent).filter((e) => e.tenant === world.setup.tenant);
}

void test('governance killed under calls: unlimited calls keep working; rate-limited ones are refused naming governance, each refusal on the ledger', async () => {
  assert.deepEqual(await call('read_slowly', 0), { ok: true }, 'with governance up a rate-limited call succeeds');
  const before = (await ledger()).length;

  // Two callers in turn, one unlimited, one rate limited; governance is killed after a few rounds.
  const outcomes: Array<{ name: 'count' | 'read_slowly'; outcome: Outcome }> = [];
  for (let n = 1; n <= 30; n++) {
    if (n === 6) await governance.stop('SIGKILL');
    const [count, read] = await Promise.all([call('count', n), call('read_slowly', n)]);
    outcomes.push({ name: 'count', outcome: count }, { name: 'read_slowly', outcome: read });
  }

  const counts = outcomes.filter((o) => o.name === 'count');
  assert.ok(
    counts.every((o) => o.outcome.ok),
    `every unlimited call ran: ${counts.flatMap((o) => (o.outcome.ok ? [] : [o.outcome.error.message])).join('; ')}`,
  );
  const refused = outcomes.flatMap((o) => (o.name === 'read_slowly' && !o.outcome.ok ? [o.outcome.error] : []));
  assert.ok(refused.length >= 20, `the rate-limited calls after the kill were refused (${refused.length})`);
  for (const error of refused) {
    assert.match(error.message, /^tools\/call read_slowly on server "tally" was not run: governance did not answer /);
    assert.match(error.message, new RegExp(`subject ${subjects.governanceCheck.replaceAll('.', '\\.')}`));
    assert.doesNotMatch(error.message, /gateway/);
  }
  const lines = await world.setup.lines();
  assert.equal(lines.filter((l) => l.startsWith('read_slowly done')).length, 1 + 30 - refused.length, 'no refused call ran');

  // The ledger: every refusal, and every unlimited call's decision (made by the gateway), call and completion.
  const events = (await ledger()).slice(before);
  const refusals = events.filter((e) => e.type === 'governance.decision' && e.data['rule'] === 'gateway/governance-unavailable');
  assert.equal(refusals.length, refused.length, 'each refusal is on the ledger');
  for (const e of refusals) {
    assert.equal(e.source, 'gateway');
    assert.equal(e.data['decision'], 'deny');
    assert.equal(e.data['target'], 'read_slowly');
    assert.match(String(e.data['reason']), /governance did not answer/);
  }
  // An allowed call's decision, made by the gateway, travels in its tool.called (data.decision), not an event of its own.
  assert.equal(
    events.filter((e) => e.type === 'governance.decision' && e.data['target'] === 'count').length,
    0,
    'no decision event of its own',
  );
  const called = events.filter((e) => e.type === 'tool.called' && e.data['name'] === 'count');
  assert.equal(called.length, 30);
  const countDecisions = called.map((e) => e.data['decision'] as Record<string, unknown> | undefined);
  assert.ok(
    countDecisions.every((d) => d?.['decision'] === 'allow' && d['target'] === 'count'),
    'each call carries its allow decision',
  );
  assert.ok(
    countDecisions.every((d) => typeof d?.['generation'] === 'number' && d['generation'] > 0),
    'each decision names the generation of the tenant policy it was made with',
  );
  assert.ok(
    called.every((e) => e.source === 'gateway' && typeof e.data['decisionId'] === 'string'),
    'each call names its decision',
  );
  assert.equal(events.filter((e) => e.type === 'tool.completed' && called.some((c) => c.id === e.data['calledEventId'])).length, 30);
});

void test('a hung governance (SIGSTOP): a rate-limited call fails at the deadline naming governance, an unlimited one still runs', async () => {
  governance = await startService('governance', world.env);
  running.push(governance);
  // Until the new replica serves, a rate-limited call is refused at once; then it succeeds again.
  const deadline = Date.now() + 30_000;
  let outcome = await call('read_slowly', 100);
  while (!outcome.ok && Date.now() < deadline) outcome = await call('read_slowly', 100);
  assert.deepEqual(outcome, { ok: true }, 'a new governance replica counts again');

  governance.process.kill('SIGSTOP');
  try {
    const started = Date.now();
    const [hung, count] = await Promise.all([call('read_slowly', 101), call('count', 101)]);
    assert.deepEqual(count, { ok: true }, 'an unlimited call does not wait for governance');
    assert.ok(!hung.ok);
    assert.equal(hung.error.code, -32001);
    assert.equal(
      hung.error.message,
      `tools/call read_slowly on server "tally" was not run: governance did not answer within ${String(deadlines.governanceCheckMs)} ms on subject ${subjects.governanceCheck}`,
    );
    assert.ok(Date.now() - started >= deadlines.governanceCheckMs);
  } finally {
    governance.process.kill('SIGCONT');
  }
  const refusal = (await ledger()).find(
    (e) =>
      e.type === 'governance.decision' && e.data['rule'] === 'gateway/governance-unavailable' && /within/.test(String(e.data['reason'])),
  );
  assert.ok(refusal, 'the refusal at the deadline is on the ledger');
});
