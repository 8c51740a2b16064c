// spec.idle on a real kube-apiserver, with the operator and Punk's real gateway on a nats-server of the test's own
// (the test plays the kubelet and the Deployment controller by writing the Deployment's status): an McpServer unused
// for its scaleToZeroAfter is scaled to zero through its scale subresource, its replicas remembered in an annotation,
// with a Slept Event and a server.slept ledger event; a wake request (what a gateway holding a call asks) scales it
// back to those replicas with a Woken Event and a server.woken ledger event, and once its pods are ready it is
// published running again. A call in flight (its activity entry) holds a server up.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import {
  buckets,
  kvKey,
  ledgerEventSchema,
  PunkError,
  streams,
  subjects,
  WAKE_REPLICAS_ANNOTATION,
  type Bus,
  type KvStore,
  type ServerActivity,
} from '@punk/lib';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('an McpServer with spec.idle', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let apps: AppsV1Api;
  let core: CoreV1Api;
  let bus: Bus;
  let servers: KvStore;
  let activity: KvStore;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('idle', { operator: false });
    ({ crs, ns } = fixture);
    ({ bus } = await fixture.startServices());
    servers = await bus.keyValue(buckets.mcpServers);
    activity = await bus.keyValue(buckets.serverActivity);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
    await fixture.startOperator({ idleCheckMs: 250 });
  });
  after(() => fixture?.stop());

  /** Plays the kubelet and the Deployment controller: the Deployment's pods are all `replicas` ready. */
  const markReady = async (name: string, replicas: number) => {
    const deployment = await apps.readNamespacedDeployment({ name, namespace: ns });
    const status = {
      observedGeneration: deployment.metadata!.generation,
      replicas,
      updatedReplicas: replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
    };
    await apps.patchNamespacedDeploymentStatus({ name, namespace: ns, body: { status } }, merge);
  };
  const publishedReplicas = async (name: string) =>
    ((await servers.get(kvKey(ns, name)))?.value as { server: { spec: { replicas: number } } } | undefined)?.server.spec.replicas;
  const eventOf = (name: string, reason: string) =>
    until(`a ${reason} Event`, async () => {
      const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${name}` });
      return list.items.find((e) => e.reason === reason);
    });
  const ledgerOf = (name: string, type: string) =>
    until(`a ${type} ledger event`, async () => {
      const messages = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0 });
      return messages.map((m) => ledgerEventSchema.parse(m.data)).find((e) => e.type === type && e.tenant === ns && e.server === name);
    });
  const server = (name: string, replicas: number) => ({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/search:1.0', command: ['search'], replicas, idle: { scaleToZeroAfter: '1s', wakeTimeout: '30s' } },
  });

  it('is scaled to zero once idle, remembering its replicas, and woken back to them on request', async () => {
    await crs.create('mcpservers', ns, server('search', 2));
    await until(
      'the Deployment',
      async () => (await apps.readNamespacedDeployment({ name: 'search', namespace: ns })).spec?.replicas === 2,
    );
    await markReady('search', 2);

    const asleep = await until('scaled to zero by spec.idle', async () => {
      const o = await crs.get('mcpservers', ns, 'search');
      return o.spec.replicas === 0 ? o : undefined;
    });
    assert.equal(asleep.metadata.annotations?.[WAKE_REPLICAS_ANNOTATION], '2', 'the replicas to wake back to');
    const slept = await eventOf('search', 'Slept');
    assert.equal(slept.type, 'Normal');
    assert.match(slept.message ?? '', /spec\.idle\.scaleToZeroAfter 1s\): scaled to zero; the first call wakes it to 2 replicas/);
    assert.equal((await ledgerOf('search', 'server.slept')).data['replicas'], 2);
    await until('published at zero, with spec.idle', async () => (await publishedReplicas('search')) === 0);
    await markReady('search', 0);

    // Two gateway replicas ask at once: one wake.
    const [first, second] = await Promise.all([
      bus.request(subjects.serverWake, { namespace: ns, name: 'search' }, { timeoutMs: 10_000 }),
      bus.request(subjects.serverWake, { namespace: ns, name: 'search' }, { timeoutMs: 10_000 }),
    ]);
    assert.equal((first as { replicas: number }).replicas, 2);
    assert.equal((second as { replicas: number }).replicas, 2);
    const awake = await crs.get('mcpservers', ns, 'search');
    assert.equal(awake.spec.replicas, 2, 'scaled back through the scale subresource');
    assert.equal(awake.metadata.annotations?.[WAKE_REPLICAS_ANNOTATION], undefined, 'the annotation is dropped');
    assert.equal((await eventOf('search', 'Woken')).type, 'Normal');
    assert.equal((await ledgerOf('search', 'server.woken')).data['replicas'], 2);
    const messages = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0 });
    const woken = messages.map((m) => ledgerEventSchema.parse(m.data)).filter((e) => e.type === 'server.woken' && e.tenant === ns);
    assert.equal(woken.length, 1, 'concurrent wake requests make one wake');

    // Not published running until its pods are ready (the gateway holds the calls meanwhile).
    await until(
      'the Deployment at two',
      async () => (await apps.readNamespacedDeployment({ name: 'search', namespace: ns })).spec?.replicas === 2,
    );
    assert.equal(await publishedReplicas('search'), 0);
    await markReady('search', 2);
    // The gateway that asked forwards its held call as soon as it is published: that call is in flight.
    await activity.put(kvKey(ns, 'search', 'gateway-test'), {
      lastUsedAt: new Date().toISOString(),
      inFlight: 1,
      streams: 0,
      writtenAt: new Date().toISOString(),
    });
    // Published running: the url of its Service (its replicas are the Deployment's; the entry says 1, not 0).
    await until('published running once its pods are ready', async () => (await publishedReplicas('search')) === 1);
    const entry = (await servers.get(kvKey(ns, 'search')))?.value as { server: { spec: { idle?: unknown } } };
    assert.deepEqual(
      entry.server.spec.idle,
      { scaleToZeroAfter: '1s', wakeTimeout: '30s' },
      'published with spec.idle: the gateways hold its calls at zero',
    );
    await activity.delete(kvKey(ns, 'search', 'gateway-test'));
  });

  it('is held up by a call in flight, and a server without spec.idle is not woken', async () => {
    await crs.create('mcpservers', ns, server('busy', 1));
    await until('the Deployment', async () => (await apps.readNamespacedDeployment({ name: 'busy', namespace: ns })).spec?.replicas === 1);
    // A gateway replica reports a call in flight, rewriting its entry as it does while the call lasts.
    const inFlight = (): ServerActivity => ({
      lastUsedAt: new Date(Date.now() - 60_000).toISOString(),
      inFlight: 1,
      streams: 0,
      writtenAt: new Date().toISOString(),
    });
    await activity.put(kvKey(ns, 'busy', 'gateway-test'), inFlight());
    await markReady('busy', 1);
    await until('Available', async () => conditionOf(await crs.get('mcpservers', ns, 'busy'), 'Available')?.status === 'True');
    for (let i = 0; i < 8; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      await activity.put(kvKey(ns, 'busy', 'gateway-test'), inFlight());
    }
    assert.equal((await crs.get('mcpservers', ns, 'busy')).spec.replicas, 1, 'not scaled to zero with a call in flight');
    // The call ends: idle from now on, so asleep a second later.
    await activity.put(kvKey(ns, 'busy', 'gateway-test'), { ...inFlight(), inFlight: 0, lastUsedAt: new Date().toISOString() });
    await until('scaled to zero after the call', async () => (await crs.get('mcpservers', ns, 'busy')).spec.replicas === 0);

    await crs.create('mcpservers', ns, {
      ...server('manual', 0),
      spec: { image: 'ghcr.io/example/search:1.0', command: ['search'], replicas: 0 },
    });
    await until('the McpServer in the cache', () =>
      bus.request(subjects.serverWake, { namespace: ns, name: 'manual' }, { timeoutMs: 5_000 }).then(
        () => undefined,
        (error: unknown) => (error instanceof PunkError && error.code === 'ServerNotIdle' ? error : undefined),
      ),
    ).then((error) =>
      assert.match(error.message, /has no spec\.idle, so it is not woken by calls; scale it up \(kubectl scale mcpserver manual/),
    );
  });
});
