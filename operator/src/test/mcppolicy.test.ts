// McpPolicies on a real kube-apiserver, published by the operator to PUNK_MCP_POLICIES on a nats-server of the
// test's own: created, edited, deleted; an invalid one Degraded with its field named while its last valid
// generation stays served; and the orphan sweep of a new leader removing entries no object backs (servers too).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { buckets, kvKey, type KvStore } from '@punk/lib';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

const baseline = {
  apiVersion: 'mcp.punk.dev/v1alpha1',
  kind: 'McpPolicy',
  metadata: { name: 'baseline' },
  spec: {
    priority: 10,
    rules: [
      { name: 'no-deletes-for-agents', groups: ['agents'], sideEffectLevels: { min: 4 }, decision: 'deny' },
      { name: 'writes-need-approval', servers: ['filesystem'], sideEffectLevels: { min: 2, max: 3 }, decision: 'approval_required' },
    ],
    rateLimits: [{ name: 'fetch-per-minute', servers: ['everything'], requests: 60, per: '1m' }],
  },
};

describe('the operator publishing McpPolicies', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let policies: KvStore;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('policies');
    ({ crs, ns } = fixture);
    policies = await (await fixture.nats.connect('test')).keyValue(buckets.mcpPolicies);
  });
  after(() => fixture?.stop());

  it('publishes a policy with its defaults, follows an edit, and removes it on delete', async () => {
    await crs.create('mcppolicies', ns, baseline);
    const entry = await until('the bucket entry', () => policies.get(kvKey(ns, 'baseline')));
    const value = entry.value as {
      kind: string;
      metadata: { name: string; namespace: string; generation: number };
      spec: typeof baseline.spec;
    };
    assert.equal(value.kind, 'McpPolicy');
    assert.equal(value.metadata.namespace, ns);
    assert.deepEqual(
      value.spec.rules.map((r) => r.name),
      ['no-deletes-for-agents', 'writes-need-approval'],
    );
    const live = await until('Ready', async () => {
      const o = await crs.get('mcppolicies', ns, 'baseline');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.equal(live.status.ruleCount, 2);
    assert.equal(live.status.observedGeneration, live.metadata.generation);
    assert.equal(conditionOf(live, 'Degraded')?.status, 'False');
    assert.match(
      conditionOf(live, 'Degraded')!.message,
      /^no problem: generation \d+ \(2 rules, 1 rate limits\) is published to bucket PUNK_MCP_POLICIES, which every gateway, front and governance replica watches$/,
      'Degraded=False says why',
    );

    await crs.patchSpec('mcppolicies', ns, 'baseline', {
      rules: [...baseline.spec.rules, { name: 'reads', sideEffectLevels: { max: 1 }, decision: 'allow' }],
    });
    await until(
      'the edit published',
      async () => ((await policies.get(kvKey(ns, 'baseline')))?.value as typeof value | undefined)?.spec.rules.length === 3,
    );
    await until('ruleCount 3', async () => (await crs.get('mcppolicies', ns, 'baseline')).status?.ruleCount === 3);

    await crs.delete('mcppolicies', ns, 'baseline');
    await until('the entry removed', async () => (await policies.get(kvKey(ns, 'baseline'))) === undefined);
  });

  it('marks a policy stored under a looser CRD Degraded, naming the field, and keeps serving its last valid generation', async () => {
    await crs.create('mcppolicies', ns, { ...baseline, metadata: { name: 'loosened' } });
    await until('published', () => policies.get(kvKey(ns, 'loosened')));
    // An older CRD that validated less: the spec is stored as sent, and only the operator's schema catches it.
    const extensions = fixture.plane.kubeConfig.makeApiClient(ApiextensionsV1Api);
    const crd = await extensions.readCustomResourceDefinition({ name: 'mcppolicies.mcp.punk.dev' });
    const version = crd.spec.versions[0]!;
    version.schema!.openAPIV3Schema!.properties!.spec = { type: 'object', x_kubernetes_preserve_unknown_fields: true };
    await extensions.replaceCustomResourceDefinition({ name: crd.metadata!.name!, body: crd });
    await until('the looser CRD served', () =>
      crs.patchSpec('mcppolicies', ns, 'loosened', { rules: [{ name: 'Not A Label', decision: 'allow' }] }).then(
        () => true,
        () => undefined,
      ),
    );
    const degraded = await until('Degraded', async () => {
      const o = await crs.get('mcppolicies', ns, 'loosened');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    assert.equal(conditionOf(degraded, 'Degraded')?.reason, 'InvalidSpec');
    assert.match(conditionOf(degraded, 'Degraded')!.message, /^spec\.rules\[0\]\.name: /);
    const kept = (await policies.get(kvKey(ns, 'loosened')))!.value as { spec: { rules: { name: string }[] } };
    assert.equal(kept.spec.rules[0]!.name, 'no-deletes-for-agents', 'the last valid generation is still served');
  });

  it('sweeps bucket entries no object backs when an operator starts leading, in the namespaces it watches only', async () => {
    await fixture.operator!.stop();
    fixture.operator = undefined;
    const servers = await (await fixture.nats.connect('sweep')).keyValue(buckets.mcpServers);
    await policies.put(kvKey(ns, 'ghost'), { left: 'behind' });
    await servers.put(kvKey(ns, 'ghost-server'), { left: 'behind' });
    await policies.put(kvKey('elsewhere', 'other'), { owned: 'by another operator' });
    await fixture.startOperator({ namespaces: [ns] });
    await until(
      'the orphans removed',
      async () => (await policies.get(kvKey(ns, 'ghost'))) === undefined && (await servers.get(kvKey(ns, 'ghost-server'))) === undefined,
    );
    assert.ok(await policies.get(kvKey(ns, 'loosened')), 'a backed entry stays');
    assert.ok(await policies.get(kvKey('elsewhere', 'other')), 'an entry of an unwatched namespace stays');
  });
});
