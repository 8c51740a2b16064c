// The McpServer's scale subresource on a real kube-apiserver, with the operator and Punk's real gateway on a
// nats-server of the test's own: scaling through /scale (what `kubectl scale` and a HorizontalPodAutoscaler do)
// changes spec.replicas; the scale status carries the replicas and the pods' selector; at zero the server's and the
// egress proxy's Deployments go to zero, the server is published as scaled to zero and the gateway answers a call at
// once naming the McpServer; scaled up again, both come back and the entry is published as running once a replica
// is available (written by the test: no Deployment controller runs).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, AutoscalingV2Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { anonymousPrincipal, buckets, kvKey, PunkError, requestGateway, type Bus, type KvStore } from '@punk/lib';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const group = { group: 'mcp.punk.dev', version: 'v1alpha1', plural: 'mcpservers' };

describe('the scale subresource of an McpServer', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let apps: AppsV1Api;
  let bus: Bus;
  let servers: KvStore;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('scale', { operator: false });
    ({ crs, ns } = fixture);
    ({ bus } = await fixture.startServices());
    servers = await bus.keyValue(buckets.mcpServers);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    await fixture.startOperator();
  });
  after(() => fixture?.stop());

  const scale = (name: string, replicas: number) =>
    crs.api.patchNamespacedCustomObjectScale({ ...group, namespace: ns, name, body: { spec: { replicas } } }, merge);
  const replicasOf = async (name: string) => (await apps.readNamespacedDeployment({ name, namespace: ns })).spec?.replicas;

  it('scales to zero with the egress proxy, is published as scaled to zero, and the gateway refuses calls at once', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'search' },
      spec: {
        image: 'ghcr.io/example/search:1.0',
        command: ['search'],
        replicas: 2,
        sandbox: { egress: [{ host: 'api.example.com', ports: [443] }] },
      },
    });
    await until('both Deployments', async () => (await replicasOf('search')) === 2 && (await replicasOf('search-egress')) === 1);
    const selector = `mcp.punk.dev/server=search,app.kubernetes.io/component=mcp-server`;
    const before = await until('the scale status', async () => {
      const s = (await crs.api.getNamespacedCustomObjectScale({ ...group, namespace: ns, name: 'search' })) as {
        spec: { replicas: number };
        status: { replicas: number; selector?: string };
      };
      return s.status.selector ? s : undefined;
    });
    assert.equal(before.spec.replicas, 2);
    assert.equal(before.status.selector, selector, 'a HorizontalPodAutoscaler finds the pods by it');

    // A HorizontalPodAutoscaler may name the McpServer as its target (no HPA controller runs here to act on it).
    await fixture.plane.kubeConfig.makeApiClient(AutoscalingV2Api).createNamespacedHorizontalPodAutoscaler({
      namespace: ns,
      body: {
        metadata: { name: 'search' },
        spec: {
          scaleTargetRef: { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', name: 'search' },
          minReplicas: 1,
          maxReplicas: 4,
          metrics: [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } } }],
        },
      },
    });

    await scale('search', 0);
    assert.equal((await crs.get('mcpservers', ns, 'search')).spec.replicas, 0, 'the scale subresource writes spec.replicas');
    await until('both Deployments at zero', async () => (await replicasOf('search')) === 0 && (await replicasOf('search-egress')) === 0);
    const live = await until('Available=False ScaledToZero', async () => {
      const o = await crs.get('mcpservers', ns, 'search');
      return conditionOf(o, 'Available')?.reason === 'ScaledToZero' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Available')?.status, 'False');
    assert.equal(conditionOf(live, 'Ready')?.reason, 'ScaledToZero');
    assert.equal(conditionOf(live, 'Degraded')?.status, 'False', 'scaled to zero is not a fault');
    assert.equal(live.status.replicas, 0);
    assert.equal(live.status.selector, selector);

    const entry = await until('the entry scaled to zero', async () => {
      const e = await servers.get(kvKey(ns, 'search'));
      return (e?.value as { server: { spec: { replicas: number } } } | undefined)?.server.spec.replicas === 0 ? e : undefined;
    });
    assert.ok(entry);
    const call = () =>
      requestGateway(
        bus,
        {
          method: 'tools/call',
          tenant: ns,
          server: 'search',
          principal: anonymousPrincipal(ns),
          runId: `run-${randomUUID()}`,
          name: 'query',
          arguments: {},
        },
        30_000,
      );
    const refusal = await until('the gateway refuses the call as scaled to zero', () =>
      call().then(
        () => undefined,
        (error: unknown) => (error instanceof PunkError && error.code === 'ServerScaledToZero' ? error : undefined),
      ),
    );
    assert.equal(refusal.message, `server search is scaled to zero (McpServer ${ns}/search spec.replicas=0); scale it up to call it`);

    // Scaled up: both Deployments come back; once a replica is available the server is published as running again.
    await scale('search', 1);
    await until('both Deployments at one', async () => (await replicasOf('search')) === 1 && (await replicasOf('search-egress')) === 1);
    const deployment = await apps.readNamespacedDeployment({ name: 'search', namespace: ns });
    await apps.patchNamespacedDeploymentStatus(
      {
        name: 'search',
        namespace: ns,
        body: {
          status: {
            observedGeneration: deployment.metadata!.generation,
            replicas: 1,
            updatedReplicas: 1,
            readyReplicas: 1,
            availableReplicas: 1,
          },
        },
      },
      merge,
    );
    await until('published as running', async () => {
      const e = await servers.get(kvKey(ns, 'search'));
      return (e?.value as { server: { spec: { replicas: number } } } | undefined)?.server.spec.replicas === 1;
    });
    const up = await until('status.replicas 1', async () => {
      const o = await crs.get('mcpservers', ns, 'search');
      return o.status?.replicas === 1 ? o : undefined;
    });
    assert.equal(conditionOf(up, 'Available')?.reason, 'ReplicasAvailable');
  });
});
