// The operator with the real gateway and governance on one nats-server of the test's own and a scratch Postgres
// database: an McpServer whose url is a real MCP server (server-everything over Streamable HTTP) is served by the
// gateway from PUNK_MCP_SERVERS and becomes Ready with the tools the gateway lists; an McpCredential reaches the
// gateway's vault (credentials.apply) and leaves it when deleted; a deleted McpServer is no longer served.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { PunkError, subjects, type Bus } from '@punk/lib';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import {
  conditionOf,
  CustomResources,
  startEverything,
  startOperatorFixture,
  until,
  type OperatorFixture,
  type TestMcpServer,
} from './harness.js';

const availability = controlPlaneAvailability();

describe('the operator with the real gateway', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let bus: Bus;
  let everything: TestMcpServer;
  let plane: ControlPlane;
  let crs: CustomResources;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('e2e', { operator: false });
    ({ plane, crs, ns } = fixture);
    ({ bus } = await fixture.startServices());
    everything = await startEverything();
    await fixture.startOperator();
  });
  after(async () => {
    await fixture?.stop();
    everything?.stop();
  });

  it('serves a url McpServer through the gateway and reports Ready with the tools it lists', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'everything' },
      spec: { url: everything.url },
    });
    const ready = await until(
      'Ready=True',
      async () => {
        const o = await crs.get('mcpservers', ns, 'everything');
        return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
      },
      60_000,
    );
    assert.equal(conditionOf(ready, 'Ready')?.reason, 'ToolsListed');
    assert.ok(ready.status.toolCount > 0);
    assert.equal(ready.status.toolCount, ready.status.tools.length);
    assert.ok(
      (ready.status.tools as { name: string }[]).some((tool) => tool.name === 'echo'),
      'server-everything lists echo',
    );
    assert.equal(ready.status.lastError, undefined);

    const served = (await bus.request(
      subjects.gatewayAdmin,
      { op: 'servers.get', tenant: ns, id: 'everything' },
      { timeoutMs: 10_000 },
    )) as Record<string, unknown>;
    assert.match(
      JSON.stringify(served),
      new RegExp(new URL(everything.url).host.replace(/\./g, '\\.')),
      'the gateway serves the url the operator published',
    );

    await crs.delete('mcpservers', ns, 'everything');
    await until('no longer served', () =>
      bus.request(subjects.gatewayAdmin, { op: 'servers.get', tenant: ns, id: 'everything' }, { timeoutMs: 10_000 }).then(
        () => undefined,
        (error: unknown) => error instanceof PunkError || undefined,
      ),
    );
  });

  it('puts an McpCredential into the vault and removes it when the object is deleted', async () => {
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'github-token' }, stringData: { token: 'ghp-e2e' } } });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'github' },
      spec: { secretRef: { name: 'github-token', keys: ['token'] } },
    });
    const ready = await until('Ready=True', async () => {
      const o = await crs.get('mcpcredentials', ns, 'github');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.deepEqual(ready.status.keys, ['token']);
    assert.equal(ready.status.refreshHealth, 'NotApplicable');
    const stored = (await bus.request(
      subjects.gatewayAdmin,
      { op: 'credentials.get', tenant: ns, id: 'github' },
      { timeoutMs: 10_000 },
    )) as { credential: { keys: string[] } };
    assert.deepEqual(stored.credential.keys, ['token']);
    assert.ok(!JSON.stringify(stored).includes('ghp-e2e'), 'the vault never answers a value');

    await crs.delete('mcpcredentials', ns, 'github');
    await until('gone from the vault', () =>
      bus.request(subjects.gatewayAdmin, { op: 'credentials.get', tenant: ns, id: 'github' }, { timeoutMs: 10_000 }).then(
        () => undefined,
        (error: unknown) => (error instanceof PunkError && error.code === 'CredentialNotFound') || undefined,
      ),
    );
    await until('the object gone', () =>
      crs.get('mcpcredentials', ns, 'github').then(
        () => undefined,
        (e: unknown) => (e as { code?: number }).code === 404,
      ),
    );
  });

  it('names the Secret key the vault refuses, and takes a credential out of the vault when its Secret is deleted', async () => {
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    const getCredential = () => bus.request(subjects.gatewayAdmin, { op: 'credentials.get', tenant: ns, id: 'crm' }, { timeoutMs: 10_000 });
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'crm-oauth' }, stringData: { access_token: 'at-e2e', region: 'eu' } },
    });
    await crs.create('mcpcredentials', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpCredential',
      metadata: { name: 'crm' },
      spec: { type: 'oauth2', secretRef: { name: 'crm-oauth' } },
    });
    const refused = await until('InvalidSpec', async () => {
      const o = await crs.get('mcpcredentials', ns, 'crm');
      return conditionOf(o, 'Degraded')?.reason === 'InvalidSpec' ? o : undefined;
    });
    assert.match(
      conditionOf(refused, 'Degraded')!.message,
      /^the gateway refused the credential: Secret crm-oauth key region: is not a key of an oauth2 credential/,
    );

    await core.replaceNamespacedSecret({
      name: 'crm-oauth',
      namespace: ns,
      body: { metadata: { name: 'crm-oauth' }, stringData: { access_token: 'at-e2e' } },
    });
    await until(
      'Ready once the key is gone',
      async () => conditionOf(await crs.get('mcpcredentials', ns, 'crm'), 'Ready')?.status === 'True',
    );
    await getCredential();

    await core.deleteNamespacedSecret({ name: 'crm-oauth', namespace: ns });
    await until('gone from the vault', () =>
      getCredential().then(
        () => undefined,
        (error: unknown) => (error instanceof PunkError && error.code === 'CredentialNotFound') || undefined,
      ),
    );
    const missing = await until('SecretMissing', async () => {
      const o = await crs.get('mcpcredentials', ns, 'crm');
      return conditionOf(o, 'Degraded')?.reason === 'SecretMissing' ? o : undefined;
    });
    assert.equal(missing.status.keys, undefined);
  });
});
