// The Service of an McpServer on a real kube-apiserver with the operator running: headless (clusterIP None: no cluster
// IP to allocate) unless spec.service.clusterIP is true, on the port the server's container listens on (a headless
// Service maps no port, so the gateway's URL names the pods' own); a change of that setting replaces the Service (a
// cluster IP cannot change once set), and so does a Service an older operator made with a cluster IP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Service } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const IPV4 = /^\d+\.\d+\.\d+\.\d+$/;

function server(name: string, spec: Record<string, unknown> = {}) {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/s:1', command: ['s'], ...spec },
  };
}

describe("an McpServer's Service", { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let ns: string;
  let legacy: V1Service;

  before(async () => {
    fixture = await startOperatorFixture('service', { operator: false });
    ({ crs, ns } = fixture);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    // The Service an older operator made: a cluster IP, controlled by the McpServer, without the cluster-ip annotation.
    const created = await crs.create('mcpservers', ns, server('legacy'));
    legacy = await core.createNamespacedService({
      namespace: ns,
      body: {
        metadata: {
          name: 'legacy',
          labels: { 'app.kubernetes.io/managed-by': 'punk-operator', 'mcp.punk.dev/server': 'legacy' },
          ownerReferences: [
            { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', name: 'legacy', uid: created.metadata.uid, controller: true },
          ],
        },
        spec: { type: 'ClusterIP', selector: { 'mcp.punk.dev/server': 'legacy' }, ports: [{ name: 'mcp', port: 8080 }] },
      },
    });
    assert.match(legacy.spec?.clusterIP ?? '', IPV4, 'the older Service has a cluster IP');
    await fixture.startOperator();
  });
  after(() => fixture?.stop());

  /** The Service `name` once `check` holds for it. */
  const serviceWhen = (name: string, what: string, check: (service: V1Service) => boolean) =>
    until(`Service ${name} ${what}`, async () => {
      const live = await core.readNamespacedService({ name, namespace: ns }).catch(() => undefined);
      return live && check(live) ? live : undefined;
    });

  it('is headless by default, on the port the container listens on, which the gateway URL names', async () => {
    await crs.create('mcpservers', ns, server('plain'));
    await crs.create('mcpservers', ns, server('web', { transport: 'streamable-http', command: ['web'], port: 9000 }));
    for (const [name, port] of [
      ['plain', 8080],
      ['web', 9000],
    ] as const) {
      const service = await serviceWhen(name, 'made', () => true);
      assert.equal(service.spec?.clusterIP, 'None', `${name}: headless, no cluster IP allocated`);
      assert.equal(service.metadata?.annotations?.['mcp.punk.dev/cluster-ip'], 'false');
      assert.deepEqual(
        service.spec?.ports?.map((p) => [p.port, p.targetPort]),
        [[port, 'mcp']],
      );
      const deployment = await apps.readNamespacedDeployment({ name, namespace: ns });
      const containerPort = deployment.spec!.template.spec!.containers.find((c) => c.name === 'server')!.ports!;
      assert.deepEqual(
        containerPort.map((p) => [p.name, p.containerPort]),
        [['mcp', port]],
        'the Service port is the container port: a headless Service does no port mapping',
      );
      const status = await until(`${name}'s upstreamUrl`, async () => (await crs.get('mcpservers', ns, name)).status?.upstreamUrl);
      assert.equal(status, `http://${name}.${ns}.svc.cluster.local:${port}/mcp`);
    }
  });

  it('has a cluster IP when spec.service.clusterIP is true, and is replaced when that changes, either way', async () => {
    await crs.create('mcpservers', ns, server('ip', { service: { clusterIP: true } }));
    const allocated = await serviceWhen('ip', 'made', () => true);
    assert.match(allocated.spec?.clusterIP ?? '', IPV4);
    assert.equal(allocated.metadata?.annotations?.['mcp.punk.dev/cluster-ip'], 'true');

    await crs.patchSpec('mcpservers', ns, 'ip', { service: { clusterIP: false } });
    const headless = await serviceWhen('ip', 'headless', (s) => s.spec?.clusterIP === 'None');
    assert.notEqual(headless.metadata?.uid, allocated.metadata?.uid, 'a new Service: a cluster IP cannot change once set');

    await crs.patchSpec('mcpservers', ns, 'ip', { service: { clusterIP: true } });
    const again = await serviceWhen('ip', 'with a cluster IP again', (s) => IPV4.test(s.spec?.clusterIP ?? ''));
    assert.equal(again.metadata?.annotations?.['mcp.punk.dev/cluster-ip'], 'true');
    assert.deepEqual(
      again.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.controller]),
      [['McpServer', 'ip', true]],
    );
  });

  it("replaces an older operator's Service with a cluster IP by a headless one", async () => {
    const replaced = await serviceWhen('legacy', 'headless', (s) => s.spec?.clusterIP === 'None');
    assert.notEqual(replaced.metadata?.uid, legacy.metadata?.uid);
    assert.equal(replaced.metadata?.annotations?.['mcp.punk.dev/cluster-ip'], 'false');
  });
});
