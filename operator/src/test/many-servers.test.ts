// 200 McpServers created at once on a real kube-apiserver: every one gets its children and a status for its
// generation (a correctness test at scale; bench/operator.mjs measures the time and memory).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const COUNT = 200;

describe('200 McpServers', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;

  before(async () => {
    fixture = await startOperatorFixture('many', { operator: { reconcileTimeoutMs: 60_000 } });
  });
  after(() => fixture?.stop());

  it('all get their Deployment, Service, the shared ServiceAccount and a status of their generation', { timeout: 300_000 }, async () => {
    const { plane, crs, ns } = fixture;
    const names = Array.from({ length: COUNT }, (_, i) => `server-${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 20) {
      await Promise.all(
        names.slice(i, i + 20).map((name) =>
          crs.create('mcpservers', ns, {
            apiVersion: 'mcp.punk.dev/v1alpha1',
            kind: 'McpServer',
            metadata: { name },
            spec: { image: 'ghcr.io/example/s:1', command: ['s'] },
          }),
        ),
      );
    }
    const apps = plane.kubeConfig.makeApiClient(AppsV1Api);
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    await until(
      'every Deployment',
      async () => (await apps.listNamespacedDeployment({ namespace: ns })).items.length === COUNT || undefined,
      240_000,
    );
    await until(
      'every status',
      async () => {
        const list = (await crs.api.listNamespacedCustomObject({
          group: 'mcp.punk.dev',
          version: 'v1alpha1',
          namespace: ns,
          plural: 'mcpservers',
        })) as { items: { metadata: { generation: number }; status?: { observedGeneration?: number } }[] };
        return list.items.every((o) => o.status?.observedGeneration === o.metadata.generation) || undefined;
      },
      120_000,
    );
    const deployments = (await apps.listNamespacedDeployment({ namespace: ns })).items.map((d) => d.metadata!.name!).sort();
    const services = (await core.listNamespacedService({ namespace: ns })).items.map((s) => s.metadata!.name!).sort();
    const accounts = (await core.listNamespacedServiceAccount({ namespace: ns })).items
      .map((s) => s.metadata!.name!)
      .filter((n) => n !== 'default')
      .sort();
    assert.deepEqual(deployments, names);
    assert.deepEqual(services, names);
    assert.deepEqual(accounts, ['punk-mcp-server'], 'one ServiceAccount for the namespace');
  });
});
