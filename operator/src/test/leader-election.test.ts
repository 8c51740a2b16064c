// Two operator instances on one real kube-apiserver: one holds the Lease and reconciles, the other waits; when the
// leader stops (releasing the Lease) the other takes over and reconciles what is created next; a leader whose Lease
// is taken stops leading.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoordinationV1Api } from '@kubernetes/client-node';
import type { RunningOperator } from '../index.js';
import { startOperator } from '../index.js';
import { controlPlaneAvailability, startControlPlane, type ControlPlane } from './control-plane.js';
import { createNamespace, CustomResources, startNats, testOperatorOptions, until, type TestNats } from './harness.js';

const availability = controlPlaneAvailability();

function server(name: string) {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/s:1', command: ['s'] },
  };
}

describe('leader election between two operators', { skip: availability.available ? false : availability.reason }, () => {
  let plane: ControlPlane;
  let nats: TestNats;
  const running: RunningOperator[] = [];

  before(async () => {
    plane = await startControlPlane();
    nats = await startNats();
  });
  after(async () => {
    for (const operator of running) await operator.stop();
    await nats?.stop();
    await plane?.stop();
  });

  it('hands over: only the leader reconciles, and the other takes over when it stops', async () => {
    const ns = await createNamespace(plane.kubeConfig, 'leader');
    const crs = new CustomResources(plane.kubeConfig);
    const apps = plane.kubeConfig.makeApiClient(AppsV1Api);
    const leases = plane.kubeConfig.makeApiClient(CoordinationV1Api);
    const a = await startOperator(testOperatorOptions(plane.kubeConfig, await nats.connect('a'), { identity: 'operator-a' }));
    running.push(a);
    await until('a leads', () => a.isLeader());
    const b = await startOperator(testOperatorOptions(plane.kubeConfig, await nats.connect('b'), { identity: 'operator-b' }));
    running.push(b);

    await crs.create('mcpservers', ns, server('first'));
    await until('first reconciled', () => apps.readNamespacedDeployment({ name: 'first', namespace: ns }));
    assert.equal(a.isLeader(), true);
    assert.equal(b.isLeader(), false, 'the second instance does not lead while the first renews');
    assert.equal((await leases.readNamespacedLease({ name: 'punk-operator', namespace: 'default' })).spec?.holderIdentity, 'operator-a');

    await a.stop();
    assert.equal(a.isLeader(), false);
    await until('b leads', () => b.isLeader());
    const lease = await leases.readNamespacedLease({ name: 'punk-operator', namespace: 'default' });
    assert.equal(lease.spec?.holderIdentity, 'operator-b');
    assert.equal(lease.spec?.leaseTransitions, 1, 'one hand-over recorded on the Lease');

    await crs.create('mcpservers', ns, server('second'));
    await until('second reconciled by b', () => apps.readNamespacedDeployment({ name: 'second', namespace: ns }));
  });

  it('stops leading when another identity takes the Lease', async () => {
    const leases = plane.kubeConfig.makeApiClient(CoordinationV1Api);
    const c = await startOperator(
      testOperatorOptions(plane.kubeConfig, await nats.connect('c'), {
        identity: 'operator-c',
        lease: { namespace: 'default', name: 'taken', durationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
      }),
    );
    running.push(c);
    await until('c leads', () => c.isLeader());
    // Someone else writes the Lease (as a candidate with another identity would after c's lease expired).
    const lease = await leases.readNamespacedLease({ name: 'taken', namespace: 'default' });
    await leases.replaceNamespacedLease({
      name: 'taken',
      namespace: 'default',
      body: { ...lease, spec: { ...lease.spec, holderIdentity: 'intruder' } },
    });
    await until('c stops leading', () => !c.isLeader());
  });
});
