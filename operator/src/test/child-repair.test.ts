// Every child the operator makes is watched (as controller-runtime's Owns() does), on a real kube-apiserver with the
// operator running against it and a resync far away (10 minutes), so what puts a child back is its watch: each kind of
// child deleted, and edited in a field the operator owns (an allow-all egress rule appended to a NetworkPolicy, a
// Service's selector, the shared ServiceAccount's token), is repaired, the namespace's shared ServiceAccount (owned by
// no server) included; so is the server whose namespace held a user's ServiceAccount of the shared name until its
// owner removed it. The bound of each wait is a deadline for waiting (30 s), never an assertion about speed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, NetworkingV1Api, PatchStrategy, setHeaderOptions, type V1NetworkPolicy } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, createNamespace, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** How long a repair may take before the test fails: generous, for a loaded 2-core machine. */
const REPAIR_MS = 30_000;

/** A stdio McpServer from an image whose egress names a host, so it has an egress proxy too. */
function proxiedServer(name: string) {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: {
      image: 'ghcr.io/example/fs-server:1.0',
      command: ['fs-server'],
      sandbox: { egress: [{ host: 'api.example.com', ports: [443] }] },
    },
  };
}

/** Whether a NetworkPolicy has an egress rule that allows everything (no `to`, no `ports`). */
function allowsAllEgress(policy: V1NetworkPolicy): boolean {
  return (policy.spec?.egress ?? []).some((rule) => !rule.to?.length && !rule.ports?.length);
}

