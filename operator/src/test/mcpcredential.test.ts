// McpCredentials on a real kube-apiserver: exactly what the operator sends on `punk.gateway.admin` (real NATS, a
// nats-server of the test's own) and the status it writes. This test's own responder on the admin subject records
// each request and answers as the contract in contracts.ts says, so the requests can be asserted one by one and the
// gateway can be made to vanish; gateway-e2e.test.ts runs the same path against the real gateway's vault.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { PunkError, subjects, type Bus, type BusSubscription } from '@punk/lib';
import { VAULT_FINALIZER } from '../index.js';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

type AdminRequest = { op: string; tenant: string; id?: string; body?: { id: string; type: string; data: Record<string, string> }; sourceChecksum?: string; principal?: { subject: string } };

describe('the operator syncing McpCredentials to the gateway', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let plane: ControlPlane;
  let crs: CustomResources;
  let core: CoreV1Api;
  let gatewaySide: Bus;
  let responder: BusSubscription | undefined;
  const requests: AdminRequest[] = [];
  /** What the responder's "vault" holds: key names per credential id. */
  const stored = new Map<string, string[]>();
  let ns: string;

  async function serveAdmin() {
    responder = await gatewaySide.serve(subjects.gatewayAdmin, async data => {
      const request = data as AdminRequest;
      requests.push(request);
      switch (request.op) {
        case 'credentials.apply':
          stored.set(request.body!.id, Object.keys(request.body!.data).sort());
          return { credential: { id: request.body!.id, keys: stored.get(request.body!.id) } };
        case 'credentials.get':
          if (!stored.has(request.id!)) throw new PunkError('CredentialNotFound', `credential ${request.id} not found`);
          return { credential: { id: request.id, keys: stored.get(request.id!), expiresAt: '2026-12-01T00:00:00.000Z' } };
        case 'credentials.delete':
          if (!stored.delete(request.id!)) throw new PunkError('CredentialNotFound', `credential ${request.id} not found`);
          return {};
        default:
          throw new PunkError('ServerNotFound', 'no servers here');
      }
    });
  }

  before(async () => {
    fixture = await startOperatorFixture('creds');
    ({ plane, crs, ns } = fixture);
    gatewaySide = await fixture.nats.connect('gateway-side');
    await serveAdmin();
    core = plane.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(() => fixture?.stop());

  it('applies an oauth2 credential from its Secret and the spec, with a finalizer, and re-applies when the Secret changes', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'crm-oauth' }, stringData: { refresh_token: 'r-1', client_secret: 's-1', token_url: 'https://old.example.com/token' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'crm' },
      spec: { type: 'oauth2', secretRef: { name: 'crm-oauth' }, oauth2: { tokenUrl: 'https://auth.example.com/oauth/token', clientId: 'punk-gateway', scopes: ['crm.read', 'crm.write'] } },
    });
    const apply = await until('credentials.apply', () => requests.find(r => r.op === 'credentials.apply' && r.tenant === ns && r.body?.id === 'crm'));
    assert.deepEqual(apply.body, {
      id: 'crm',
      type: 'oauth2',
      data: { refresh_token: 'r-1', client_secret: 's-1', token_url: 'https://auth.example.com/oauth/token', client_id: 'punk-gateway', scope: 'crm.read crm.write' },
    });
    assert.match(apply.sourceChecksum!, /^[0-9a-f]{64}$/);
    assert.equal(apply.principal?.subject, 'system:punk-operator');

    const live = await until('Ready', async () => {
      const o = await crs.get('mcpcredentials', ns, 'crm');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.deepEqual(live.metadata.finalizers, [VAULT_FINALIZER]);
    assert.deepEqual(live.status.keys, ['client_id', 'client_secret', 'refresh_token', 'scope', 'token_url']);
    assert.equal(live.status.expiresAt, '2026-12-01T00:00:00.000Z');
    assert.equal(live.status.refreshHealth, 'Healthy');
    assert.ok(!JSON.stringify(live.status).includes('r-1') && !JSON.stringify(live.status).includes('s-1'), 'the status never holds a value');

    await core.patchNamespacedSecret({ name: 'crm-oauth', namespace: ns, body: { stringData: { refresh_token: 'r-2' } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    const second = await until('a second apply', () => requests.filter(r => r.op === 'credentials.apply' && r.body?.id === 'crm' && r.body.data.refresh_token === 'r-2')[0]);
    assert.notEqual(second.sourceChecksum, apply.sourceChecksum);
  });

  it('marks a credential whose Secret is missing Degraded, naming spec.secretRef.name, and sends nothing for it', async () => {
    await crs.create('mcpcredentials', ns, { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpCredential', metadata: { name: 'github' }, spec: { secretRef: { name: 'github-token', keys: ['token'] } } });
    const live = await until('Degraded', async () => {
      const o = await crs.get('mcpcredentials', ns, 'github');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.reason, 'SecretMissing');
    assert.match(conditionOf(live, 'Degraded')!.message, /^spec\.secretRef\.name: Secret github-token not found/);
    assert.equal(requests.filter(r => r.body?.id === 'github').length, 0);

    // A Secret without the listed key: Degraded, naming the key.
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'github-token' }, stringData: { other: 'x' } } });
    await until('KeyMissing', async () => conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Degraded')?.reason === 'KeyMissing');
    assert.match(conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Degraded')!.message, /spec\.secretRef\.keys\[0\]: Secret github-token has no key token/);

    await core.patchNamespacedSecret({ name: 'github-token', namespace: ns, body: { stringData: { token: 'ghp-1' } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    const apply = await until('applied once the key exists', () => requests.find(r => r.op === 'credentials.apply' && r.body?.id === 'github'));
    assert.deepEqual(apply.body, { id: 'github', type: 'static', data: { token: 'ghp-1' } }, 'only the listed keys');
    await until('Ready', async () => conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Ready')?.status === 'True');
  });

  it('reports the gateway unavailable and retries until it answers', async () => {
    await responder!.unsubscribe();
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'later-token' }, stringData: { value: 'v' } } });
    await crs.create('mcpcredentials', ns, { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpCredential', metadata: { name: 'later' }, spec: { secretRef: { name: 'later-token' } } });
    const live = await until('GatewayUnavailable', async () => {
      const o = await crs.get('mcpcredentials', ns, 'later');
      return conditionOf(o, 'Ready')?.reason === 'GatewayUnavailable' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.status, 'True');
    await serveAdmin();
    await until('Ready once the gateway answers', async () => conditionOf(await crs.get('mcpcredentials', ns, 'later'), 'Ready')?.status === 'True');
  });

  it('removes the credential from the vault before the McpCredential goes (finalizer)', async () => {
    await crs.delete('mcpcredentials', ns, 'crm');
    await until('credentials.delete', () => requests.find(r => r.op === 'credentials.delete' && r.id === 'crm' && r.tenant === ns));
    await until('the object gone', () => crs.get('mcpcredentials', ns, 'crm').then(() => undefined, (e: { code?: number }) => e.code === 404));
    assert.equal(stored.has('crm'), false);
  });
});
