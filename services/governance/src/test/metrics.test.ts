/**
 * governance's metrics (metrics.ts) on a private NATS: decisions counted by outcome and kind, a McpPolicy rate
 * limit's refusal counted as a deny and as rate-limited, and every check timed, a malformed one under its error
 * code. Values are deltas read from prom-client's registry (other services may run in this process).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  API_VERSION,
  buckets,
  createLogger,
  kvKey,
  NatsBus,
  requestDecision,
  streams,
  subjects,
  type GovernanceCheck,
  type Principal,
} from '@punk/lib';
import { startGovernance, type GovernanceService } from '../index.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';
import { registryValue } from '../../../lib/dist/test/metricstest.js';

describe('governance metrics', () => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const alice: Principal = { subject: 'alice', tenant, groups: [], scopes: [] };
  const log = createLogger('governance', 'silent');
  let nats: PrivateNats;
  let bus: NatsBus;
  let client: NatsBus;
  let governance: GovernanceService;

  before(async () => {
    nats = await startPrivateNats();
    client = await NatsBus.connect({ url: nats.url, name: 'test-client', log });
    bus = await NatsBus.connect({ url: nats.url, name: 'governance', log });
    await client.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log });
  });
  after(async () => {
    await governance?.stop();
    await bus?.close();
    await client?.close();
    await nats?.stop();
  });

  const check = (target: string, kind: GovernanceCheck['kind'] = 'tool') =>
    requestDecision(client, { tenant, principal: alice, server: 'fs', kind, target, runId: `run-${randomUUID()}` });

  it('counts decisions by outcome and kind, rate-limit refusals, and times every check', async () => {
    // Fixed windows of an hour: wait out the last seconds of one so both uses of `limited` share a window.
    const untilNext = 3_600_000 - (Date.now() % 3_600_000);
    if (untilNext < 15_000) await new Promise((r) => setTimeout(r, untilNext + 100));
    const kv = await client.keyValue(buckets.mcpPolicies);
    await kv.put(kvKey(tenant, 'quota'), {
      apiVersion: API_VERSION,
      kind: 'McpPolicy',
      metadata: { name: 'quota', namespace: tenant, generation: 1 },
      spec: {
        rules: [{ name: 'blocked', tools: ['blocked'], decision: 'deny' }],
        rateLimits: [{ name: 'once', tools: ['limited'], requests: 1, per: '1h' }],
      },
    });
    const deadline = Date.now() + 10_000;
    while ((await check('blocked')).rule !== 'quota/blocked' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));

    const counters = async () => ({
      allow: await registryValue('punk_governance_decisions_total', { decision: 'allow', kind: 'tool' }),
      deny: await registryValue('punk_governance_decisions_total', { decision: 'deny', kind: 'tool' }),
      resourceAllow: await registryValue('punk_governance_decisions_total', { decision: 'allow', kind: 'resource' }),
      limited: await registryValue('punk_governance_rate_limited_total', { kind: 'tool' }),
      timedDeny: await registryValue(
        'punk_governance_check_duration_seconds',
        { decision: 'deny', error_type: '' },
        'punk_governance_check_duration_seconds_count',
      ),
      malformed: await registryValue(
        'punk_governance_check_duration_seconds',
        { decision: '', error_type: 'InvalidMessage' },
        'punk_governance_check_duration_seconds_count',
      ),
    });
    const before = await counters();
    assert.equal((await check('limited')).decision, 'allow');
    const refused = await check('limited');
    assert.deepEqual([refused.decision, refused.rule], ['deny', 'quota/once']);
    assert.equal((await check('blocked')).decision, 'deny');
    assert.equal((await check('file:///notes', 'resource')).decision, 'allow');
    await assert.rejects(client.request(subjects.governanceCheck, { tenant }, { timeoutMs: 5000 }), /malformed message/);
    const now = await counters();

    assert.equal(now.allow - before.allow, 1);
    assert.equal(now.deny - before.deny, 2, 'the rule and the rate limit');
    assert.equal(now.resourceAllow - before.resourceAllow, 1, 'resources are their own kind');
    assert.equal(now.limited - before.limited, 1, 'only the rate limit');
    assert.equal(now.timedDeny - before.timedDeny, 2);
    assert.equal(now.malformed - before.malformed, 1, 'a malformed check is timed under its error code, without a decision');
  });
});