describe('the operator repairing the children it owns', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let apps: AppsV1Api;
  let core: CoreV1Api;
  let net: NetworkingV1Api;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('repair', { operator: { resyncMs: 600_000 } });
    ({ crs, ns } = fixture);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
    net = fixture.plane.kubeConfig.makeApiClient(NetworkingV1Api);
    await crs.create('mcpservers', ns, proxiedServer('fixme'));
    await until('the egress proxy NetworkPolicy', () => net.readNamespacedNetworkPolicy({ name: 'fixme-egress', namespace: ns }));
  });
  after(() => fixture?.stop());

  /** Each child of server fixme: how to read it and delete it (the clients are made in before()). */
  const children = [
    {
      what: 'Service fixme',
      read: () => core.readNamespacedService({ name: 'fixme', namespace: ns }),
      remove: () => core.deleteNamespacedService({ name: 'fixme', namespace: ns }),
    },
    {
      what: 'Deployment fixme',
      read: () => apps.readNamespacedDeployment({ name: 'fixme', namespace: ns }),
      remove: () => apps.deleteNamespacedDeployment({ name: 'fixme', namespace: ns }),
    },
    {
      what: 'NetworkPolicy fixme',
      read: () => net.readNamespacedNetworkPolicy({ name: 'fixme', namespace: ns }),
      remove: () => net.deleteNamespacedNetworkPolicy({ name: 'fixme', namespace: ns }),
    },
    {
      what: 'Deployment fixme-egress',
      read: () => apps.readNamespacedDeployment({ name: 'fixme-egress', namespace: ns }),
      remove: () => apps.deleteNamespacedDeployment({ name: 'fixme-egress', namespace: ns }),
    },
    {
      what: 'Service fixme-egress',
      read: () => core.readNamespacedService({ name: 'fixme-egress', namespace: ns }),
      remove: () => core.deleteNamespacedService({ name: 'fixme-egress', namespace: ns }),
    },
    {
      what: 'NetworkPolicy fixme-egress',
      read: () => net.readNamespacedNetworkPolicy({ name: 'fixme-egress', namespace: ns }),
      remove: () => net.deleteNamespacedNetworkPolicy({ name: 'fixme-egress', namespace: ns }),
    },
  ];

  for (const child of children) {
    it(`puts back ${child.what} when it is deleted`, async () => {
      const before = await child.read();
      await child.remove();
      const back = await until(
        `${child.what} recreated`,
        async () => {
          const live = await child.read().catch(() => undefined);
          return live && live.metadata!.uid !== before.metadata!.uid ? live : undefined;
        },
        REPAIR_MS,
      );
      assert.ok(back.metadata!.ownerReferences?.some((ref) => ref.kind === 'McpServer' && ref.name === 'fixme' && ref.controller));
    });
  }

  it("puts back the namespace's shared ServiceAccount when it is deleted", async () => {
    const before = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns });
    await core.deleteNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns });
    const back = await until(
      'punk-mcp-server recreated',
      async () => {
        const live = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns }).catch(() => undefined);
        return live && live.metadata!.uid !== before.metadata!.uid ? live : undefined;
      },
      REPAIR_MS,
    );
    assert.equal(back.automountServiceAccountToken, false);
    assert.equal(back.metadata?.labels?.['app.kubernetes.io/managed-by'], 'punk-operator');
  });

  for (const name of ['fixme', 'fixme-egress']) {
    it(`removes an allow-all egress rule appended to NetworkPolicy ${name}`, async () => {
      const patched = await net.patchNamespacedNetworkPolicy(
        { name, namespace: ns, body: [{ op: 'add', path: '/spec/egress/-', value: {} }] },
        jsonPatch,
      );
      assert.ok(allowsAllEgress(patched), 'the edit took');
      const repaired = await until(
        `NetworkPolicy ${name} without the allow-all rule`,
        async () => {
          const live = await net.readNamespacedNetworkPolicy({ name, namespace: ns });
          return !allowsAllEgress(live) && live;
        },
        REPAIR_MS,
      );
      assert.ok((repaired.spec?.egress ?? []).length > 0, 'the declared egress rules are kept');
    });
  }

  it("puts back a Service's selector and the shared ServiceAccount's token setting", async () => {
    await core.patchNamespacedService(
      {
        name: 'fixme',
        namespace: ns,
        body: { spec: { selector: { 'mcp.punk.dev/server': 'fixme', 'app.kubernetes.io/component': 'other' } } },
      },
      merge,
    );
    await core.patchNamespacedServiceAccount(
      { name: 'punk-mcp-server', namespace: ns, body: { automountServiceAccountToken: true } },
      merge,
    );
    await until(
      'the selector put back',
      async () =>
        (await core.readNamespacedService({ name: 'fixme', namespace: ns })).spec?.selector?.['app.kubernetes.io/component'] ===
        'mcp-server',
      REPAIR_MS,
    );
    await until(
      'automountServiceAccountToken false again',
      async () =>
        (await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns })).automountServiceAccountToken === false,
      REPAIR_MS,
    );
  });

  it("gives a server its children soon after a user's ServiceAccount of the shared name is deleted by its owner", async () => {
    const other = await createNamespace(fixture.plane.kubeConfig, 'repair-taken');
    await core.createNamespacedServiceAccount({ namespace: other, body: { metadata: { name: 'punk-mcp-server' } } });
    await crs.create('mcpservers', other, {
      ...proxiedServer('taken'),
      spec: { image: 'ghcr.io/example/fs-server:1.0', command: ['fs-server'] },
    });
    const degraded = await until(
      'taken Degraded ChildConflict',
      async () => {
        const condition = conditionOf(await crs.get('mcpservers', other, 'taken'), 'Degraded');
        return condition?.reason === 'ChildConflict' && condition;
      },
      REPAIR_MS,
    );
    assert.match(degraded.message, /ServiceAccount .*\/punk-mcp-server exists and is not managed by the operator .*delete it/);
    await assert.rejects(apps.readNamespacedDeployment({ name: 'taken', namespace: other }), 'nothing applied meanwhile');
    await core.deleteNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: other });
    const account = await until(
      'the ServiceAccount the operator makes',
      async () => {
        const live = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: other }).catch(() => undefined);
        return live?.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'punk-operator' && live;
      },
      REPAIR_MS,
    );
    assert.equal(account.automountServiceAccountToken, false);
    await until('its Deployment', () => apps.readNamespacedDeployment({ name: 'taken', namespace: other }), REPAIR_MS);
  });
});
