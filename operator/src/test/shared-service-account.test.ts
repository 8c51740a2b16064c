// The ServiceAccount McpServer pods run as, on a real kube-apiserver with the operator running: one per namespace
// (punk-mcp-server, without a token, labelled and owned by no McpServer), made once for all the namespace's pod
// servers, kept while any of them is left (deleting one server does not take it from the others), deleted with the
// last; a url server needs none. The ServiceAccount an older operator made per server is pruned.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { createNamespace, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

function server(name: string, spec: Record<string, unknown> = { image: 'ghcr.io/example/s:1', command: ['s'] }) {
  return { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name }, spec };
}

describe("a namespace's shared ServiceAccount", { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let ns: string;
  let older: string;

  before(async () => {
    fixture = await startOperatorFixture('account', { operator: false });
    ({ crs, ns } = fixture);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    // What an older operator left: McpServer old, settled, with a ServiceAccount of its own.
    older = await createNamespace(fixture.plane.kubeConfig, 'account-older');
    const created = await crs.create('mcpservers', older, server('old'));
    await core.createNamespacedServiceAccount({
      namespace: older,
      body: {
        metadata: {
          name: 'old',
          labels: { 'app.kubernetes.io/managed-by': 'punk-operator', 'mcp.punk.dev/server': 'old' },
          ownerReferences: [
            { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', name: 'old', uid: created.metadata.uid, controller: true },
          ],
        },
        automountServiceAccountToken: false,
      },
    });
    await fixture.startOperator();
  });
  after(() => fixture?.stop());

  const accounts = async () =>
    (await core.listNamespacedServiceAccount({ namespace: ns })).items.filter((a) => a.metadata?.name !== 'default');

  it('is one for every pod server of the namespace, kept while one is left and deleted with the last', async () => {
    await crs.create('mcpservers', ns, server('remote', { url: 'https://mcp.example.com/mcp' }));
    await until('remote published', async () => (await crs.get('mcpservers', ns, 'remote')).status?.observedGeneration === 1);
    assert.deepEqual(await accounts(), [], 'a url server runs no pod and needs no ServiceAccount');

    for (const name of ['a', 'b', 'c']) await crs.create('mcpservers', ns, server(name));
    for (const name of ['a', 'b', 'c']) {
      const deployment = await until(`Deployment ${name}`, () => apps.readNamespacedDeployment({ name, namespace: ns }));
      assert.equal(deployment.spec!.template.spec!.serviceAccountName, 'punk-mcp-server');
    }
    const [account, ...others] = await accounts();
    assert.deepEqual(others, [], 'one ServiceAccount, not one per server');
    assert.equal(account!.metadata!.name, 'punk-mcp-server');
    assert.equal(account!.automountServiceAccountToken, false);
    assert.equal(account!.metadata!.ownerReferences, undefined, 'owned by no server, so deleting one leaves it to the others');
    assert.equal(account!.metadata!.labels?.['app.kubernetes.io/managed-by'], 'punk-operator');

    // No kube-controller-manager runs here: the McpServers go at once; the operator's reconcile of each deletion decides.
    await crs.api.deleteNamespacedCustomObject({
      group: 'mcp.punk.dev',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'mcpservers',
      name: 'a',
    });
    await until('a gone from the bucket', async () => !(await crs.list('mcpservers', ns)).some((o) => o.metadata.name === 'a'));
    await new Promise((resolve) => setTimeout(resolve, 2_000)); // the reconcile of the deletion
    const kept = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns });
    assert.equal(kept.metadata!.uid, account!.metadata!.uid, 'still there, unchanged, for b and c');

    for (const name of ['b', 'c'])
      await crs.api.deleteNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace: ns, plural: 'mcpservers', name });
    await until('the ServiceAccount deleted with the last pod server', async () => (await accounts()).length === 0 || undefined);
    assert.ok(
      (await crs.list('mcpservers', ns)).some((o) => o.metadata.name === 'remote'),
      'the url server left does not keep it',
    );
  });

  it('prunes the ServiceAccount an older operator made for a server, whose pods now run as the shared one', async () => {
    const deployment = await until('Deployment old', () => apps.readNamespacedDeployment({ name: 'old', namespace: older }));
    assert.equal(deployment.spec!.template.spec!.serviceAccountName, 'punk-mcp-server');
    await until(
      'ServiceAccount old pruned',
      async () =>
        (await core.readNamespacedServiceAccount({ name: 'old', namespace: older }).then(
          () => false,
          (e: unknown) => (e as { code?: number }).code === 404,
        )) || undefined,
    );
    await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: older });
  });
});
