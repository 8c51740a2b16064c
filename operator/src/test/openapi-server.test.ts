// An openapi McpServer in the cluster: the operator makes no pod, publishes it, and the real gateway serves the
// operations of its inline OpenAPI document as tools, so the server becomes Ready with the tools it lists and a call
// reaches the API; a document `file` (punk up only) is refused naming the field; a document held in a ConfigMap is
// published as its content, a missing key is Degraded naming it, and an edited ConfigMap publishes the new document;
// an operation without operationId is served and shown as a warning on the status.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { anonymousPrincipal, buckets, requestGateway, subjects, type Bus, type GatewayRequest } from '@punk/lib';
import { BOOKS_API_KEY, startBooksApi, type BooksApi } from '../../../services/gateway/dist/test/fixtures/books-api.js';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const petstoreDocument = fileURLToPath(new URL('../../../services/gateway/src/test/fixtures/openapi/petstore.yaml', import.meta.url));

describe('an openapi McpServer in the cluster', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let bus: Bus;
  let crs: CustomResources;
  let ns: string;
  let api: BooksApi;

  before(async () => {
    fixture = await startOperatorFixture('openapi', { operator: false });
    ({ crs, ns } = fixture);
    ({ bus } = await fixture.startServices());
    api = await startBooksApi();
    await fixture.startOperator();
  });
  after(async () => {
    await fixture?.stop();
    await api?.close();
  });

  it('serves the operations as tools with no pod, Ready with the tools listed, and a call reaches the API', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'pets' },
      spec: {
        openapi: { content: await readFile(petstoreDocument, 'utf8'), baseUrl: api.url },
        headers: [{ name: 'X-Api-Key', value: BOOKS_API_KEY }],
      },
    });
    const ready = await until(
      'Ready=True',
      async () => {
        const o = await crs.get('mcpservers', ns, 'pets');
        return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
      },
      60_000,
    );
    assert.deepEqual(
      (ready.status.tools as Array<{ name: string }>).map((t) => t.name),
      ['listpets', 'createpets', 'showpetbyid'],
    );
    assert.equal(conditionOf(ready, 'Available')?.reason, 'RemoteServer');
    assert.equal(ready.status.upstreamUrl, api.url);
    const result = (await requestGateway(
      bus,
      {
        method: 'tools/call',
        tenant: ns,
        server: 'pets',
        principal: anonymousPrincipal(ns),
        runId: `run-${randomUUID()}`,
        name: 'listpets',
        arguments: { limit: 2 },
      } as GatewayRequest,
      30_000,
    )) as { _meta?: { status?: number } };
    // The books API has no /pets route: its 404 (not a 401) shows the call reached it with the header.
    assert.equal(result._meta?.status, 404);
    assert.ok(api.seen.some((r) => r.url === '/api/pets?limit=2' && r.headers['x-api-key'] === BOOKS_API_KEY));
  });

  it('refuses a document file, which only punk up reads, naming the field', async () => {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'from-file' },
      spec: { openapi: { file: '/etc/openapi.yaml' } },
    });
    const degraded = await until('Degraded', async () => {
      const o = await crs.get('mcpservers', ns, 'from-file');
      return conditionOf(o, 'Degraded')?.status === 'True' ? o : undefined;
    });
    assert.match(conditionOf(degraded, 'Degraded')!.message, /^spec\.openapi\.file: a file is read beside its manifest under punk up only/);
  });

  it('reads a document from a ConfigMap key, Degraded naming a missing key, and publishes an edited ConfigMap again', async () => {
    const core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
    const document = await readFile(petstoreDocument, 'utf8');
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'pets-doc' }, data: { 'other.yaml': 'x' } } });
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'pets-cm' },
      spec: { openapi: { configMapKeyRef: { name: 'pets-doc', key: 'petstore.yaml' }, baseUrl: api.url } },
    });
    const degraded = await until('Degraded ConfigMapMissing', async () => {
      const o = await crs.get('mcpservers', ns, 'pets-cm');
      return conditionOf(o, 'Degraded')?.reason === 'ConfigMapMissing' ? o : undefined;
    });
    assert.equal(
      conditionOf(degraded, 'Degraded')!.message,
      `spec.openapi.configMapKeyRef.key: ConfigMap pets-doc in namespace ${ns} has no key petstore.yaml (or it is empty)`,
    );
    const servers = await bus.keyValue(buckets.mcpServers);
    assert.equal(await servers.get(`${ns}.pets-cm`), undefined, 'not published while the key is missing');

    // The key appears: the ConfigMap's event reconciles the server, which becomes Ready with the document's tools.
    await core.replaceNamespacedConfigMap({
      name: 'pets-doc',
      namespace: ns,
      body: { metadata: { name: 'pets-doc' }, data: { 'petstore.yaml': document } },
    });
    const ready = await until(
      'Ready=True',
      async () => {
        const o = await crs.get('mcpservers', ns, 'pets-cm');
        return conditionOf(o, 'Ready')?.status === 'True' && o.status.tools ? o : undefined;
      },
      60_000,
    );
    assert.deepEqual(
      (ready.status.tools as Array<{ name: string }>).map((t) => t.name),
      ['listpets', 'createpets', 'showpetbyid'],
    );
    const entry = (await servers.get(`${ns}.pets-cm`))?.value as { server: { spec: { openapi: Record<string, unknown> } } };
    assert.deepEqual(entry.server.spec.openapi, { content: document, baseUrl: api.url });

    // An edited document (createPets left out) is published again and the gateway serves the new tools.
    const edited = document.replace(/operationId: createPets/, 'operationId: createPets\n      x-mcp: false');
    assert.notEqual(edited, document);
    await core.replaceNamespacedConfigMap({
      name: 'pets-doc',
      namespace: ns,
      body: { metadata: { name: 'pets-doc' }, data: { 'petstore.yaml': edited } },
    });
    await until('the edited document published', async () => {
      const value = (await servers.get(`${ns}.pets-cm`))?.value as typeof entry | undefined;
      return value?.server.spec.openapi.content === edited ? value : undefined;
    });
    await until(
      'the gateway serving the edited tools',
      async () => {
        const listed = (await bus
          .request(subjects.gatewayAdmin, { op: 'servers.tools', tenant: ns, id: 'pets-cm' }, { timeoutMs: 30_000 })
          .catch(() => undefined)) as { tools?: Array<{ name: string }> } | undefined;
        const names = listed?.tools?.map((t) => t.name).sort();
        return names && names.join() === 'listpets,showpetbyid' ? names : undefined;
      },
      60_000,
    );

    // The ConfigMap gone: Degraded, naming the ConfigMap.
    await core.deleteNamespacedConfigMap({ name: 'pets-doc', namespace: ns });
    const gone = await until('Degraded ConfigMap not found', async () => {
      const o = await crs.get('mcpservers', ns, 'pets-cm');
      return /ConfigMap pets-doc not found/.test(conditionOf(o, 'Degraded')?.message ?? '') ? o : undefined;
    });
    assert.equal(
      conditionOf(gone, 'Degraded')!.message,
      `spec.openapi.configMapKeyRef.name: ConfigMap pets-doc not found in namespace ${ns}`,
    );
  });

  it('shows an operation without operationId, named from its route, as a warning on the status while serving it', async () => {
    const document = (await readFile(petstoreDocument, 'utf8')).replace(/\n\s*operationId: showPetById/, '');
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'pets-warn' },
      spec: { openapi: { content: document, baseUrl: api.url } },
    });
    const ready = await until(
      'Ready=True with the warning',
      async () => {
        const o = await crs.get('mcpservers', ns, 'pets-warn');
        return conditionOf(o, 'Ready')?.status === 'True' && o.status.warnings ? o : undefined;
      },
      60_000,
    );
    assert.deepEqual(
      (ready.status.tools as Array<{ name: string }>).map((t) => t.name),
      ['listpets', 'createpets', 'get_pets_petid'],
    );
    assert.deepEqual(ready.status.warnings, ['paths./pets/{petId}.get: no operationId; named get_pets_petid']);
  });
});
