// McpServers on a real kube-apiserver with the operator running against it and a nats-server of the test's own:
// children and their sandbox, roll-outs on a spec or Secret edit, owner references, status as the Deployment and
// its pods change (written by the test: no kubelet or Deployment controller runs), invalid objects Degraded while
// the others carry on, hand edits corrected, idempotent re-runs, and the PUNK_MCP_SERVERS bucket.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, NetworkingV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { buckets, kvKey, type KvStore } from '@punk/lib';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A stdio McpServer from an image. */
function stdioServer(name: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/fs-server:1.0', command: ['fs-server'], ...extra },
  };
}

describe('the operator reconciling McpServers', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let plane: ControlPlane;
  let crs: CustomResources;
  let apps: AppsV1Api;
  let core: CoreV1Api;
  let net: NetworkingV1Api;
  let servers: KvStore;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('servers');
    ({ plane, crs, ns } = fixture);
    servers = await (await fixture.nats.connect('test')).keyValue(buckets.mcpServers);
    apps = plane.kubeConfig.makeApiClient(AppsV1Api);
    core = plane.kubeConfig.makeApiClient(CoreV1Api);
    net = plane.kubeConfig.makeApiClient(NetworkingV1Api);
  });
  after(() => fixture?.stop());

  /** Writes what the Deployment controller would: the Deployment's status, Available or not. */
  async function setDeploymentAvailable(name: string, available: boolean) {
    const deployment = await apps.readNamespacedDeployment({ name, namespace: ns });
    const now = new Date();
    const status = {
      observedGeneration: deployment.metadata!.generation,
      replicas: 1,
      updatedReplicas: 1,
      readyReplicas: available ? 1 : 0,
      availableReplicas: available ? 1 : 0,
      ...(!available && { unavailableReplicas: 1 }),
      conditions: [
        {
          type: 'Available',
          status: available ? 'True' : 'False',
          reason: available ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
          message: 'written by the test',
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
        {
          type: 'Progressing',
          status: 'True',
          reason: 'NewReplicaSetAvailable',
          message: 'written by the test',
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
      ],
    };
    await apps.patchNamespacedDeploymentStatus({ name, namespace: ns, body: { status } }, merge);
  }

  it('creates the headless Service, Deployment and NetworkPolicy of a server, sandboxed and owned by it, and the shared ServiceAccount', async () => {
    const created = await crs.create('mcpservers', ns, stdioServer('files'));
    const deployment = await until('the Deployment', () => apps.readNamespacedDeployment({ name: 'files', namespace: ns }));
    const service = await core.readNamespacedService({ name: 'files', namespace: ns });
    const account = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns });
    const policy = await net.readNamespacedNetworkPolicy({ name: 'files', namespace: ns });
    assert.equal(service.spec?.clusterIP, 'None', 'headless by default');
    assert.deepEqual(account.metadata?.ownerReferences ?? [], [], "the namespace's shared account is owned by no server");
    assert.equal(account.metadata?.labels?.['app.kubernetes.io/managed-by'], 'punk-operator');
    assert.equal(account.automountServiceAccountToken, false);
    assert.equal(deployment.spec!.template.spec!.serviceAccountName, 'punk-mcp-server');
    for (const child of [deployment, service, policy]) {
      const owner = child.metadata?.ownerReferences?.find((ref) => ref.kind === 'McpServer');
      assert.equal(owner?.uid, created.metadata.uid, `${child.kind} is owned by the McpServer`);
      assert.equal(owner?.controller, true);
      assert.ok(
        child.metadata?.managedFields?.some((f) => f.manager === 'punk-operator' && f.operation === 'Apply'),
        `${child.kind} is applied by punk-operator`,
      );
    }
    const pod = deployment.spec!.template.spec!;
    assert.equal(pod.automountServiceAccountToken, false);
    assert.equal(pod.securityContext?.runAsNonRoot, true);
    assert.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault');
    const server = pod.containers.find((c) => c.name === 'server')!;
    assert.equal(server.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(server.securityContext?.allowPrivilegeEscalation, false);
    assert.deepEqual(server.securityContext?.capabilities?.drop, ['ALL']);
    assert.ok(server.resources?.limits?.memory, 'the server container has a memory limit');
    assert.ok(policy.spec?.policyTypes?.includes('Egress') && policy.spec.policyTypes.includes('Ingress'));
    assert.ok(
      policy.spec?.ingress?.[0]?._from?.some(
        (peer) => peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'] === 'punk-system',
      ),
      'only the gateway namespace is admitted',
    );

    const status = await until('status with observedGeneration', async () => {
      const live = await crs.get('mcpservers', ns, 'files');
      return live.status?.observedGeneration === live.metadata.generation ? live : undefined;
    });
    assert.match(String(status.status.upstreamUrl), /^http:\/\/files\./);
    assert.equal(status.status.endpoint, `/servers/${ns}/files/mcp`, "no PUNK_PUBLIC_URL: the path on Punk's endpoint");
    assert.equal(conditionOf(status, 'Ready')?.status, 'False', 'not Ready before its Deployment is Available');
    assert.equal(conditionOf(status, 'Progressing')?.status, 'True', 'the Deployment controller has not seen the Deployment yet');
    assert.equal(await servers.get(kvKey(ns, 'files')), undefined, 'not published before its Deployment is Available');
  });

  it('publishes a pod server once its Deployment is Available; a crash-looping pod makes it Degraded, with an Event', async () => {
    await setDeploymentAvailable('files', true);
    const entry = await until('the bucket entry', () => servers.get(kvKey(ns, 'files')));
    const value = entry.value as { server: { metadata: { name: string }; spec: { url: string } }; generation: number };
    assert.equal(value.server.metadata.name, 'files');
    assert.match(value.server.spec.url, /^http:\/\/files\./, 'served as the url of its Service');
    const available = await until('Available=True', async () => {
      const live = await crs.get('mcpservers', ns, 'files');
      return conditionOf(live, 'Available')?.status === 'True' ? live : undefined;
    });
    assert.equal(conditionOf(available, 'Progressing')?.reason, 'RolloutComplete');
    // No gateway serves this test's bus: Ready waits for a tool listing, and the status says why.
    assert.equal(conditionOf(available, 'Ready')?.status, 'Unknown');
    assert.equal(conditionOf(available, 'Ready')?.reason, 'ListingPending');
    assert.match(String(available.status.lastError), /gateway could not list the tools/);

    // A pod of the Deployment, as the kubelet would report it: its container restarting again and again.
    const deployment = await apps.readNamespacedDeployment({ name: 'files', namespace: ns });
    const template = deployment.spec!.template;
    await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'files-abc12', labels: template.metadata!.labels! }, spec: template.spec! },
    });
    const waiting = { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 40s restarting failed container=server' } };
    const statuses = template.spec!.containers.map((c) => ({
      name: c.name,
      image: c.image!,
      imageID: '',
      ready: false,
      restartCount: 4,
      state: waiting,
    }));
    await core.patchNamespacedPodStatus(
      { name: 'files-abc12', namespace: ns, body: { status: { phase: 'Running', containerStatuses: statuses } } },
      merge,
    );
    await setDeploymentAvailable('files', false);
    const degraded = await until('Degraded=True', async () => {
      const live = await crs.get('mcpservers', ns, 'files');
      return conditionOf(live, 'Degraded')?.status === 'True' && conditionOf(live, 'Available')?.status === 'False' ? live : undefined;
    });
    assert.equal(conditionOf(degraded, 'Degraded')?.reason, 'CrashLoopBackOff');
    assert.equal(conditionOf(degraded, 'Ready')?.status, 'False');
    assert.equal(conditionOf(degraded, 'Available')?.status, 'False');
    const events = await until('an Event of the transition', async () => {
      const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=files' });
      return list.items.some((e) => e.reason === 'CrashLoopBackOff') ? list.items : undefined;
    });
    assert.ok(events.some((e) => e.type === 'Warning' && e.reason === 'CrashLoopBackOff'));

    await core.deleteNamespacedPod({ name: 'files-abc12', namespace: ns });
    await setDeploymentAvailable('files', true);
    await until('Available and not Degraded again', async () => {
      const live = await crs.get('mcpservers', ns, 'files');
      return conditionOf(live, 'Available')?.status === 'True' && conditionOf(live, 'Degraded')?.status === 'False';
    });
  });

  it('rolls out a spec edit, and a Secret edit changes the pod template checksum annotation', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'fs-token' }, stringData: { token: 'one' } } });
    await crs.create(
      'mcpservers',
      ns,
      stdioServer('tokened', { env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'fs-token', key: 'token' } } }] }),
    );
    const annotation = 'mcp.punk.dev/secret-checksum';
    const first = await until('the Deployment', () => apps.readNamespacedDeployment({ name: 'tokened', namespace: ns }));
    const checksum = first.spec!.template.metadata!.annotations![annotation];
    assert.ok(checksum);
    const env = first.spec!.template.spec!.containers.find((c) => c.name === 'server')!.env!.find((e) => e.name === 'TOKEN');
    assert.deepEqual({ ...env?.valueFrom?.secretKeyRef }, { name: 'fs-token', key: 'token' });

    await core.patchNamespacedSecret({ name: 'fs-token', namespace: ns, body: { stringData: { token: 'two' } } }, merge);
    const rolled = await until('a new checksum', async () => {
      const d = await apps.readNamespacedDeployment({ name: 'tokened', namespace: ns });
      const now = d.spec!.template.metadata!.annotations![annotation];
      return now !== checksum ? d : undefined;
    });
    assert.ok(rolled.metadata!.generation! > first.metadata!.generation!, 'the Deployment has a new generation to roll out');

    await crs.patchSpec('mcpservers', ns, 'tokened', { image: 'ghcr.io/example/fs-server:2.0' });
    await until('the new image in the pod template', async () => {
      const d = await apps.readNamespacedDeployment({ name: 'tokened', namespace: ns });
      return d.spec!.template.spec!.containers.find((c) => c.name === 'server')!.image === 'ghcr.io/example/fs-server:2.0';
    });
  });

  it('corrects a hand edit of an owned field, and a re-run changes nothing', async () => {
    await until('the Deployment', () => apps.readNamespacedDeployment({ name: 'files', namespace: ns }));
    await apps.patchNamespacedDeployment({ name: 'files', namespace: ns, body: { spec: { replicas: 5 } } }, merge);
    await until(
      'replicas put back to 1',
      async () => (await apps.readNamespacedDeployment({ name: 'files', namespace: ns })).spec!.replicas === 1,
    );

    // Settled: another reconcile (queued by a label on the McpServer) leaves every child's resourceVersion alone.
    const versions = async () => {
      const d = await apps.readNamespacedDeployment({ name: 'files', namespace: ns });
      const s = await core.readNamespacedService({ name: 'files', namespace: ns });
      const a = await core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns });
      const p = await net.readNamespacedNetworkPolicy({ name: 'files', namespace: ns });
      return [d, s, a, p].map((o) => o.metadata!.resourceVersion);
    };
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const before = await versions();
    const statusBefore = (await crs.get('mcpservers', ns, 'files')).status;
    await crs.api.patchNamespacedCustomObject(
      {
        group: 'mcp.punk.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'mcpservers',
        name: 'files',
        body: { metadata: { labels: { touched: 'yes' } } },
      },
      merge,
    );
    await until(
      'the labelled server is reconciled',
      async () =>
        (await servers.get(kvKey(ns, 'files')))?.value && (await crs.get('mcpservers', ns, 'files')).metadata.labels?.touched === 'yes',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(await versions(), before);
    assert.deepEqual((await crs.get('mcpservers', ns, 'files')).status, statusBefore, 'the status is not rewritten');
  });

  it('makes an egress proxy for host entries and prunes it when they go away', async () => {
    await crs.create('mcpservers', ns, stdioServer('fetcher', { sandbox: { egress: [{ host: 'api.github.com', ports: [443] }] } }));
    const proxy = await until(
      'the egress proxy Deployment',
      async () =>
        (
          await apps.listNamespacedDeployment({
            namespace: ns,
            labelSelector: 'mcp.punk.dev/server=fetcher,app.kubernetes.io/component=egress-proxy',
          })
        ).items[0],
    );
    await crs.patchSpec('mcpservers', ns, 'fetcher', { sandbox: { egress: [{ cidr: '10.20.0.0/16', ports: [5432] }] } });
    await until(
      'the egress proxy pruned',
      async () =>
        (
          await apps.listNamespacedDeployment({
            namespace: ns,
            labelSelector: 'mcp.punk.dev/server=fetcher,app.kubernetes.io/component=egress-proxy',
          })
        ).items.length === 0,
    );
    assert.ok(proxy.metadata?.name);
    await assert.rejects(
      apps.readNamespacedDeployment({ name: proxy.metadata.name, namespace: ns }),
      (e: { code?: number }) => e.code === 404,
    );
    assert.ok(await apps.readNamespacedDeployment({ name: 'fetcher', namespace: ns }), 'the server Deployment stays');
  });

  it('marks a server with a missing Secret or an unrunnable spec Degraded, naming the field, and reconciles the others', async () => {
    await crs.create(
      'mcpservers',
      ns,
      stdioServer('no-secret', {
        env: [
          { name: 'A', value: 'x' },
          { name: 'KEY', valueFrom: { secretKeyRef: { name: 'absent', key: 'k' } } },
        ],
      }),
    );
    await crs.create('mcpservers', ns, stdioServer('port-clash', { port: 9000 }));
    await crs.create('mcpservers', ns, stdioServer('healthy'));
    for (const [name, reason, field] of [
      ['no-secret', 'SecretMissing', /spec\.env\[1\]\.valueFrom\.secretKeyRef\.name/],
      ['port-clash', 'InvalidSpec', /spec\.port/],
    ] as const) {
      const live = await until(`${name} Degraded`, async () => {
        const o = await crs.get('mcpservers', ns, name);
        return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
      });
      assert.equal(conditionOf(live, 'Degraded')?.reason, reason);
      assert.match(conditionOf(live, 'Degraded')!.message, field);
      assert.equal(conditionOf(live, 'Ready')?.status, 'False');
      await assert.rejects(
        apps.readNamespacedDeployment({ name, namespace: ns }),
        (e: { code?: number }) => e.code === 404,
        'nothing applied for a new object',
      );
    }
    await until('the healthy server has its Deployment', () => apps.readNamespacedDeployment({ name: 'healthy', namespace: ns }));

    // The Secret appears: the server gets its children without anyone touching it.
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'absent' }, stringData: { k: 'v' } } });
    await until('no-secret gets its Deployment', () => apps.readNamespacedDeployment({ name: 'no-secret', namespace: ns }));
  });

  it('reports a key missing from an existing Secret and a malformed image on the McpServer, before any kubelet', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'api-keys' }, stringData: { read: 'r', write: 'w' } } });
    await crs.create(
      'mcpservers',
      ns,
      stdioServer('wrong-key', { env: [{ name: 'KEY', valueFrom: { secretKeyRef: { name: 'api-keys', key: 'admin' } } }] }),
    );
    await crs.create('mcpservers', ns, { ...stdioServer('bad-image'), spec: { image: 'ghcr.io/Example/Server:1.0', command: ['s'] } });
    for (const [name, reason, message] of [
      ['wrong-key', 'SecretKeyMissing', 'spec.env[0].valueFrom.secretKeyRef.key: Secret api-keys has no key admin (it has read, write)'],
      [
        'bad-image',
        'InvalidSpec',
        'spec.image: "ghcr.io/Example/Server:1.0" is not a valid image reference (the repository path must be lower case): use [registry[:port]/]repository[:tag][@sha256:<digest>], e.g. ghcr.io/example/server:1.0',
      ],
    ] as const) {
      const live = await until(`${name} Degraded`, async () => {
        const o = await crs.get('mcpservers', ns, name);
        return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
      });
      assert.equal(conditionOf(live, 'Degraded')?.reason, reason);
      assert.equal(conditionOf(live, 'Degraded')?.message, message);
      assert.equal(conditionOf(live, 'Available')?.status, 'False');
      await assert.rejects(apps.readNamespacedDeployment({ name, namespace: ns }), (e: { code?: number }) => e.code === 404);
    }
    // The key added to the Secret: the server gets its Deployment without anyone touching it.
    await core.patchNamespacedSecret(
      { name: 'api-keys', namespace: ns, body: { stringData: { admin: 'a' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await until('wrong-key gets its Deployment', () => apps.readNamespacedDeployment({ name: 'wrong-key', namespace: ns }));
  });

  it('never calls a url server it cannot publish Available: Degraded, Available=False and Ready=False agree', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'bad-header' },
      spec: {
        url: 'https://mcp.example.com/mcp',
        headers: [{ name: 'Authorization', valueFrom: { secretKeyRef: { name: 'absent', key: 'token' } } }],
      },
    });
    const live = await until('bad-header Degraded', async () => {
      const o = await crs.get('mcpservers', ns, 'bad-header');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    const reason = conditionOf(live, 'Degraded')!.reason;
    assert.equal(conditionOf(live, 'Available')?.status, 'False', 'not published, so not available');
    assert.equal(conditionOf(live, 'Available')?.reason, reason);
    assert.match(conditionOf(live, 'Available')!.message, /^the server is not published to the gateways: spec\.headers/);
    assert.equal(conditionOf(live, 'Ready')?.status, 'False');
    assert.equal(await servers.get(kvKey(ns, 'bad-header')), undefined, 'and nothing is published');
    await crs.delete('mcpservers', ns, 'bad-header');
  });

  it('publishes a url server at once, and removes the entry when the McpServer is deleted', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'remote' },
      spec: { url: 'https://mcp.example.com/mcp' },
    });
    const entry = await until('the url server entry', () => servers.get(kvKey(ns, 'remote')));
    assert.equal((entry.value as { server: { spec: { url: string } } }).server.spec.url, 'https://mcp.example.com/mcp');
    const live = await until('its status', async () => {
      const o = await crs.get('mcpservers', ns, 'remote');
      return o.status?.upstreamUrl ? o : undefined;
    });
    assert.equal(live.status.upstreamUrl, 'https://mcp.example.com/mcp');
    assert.match(
      String(live.status.lastError),
      /gateway could not list the tools/,
      'no gateway serves this test: the tool listing failure is reported',
    );
    assert.equal(conditionOf(live, 'Available')?.status, 'True', 'a url server is available at once');

    await crs.delete('mcpservers', ns, 'remote');
    await crs.delete('mcpservers', ns, 'files');
    await until(
      'the entries removed',
      async () => (await servers.get(kvKey(ns, 'remote'))) === undefined && (await servers.get(kvKey(ns, 'files'))) === undefined,
    );
  });
});
