// McpCredentials on a real kube-apiserver: exactly what the operator sends on `punk.gateway.admin` (real NATS, a
// nats-server of the test's own) and the status it writes. This test's own responder on the admin subject records
// each request and answers as the contract in contracts.ts says, so the requests can be asserted one by one and the
// gateway can be made to vanish; gateway-e2e.test.ts runs the same path against the real gateway's vault.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { PunkError, subjects, type Bus, type BusSubscription } from '@punk/lib';
import { createHash } from 'node:crypto';
import { VAULT_FINALIZER } from '../index.js';
import { credentialChecksum } from '../mcpcredential-reconciler.js';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

type AdminRequest = {
  op: string;
  tenant: string;
  id?: string;
  body?: { id: string; type: string; data: Record<string, string> };
  sourceChecksum?: string;
  principal?: { subject: string };
};

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
    responder = await gatewaySide.serve(subjects.gatewayAdmin, async (data) => {
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
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: 'crm-oauth' },
        stringData: { refresh_token: 'r-1', client_secret: 's-1', token_url: 'https://old.example.com/token' },
      },
    });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'crm' },
      spec: {
        type: 'oauth2',
        secretRef: { name: 'crm-oauth' },
        oauth2: { tokenUrl: 'https://auth.example.com/oauth/token', clientId: 'punk-gateway', scopes: ['crm.read', 'crm.write'] },
      },
    });
    const apply = await until('credentials.apply', () =>
      requests.find((r) => r.op === 'credentials.apply' && r.tenant === ns && r.body?.id === 'crm'),
    );
    assert.deepEqual(apply.body, {
      id: 'crm',
      type: 'oauth2',
      data: {
        refresh_token: 'r-1',
        client_secret: 's-1',
        token_url: 'https://auth.example.com/oauth/token',
        client_id: 'punk-gateway',
        scope: 'crm.read crm.write',
      },
    });
    assert.match(apply.sourceChecksum!, /^[0-9a-f]{64}$/);
    // Named by the objects' uids and versions, never a hash of the values (the gateway's database stores it).
    const secret = await core.readNamespacedSecret({ name: 'crm-oauth', namespace: ns });
    const credential = await crs.get('mcpcredentials', ns, 'crm');
    assert.equal(apply.sourceChecksum, credentialChecksum(credential.metadata, secret));
    const sorted = Object.fromEntries(Object.entries(apply.body.data).sort(([a], [b]) => (a < b ? -1 : 1)));
    assert.notEqual(
      apply.sourceChecksum,
      createHash('sha256')
        .update(JSON.stringify({ id: 'crm', type: 'oauth2', data: sorted }))
        .digest('hex'),
    );
    assert.equal(apply.principal?.subject, 'system:punk-operator');

    const live = await until('Ready', async () => {
      const o = await crs.get('mcpcredentials', ns, 'crm');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.deepEqual(live.metadata.finalizers, [VAULT_FINALIZER]);
    assert.deepEqual(live.status.keys, ['client_id', 'client_secret', 'refresh_token', 'scope', 'token_url']);
    assert.equal(live.status.expiresAt, '2026-12-01T00:00:00.000Z');
    assert.equal(live.status.refreshHealth, 'Healthy');
    assert.equal(conditionOf(live, 'Degraded')?.status, 'False');
    assert.ok(conditionOf(live, 'Degraded')!.message.length > 0, 'Degraded=False says why');
    assert.ok(
      !JSON.stringify(live.status).includes('r-1') && !JSON.stringify(live.status).includes('s-1'),
      'the status never holds a value',
    );

    await core.patchNamespacedSecret(
      { name: 'crm-oauth', namespace: ns, body: { stringData: { refresh_token: 'r-2' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const second = await until(
      'a second apply',
      () => requests.filter((r) => r.op === 'credentials.apply' && r.body?.id === 'crm' && r.body.data.refresh_token === 'r-2')[0],
    );
    assert.notEqual(second.sourceChecksum, apply.sourceChecksum);
  });

  it('marks a credential whose Secret is missing Degraded, naming spec.secretRef.name, and applies nothing for it', async () => {
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'github' },
      spec: { secretRef: { name: 'github-token', keys: ['token'] } },
    });
    const live = await until('Degraded', async () => {
      const o = await crs.get('mcpcredentials', ns, 'github');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.reason, 'SecretMissing');
    assert.match(conditionOf(live, 'Degraded')!.message, /^spec\.secretRef\.name: Secret github-token not found/);
    assert.equal(requests.filter((r) => r.body?.id === 'github').length, 0);

    // A Secret without the listed key: Degraded, naming the key.
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'github-token' }, stringData: { other: 'x' } } });
    await until('KeyMissing', async () => conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Degraded')?.reason === 'KeyMissing');
    assert.match(
      conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Degraded')!.message,
      /spec\.secretRef\.keys\[0\]: Secret github-token has no key token/,
    );

    await core.patchNamespacedSecret(
      { name: 'github-token', namespace: ns, body: { stringData: { token: 'ghp-1' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const apply = await until('applied once the key exists', () =>
      requests.find((r) => r.op === 'credentials.apply' && r.body?.id === 'github'),
    );
    assert.deepEqual(apply.body, { id: 'github', type: 'static', data: { token: 'ghp-1' } }, 'only the listed keys');
    await until('Ready', async () => conditionOf(await crs.get('mcpcredentials', ns, 'github'), 'Ready')?.status === 'True');
  });

  it('refuses values from environment variables and files (punk up only), naming spec.secretRef as the fix', async () => {
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'laptop' },
      spec: { values: [{ key: 'token', valueFrom: { env: 'TOKEN' } }] },
    });
    const live = await until('Degraded', async () => {
      const o = await crs.get('mcpcredentials', ns, 'laptop');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.reason, 'InvalidSpec');
    assert.match(conditionOf(live, 'Degraded')!.message, /^spec\.values: .*punk up only; in a cluster name a Secret with spec\.secretRef/);
    assert.equal(requests.filter((r) => r.body?.id === 'laptop').length, 0);
  });

  it('reports the gateway unavailable and retries until it answers', async () => {
    await responder!.unsubscribe();
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'later-token' }, stringData: { value: 'v' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'later' },
      spec: { secretRef: { name: 'later-token' } },
    });
    const live = await until('GatewayUnavailable', async () => {
      const o = await crs.get('mcpcredentials', ns, 'later');
      return conditionOf(o, 'Ready')?.reason === 'GatewayUnavailable' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.status, 'True');
    await serveAdmin();
    await until(
      'Ready once the gateway answers',
      async () => conditionOf(await crs.get('mcpcredentials', ns, 'later'), 'Ready')?.status === 'True',
    );
  });

  it('refuses an oauth2 credential with a refresh_token and no token URL, naming spec.oauth2.tokenUrl, and sends nothing', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'notoken-oauth' }, stringData: { refresh_token: 'r' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'notoken' },
      spec: { type: 'oauth2', secretRef: { name: 'notoken-oauth' }, oauth2: { clientId: 'punk' } },
    });
    const live = await until('InvalidSpec', async () => {
      const o = await crs.get('mcpcredentials', ns, 'notoken');
      return conditionOf(o, 'Degraded')?.reason === 'InvalidSpec' ? o : undefined;
    });
    assert.match(
      conditionOf(live, 'Degraded')!.message,
      /^spec\.oauth2\.tokenUrl: is required with a refresh_token .*key token_url in Secret notoken-oauth$/,
    );
    assert.doesNotMatch(conditionOf(live, 'Degraded')!.message, /data\./);
    assert.equal(requests.filter((r) => r.body?.id === 'notoken').length, 0);

    // The Secret's own token_url is enough.
    await core.patchNamespacedSecret(
      { name: 'notoken-oauth', namespace: ns, body: { stringData: { token_url: 'https://auth.example.com/token' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await until(
      "Ready with the Secret's token_url",
      async () => conditionOf(await crs.get('mcpcredentials', ns, 'notoken'), 'Ready')?.status === 'True',
    );
  });

  it('removes the credential from the vault when its Secret is deleted, and applies it again when the Secret returns', async () => {
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'revoked-token' }, stringData: { token: 't-1' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'revoked' },
      spec: { secretRef: { name: 'revoked-token' } },
    });
    await until('stored', async () => (await crs.get('mcpcredentials', ns, 'revoked')).status?.keys?.length === 1 && stored.has('revoked'));

    await core.deleteNamespacedSecret({ name: 'revoked-token', namespace: ns });
    await until('credentials.delete', () => requests.find((r) => r.op === 'credentials.delete' && r.id === 'revoked' && r.tenant === ns));
    assert.equal(stored.has('revoked'), false, 'the vault no longer holds it');
    const live = await until('SecretMissing', async () => {
      const o = await crs.get('mcpcredentials', ns, 'revoked');
      return conditionOf(o, 'Degraded')?.reason === 'SecretMissing' ? o : undefined;
    });
    assert.match(
      conditionOf(live, 'Degraded')!.message,
      /^spec\.secretRef\.name: Secret revoked-token not found .*; the credential was removed from the gateway's vault/,
    );
    assert.equal(live.status.keys, undefined, 'status.keys no longer lists the keys');
    assert.equal(conditionOf(live, 'Ready')?.status, 'False');

    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'revoked-token' }, stringData: { token: 't-2' } } });
    await until('applied again', () =>
      requests.find((r) => r.op === 'credentials.apply' && r.body?.id === 'revoked' && r.body.data.token === 't-2'),
    );
    const back = await until('Ready again', async () => {
      const o = await crs.get('mcpcredentials', ns, 'revoked');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.deepEqual(back.status.keys, ['token']);
  });

  it('takes a credential whose Secret went while the gateway was away out of the vault once the gateway answers', async () => {
    await responder!.unsubscribe();
    await core.deleteNamespacedSecret({ name: 'revoked-token', namespace: ns });
    const waiting = await until('SecretMissing, waiting for the gateway', async () => {
      const o = await crs.get('mcpcredentials', ns, 'revoked');
      return /removed from the gateway's vault once the gateway answers/.test(conditionOf(o, 'Degraded')?.message ?? '') ? o : undefined;
    });
    assert.equal(conditionOf(waiting, 'Degraded')?.reason, 'SecretMissing');
    assert.deepEqual(waiting.status.keys, ['token'], 'the vault still holds them');
    assert.ok(stored.has('revoked'));

    await serveAdmin();
    await until('removed once the gateway answers', async () =>
      /the credential was removed from the gateway's vault/.test(
        conditionOf(await crs.get('mcpcredentials', ns, 'revoked'), 'Degraded')?.message ?? '',
      ),
    );
    assert.equal(stored.has('revoked'), false);
    assert.equal((await crs.get('mcpcredentials', ns, 'revoked')).status.keys, undefined);
  });

  it('says so, with an Event, while a deleted credential waits for the gateway to remove it from the vault', async () => {
    await responder!.unsubscribe();
    await crs.delete('mcpcredentials', ns, 'github');
    const live = await until('GatewayUnavailable while deleting', async () => {
      const o = await crs.get('mcpcredentials', ns, 'github');
      return conditionOf(o, 'Degraded')?.reason === 'GatewayUnavailable' ? o : undefined;
    });
    assert.equal(conditionOf(live, 'Degraded')?.status, 'True');
    assert.equal(conditionOf(live, 'Ready')?.status, 'False');
    assert.match(
      conditionOf(live, 'Degraded')!.message,
      /^the McpCredential is being deleted; its copy in the gateway's vault is removed once the gateway answers/,
    );
    const event = await until('a Warning Event', async () => {
      const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=github' });
      return list.items.find((e) => e.reason === 'GatewayUnavailable');
    });
    assert.equal(event.type, 'Warning');
    assert.ok(stored.has('github'), 'still in the vault while the gateway is away');

    await serveAdmin();
    await until('the object gone once the gateway answers', () =>
      crs.get('mcpcredentials', ns, 'github').then(
        () => undefined,
        (e: unknown) => (e as { code?: number }).code === 404,
      ),
    );
    assert.equal(stored.has('github'), false);
  });

  it('removes the credential from the vault before the McpCredential goes (finalizer)', async () => {
    await crs.delete('mcpcredentials', ns, 'crm');
    await until('credentials.delete', () => requests.find((r) => r.op === 'credentials.delete' && r.id === 'crm' && r.tenant === ns));
    await until('the object gone', () =>
      crs.get('mcpcredentials', ns, 'crm').then(
        () => undefined,
        (e: unknown) => (e as { code?: number }).code === 404,
      ),
    );
    assert.equal(stored.has('crm'), false);
  });
});
