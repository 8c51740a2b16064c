/**
 * McpPolicy objects as governance serves them: a private NATS (bucket PUNK_MCP_POLICIES seen by no other test
 * run), governance replicas, and the operator's side played by writing bucket entries. A policy put changes the
 * decisions, policies apply by priority then name, a delete brings the defaults back, a bad entry is logged with
 * its field and skipped, and a rate limit denies the N+1th use of a window whichever replica counts it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import {
  API_VERSION,
  buckets,
  kvKey,
  NatsBus,
  requestDecision,
  filterDecisions,
  watchPolicies,
  type TenantPolicies,
  streams,
  type GovernanceCheck,
  type KvStore,
  type LedgerEvent,
  type Principal,
} from '@punk/lib';
import { startGovernance, type GovernanceService } from '../index.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';

describe('McpPolicy objects from bucket PUNK_MCP_POLICIES', () => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const alice: Principal = { subject: 'alice', tenant, groups: ['humans'], scopes: [] };
  const bot: Principal = { subject: 'bot-7', tenant, groups: ['agents'], scopes: [] };
  const logs: string[] = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk, _encoding, done) => (logs.push(String(chunk)), done()) }));
  let nats: PrivateNats;
  const buses: NatsBus[] = [];
  const replicas = new Map<string, GovernanceService>();
  let client: NatsBus;
  let kv: KvStore;
  const events: LedgerEvent[] = [];

  const open = async (name: string) => {
    const bus = await NatsBus.connect({ url: nats.url, name, log });
    buses.push(bus);
    return bus;
  };
  const startReplica = async (name: string) => replicas.set(name, await startGovernance({ bus: await open(name), log }));
  const stopReplica = async (name: string) => {
    await replicas.get(name)!.stop();
    replicas.delete(name);
  };
  const policy = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: API_VERSION,
    kind: 'McpPolicy',
    metadata: { name, namespace: tenant, generation: 1 },
    spec,
  });
  const put = (name: string, spec: Record<string, unknown>) => kv.put(kvKey(tenant, name), policy(name, spec));
  const check = (principal: Principal, target: string, server = 'fs') =>
    requestDecision(client, { tenant, principal, server, kind: 'tool', target, runId: `run-${randomUUID()}` } satisfies GovernanceCheck);
  /** A watch of the policies as mcp-front's list filter keeps it. */
  let lists: TenantPolicies;
  /** What `read` gives once it gives `expected` (the watch may lag the put by a moment), or its last value after 10 s. */
  const settled = async (read: () => string, expected: string) => {
    const deadline = Date.now() + 10_000;
    while (read() !== expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    return read();
  };
  /** The rule deciding `target` for `principal`, once every replica agrees on it (a few checks land on each). */
  const settledRule = async (principal: Principal, target: string, expected: string) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const rules = await Promise.all([1, 2, 3, 4, 5, 6].map(async () => (await check(principal, target)).rule));
      if (rules.every((rule) => rule === expected)) return expected;
      if (Date.now() > deadline) return rules.join(', ');
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  before(async () => {
    nats = await startPrivateNats();
    client = await open('test-client');
    await client.ensureStream(streams.ledger);
    await client.consume(streams.ledger.name, 'test-reader', async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)));
    kv = await client.keyValue(buckets.mcpPolicies);
    lists = await watchPolicies(client, log);
    await startReplica('governance-a');
    await startReplica('governance-b');
  });

  after(async () => {
    await lists?.stop();
    for (const replica of replicas.values()) await replica.stop();
    for (const bus of buses) await bus.close();
    await nats?.stop();
  });

  it('a tenant without McpPolicy gets the built-in rules', async () => {
    const first = await check(alice, 'read_file');
    assert.deepEqual([first.rule, first.generation], ['default/allow-up-to-level-3', 0], 'generation 0: the defaults alone');
    assert.equal((await check(alice, 'delete_file')).rule, 'default/approval-for-level-4');
  });

  it('a policy put changes the decisions, naming <policy>/<rule>; the defaults still follow it', async () => {
    await put('lockdown', {
      priority: 50,
      rules: [
        { name: 'agents-no-writes', groups: ['agents'], sideEffectLevels: { min: 2 }, decision: 'deny', reason: 'agents only read' },
        { name: 'secrets-need-approval', tools: ['read_secret'], decision: 'approval_required' },
      ],
    });
    assert.equal(await settledRule(bot, 'write_file', 'lockdown/agents-no-writes'), 'lockdown/agents-no-writes');
    const denied = await check(bot, 'write_file');
    assert.deepEqual([denied.decision, denied.reason], ['deny', 'agents only read']);
    assert.equal(
      (await check(bot, 'read_file')).rule,
      'default/allow-up-to-level-3',
      'a use no rule of the policy matches falls through to the defaults',
    );
    assert.equal((await check(alice, 'write_file')).rule, 'default/allow-up-to-level-3', 'groups match the principal');
    const secret = await check(alice, 'read_secret');
    assert.deepEqual([secret.decision, secret.rule], ['approval_required', 'lockdown/secrets-need-approval']);
    // A list filter (mcp-front's, in process) sees the same rules: the agent's lists drop the write.
    const items = [
      { server: 'fs', kind: 'tool' as const, target: 'write_file' },
      { server: 'fs', kind: 'tool' as const, target: 'read_file' },
    ];
    assert.deepEqual(await settled(() => filterDecisions({ principal: bot, items }, lists.of(tenant)).join(), 'deny,allow'), 'deny,allow');
    // Other tenants are untouched.
    const other = `t-${randomUUID().slice(0, 8)}`;
    const elsewhere = await requestDecision(client, {
      tenant: other,
      principal: { ...bot, tenant: other },
      server: 'fs',
      kind: 'tool',
      target: 'write_file',
      runId: 'r',
    });
    assert.equal(elsewhere.rule, 'default/allow-up-to-level-3');
  });

  it('policies apply by ascending priority, then name', async () => {
    await put('alice-writes', { priority: 10, rules: [{ name: 'alice', principals: ['alice'], servers: ['fs'], decision: 'allow' }] });
    await put('a-agents-servers', {
      priority: 50,
      rules: [{ name: 'agents-fs', groups: ['agents'], servers: ['fs'], decision: 'approval_required' }],
    });
    assert.equal(await settledRule(alice, 'read_secret', 'alice-writes/alice'), 'alice-writes/alice', 'priority 10 comes before 50');
    // Same priority 50: a-agents-servers sorts before lockdown.
    assert.equal(await settledRule(bot, 'write_file', 'a-agents-servers/agents-fs'), 'a-agents-servers/agents-fs');
    assert.equal((await check(bot, 'write_file', 'mail')).rule, 'lockdown/agents-no-writes', 'servers restrict a rule');
  });

  it('a bad entry is logged with its key and field and skipped; the policies already served stay', async () => {
    await kv.put(
      kvKey(tenant, 'broken'),
      policy('broken', { rules: [{ name: 'r', sideEffectLevels: { min: 3, max: 1 }, decision: 'deny' }] }),
    );
    await kv.put(kvKey(tenant, 'lockdown'), policy('lockdown', { rules: [{ name: 'x', decision: 'perhaps' }] }));
    await kv.put(kvKey(tenant, 'misfiled'), policy('other-name', {}));
    const skipped = () => logs.filter((l) => /is skipped/.test(l)).map((l) => JSON.parse(l) as { key: string; field: string; msg: string });
    const expected: Array<(s: { key: string; field: string; msg: string }) => boolean> = [
      (s) => s.key === kvKey(tenant, 'broken') && s.field === 'spec.rules.0.sideEffectLevels',
      (s) => s.key === kvKey(tenant, 'lockdown') && s.field === 'spec.rules.0.decision' && /previous version stays served/.test(s.msg),
      (s) => s.key === kvKey(tenant, 'misfiled') && s.field === 'metadata',
    ];
    // Wait for these three lines themselves (each replica's watch logs them when it gets there), not for a count.
    const deadline = Date.now() + 10_000;
    while (!expected.every((line) => skipped().some(line)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
    for (const line of expected) assert.ok(skipped().some(line), JSON.stringify(skipped()));
    assert.equal(await settledRule(bot, 'write_file', 'a-agents-servers/agents-fs'), 'a-agents-servers/agents-fs');
    assert.equal((await check(bot, 'write_file', 'mail')).rule, 'lockdown/agents-no-writes', 'the last valid lockdown is still served');
  });

  it('deleting the policies brings the built-in rules back, at a later generation on every replica', async () => {
    const before = (await check(bot, 'write_file')).generation;
    assert.ok(before > 0, 'the policies put so far gave the tenant a generation');
    for (const name of ['lockdown', 'alice-writes', 'a-agents-servers', 'broken', 'misfiled']) await kv.delete(kvKey(tenant, name));
    assert.equal(await settledRule(bot, 'write_file', 'default/allow-up-to-level-3'), 'default/allow-up-to-level-3');
    const generations = await Promise.all([1, 2, 3, 4].map(async () => (await check(bot, 'write_file')).generation));
    assert.ok(
      generations.every((g) => g === generations[0] && g > before),
      `one later generation: ${generations.join(', ')}`,
    );
    assert.equal((await check(alice, 'read_secret')).rule, 'default/allow-up-to-level-3');
  });

  it('a rate limit denies the N+1th check of a window, counted across replicas; list filtering does not count', async () => {
    // Fixed windows of an hour: wait out the last seconds of one so the test's checks share a window.
    const untilNext = 3_600_000 - (Date.now() % 3_600_000);
    if (untilNext < 15_000) await new Promise((r) => setTimeout(r, untilNext + 100));
    await put('quota', {
      rules: [{ name: 'marker', tools: ['marker'], decision: 'deny' }],
      rateLimits: [
        { name: 'x', tools: ['count'], requests: 5, per: '1h' },
        { name: 'burst', tools: ['burst'], requests: 5, per: '1h' },
      ],
    });
    // Every replica serves the policy (its marker rule decides) before counting starts; a denied check counts nothing.
    assert.equal(await settledRule(alice, 'marker', 'quota/marker'), 'quota/marker', 'both replicas serve the quota policy');
    // List filtering evaluates the rules alone: the limited tool stays listed, and listing counts nothing.
    const items = [
      { server: 'fs', kind: 'tool' as const, target: 'marker' },
      { server: 'fs', kind: 'tool' as const, target: 'count' },
    ];
    assert.equal(await settled(() => filterDecisions({ principal: alice, items }, lists.of(tenant)).join(), 'deny,allow'), 'deny,allow');
    // Three uses counted while only replica b serves, two more once only a new replica c serves: the counter is shared.
    await stopReplica('governance-a');
    for (let i = 1; i <= 3; i++) assert.equal((await check(alice, 'count')).decision, 'allow', `use ${i}`);
    await startReplica('governance-c');
    await stopReplica('governance-b');
    for (let i = 4; i <= 5; i++) assert.equal((await check(alice, 'count')).decision, 'allow', `use ${i}`);
    const sixth = await check(alice, 'count');
    assert.deepEqual([sixth.decision, sixth.rule, sixth.reason], ['deny', 'quota/x', 'rate limit x: 5 requests per 1h exceeded']);
    assert.equal((await check(alice, 'count')).decision, 'deny', 'a refused use is not counted, and stays refused');
    assert.equal((await check(bot, 'count')).decision, 'allow', 'each principal has its own count');
    assert.equal((await check(alice, 'other_tool')).decision, 'allow', 'a limit counts only the uses it matches');
    // Ten at once on two replicas: compare-and-set lets exactly five through.
    await startReplica('governance-d');
    const burst = await Promise.all(Array.from({ length: 10 }, () => check(bot, 'burst')));
    assert.deepEqual(burst.map((d) => d.decision).sort(), [...Array(5).fill('deny'), ...Array(5).fill('allow')].sort());
    assert.ok(burst.filter((d) => d.decision === 'deny').every((d) => d.rule === 'quota/burst'));
    const recorded = () => events.filter((e) => e.tenant === tenant && e.type === 'governance.decision' && e.data.rule === 'quota/x');
    const ledgerDeadline = Date.now() + 10_000;
    while (recorded().length < 2 && Date.now() < ledgerDeadline) await new Promise((r) => setTimeout(r, 25));
    assert.equal(recorded().length, 2, 'both denials are on the ledger');
    assert.equal(recorded()[0]!.data.decision, 'deny');
    assert.equal(recorded()[0]!.data.reason, 'rate limit x: 5 requests per 1h exceeded');
  });
});
