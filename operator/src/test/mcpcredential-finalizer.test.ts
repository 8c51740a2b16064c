// The bounded wait of an McpCredential's finalizer, on a real kube-apiserver with the operator and no gateway at all:
// a deleted McpCredential says what its finalizer waits for and until when (Degraded GatewayUnavailable), then the
// finalizer is released with a Warning Event saying the vault may still hold the credential and how to delete it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

/** The finalizer's wait in this test, in milliseconds (5 minutes by default). */
const TIMEOUT_MS = 8_000;

describe('an McpCredential deleted while no gateway runs', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let core: CoreV1Api;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('finalizer', { operator: { finalizerTimeoutMs: TIMEOUT_MS } });
    ({ crs, ns } = fixture);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(() => fixture?.stop());

  it('says what its finalizer waits for and until when, then releases it with a Warning Event', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'token' }, stringData: { token: 't' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'orphan' },
      spec: { secretRef: { name: 'token' } },
    });
    await until('the finalizer', async () =>
      (await crs.get('mcpcredentials', ns, 'orphan')).metadata.finalizers?.includes('mcp.punk.dev/vault'),
    );
    await crs.delete('mcpcredentials', ns, 'orphan');
    const waiting = await until('Degraded while the finalizer waits', async () => {
      const o = await crs.get('mcpcredentials', ns, 'orphan');
      return /is being deleted/.test(conditionOf(o, 'Degraded')?.message ?? '') ? o : undefined;
    });
    const message = conditionOf(waiting, 'Degraded')!.message;
    assert.equal(conditionOf(waiting, 'Degraded')!.reason, 'GatewayUnavailable');
    const deadline = new Date(new Date(waiting.metadata.deletionTimestamp as string).getTime() + TIMEOUT_MS).toISOString();
    assert.ok(message.endsWith(`finalizer mcp.punk.dev/vault waits until ${deadline} at most, then releases the object`), message);

    await until(
      'the object gone after the wait',
      () =>
        crs.get('mcpcredentials', ns, 'orphan').then(
          () => undefined,
          (e: unknown) => (e as { code?: number }).code === 404,
        ),
      60_000,
    );
    const event = await until('the FinalizerTimedOut Event', async () => {
      const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=orphan' });
      return list.items.find((e) => e.reason === 'FinalizerTimedOut');
    });
    assert.equal(event.type, 'Warning');
    assert.match(
      event.message ?? '',
      new RegExp(
        `^finalizer mcp\\.punk\\.dev/vault released after waiting 8 s for the gateway .*: the vault may still hold credential orphan of tenant ${ns}; delete it through the admin API \\(DELETE /api/v1/credentials/orphan\\)$`,
      ),
    );
  });
});
