// The generated CRDs as a real kube-apiserver serves them: Established, the example manifests accepted, and an
// invalid object refused with a message naming the field (the OpenAPI and CEL validation of crds/).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { controlPlaneAvailability, startControlPlane, type ControlPlane } from './control-plane.js';

const availability = controlPlaneAvailability();
const examples = fileURLToPath(new URL('../../../examples/', import.meta.url));

describe('the CRDs of crds/ on a real kube-apiserver', { skip: availability.available ? false : availability.reason }, () => {
  let plane: ControlPlane;
  let api: CustomObjectsApi;
  before(async () => {
    plane = await startControlPlane();
    api = plane.kubeConfig.makeApiClient(CustomObjectsApi);
  });
  after(() => plane?.stop());

  it('accepts every example McpServer, with the schema defaults applied', async () => {
    const files = readdirSync(examples).filter((f) => f.endsWith('.yaml'));
    assert.ok(files.length > 0);
    for (const file of files) {
      for (const doc of parseAllDocuments(readFileSync(examples + file, 'utf8'))) {
        const body = doc.toJS() as { kind: string; metadata: { name: string }; spec: { timeout?: string } };
        if (body.kind !== 'McpServer') continue;
        const created = (await api.createNamespacedCustomObject({
          group: 'mcp.punk.dev',
          version: 'v1alpha1',
          namespace: 'default',
          plural: 'mcpservers',
          body,
        })) as { spec: { sessionMode: string; timeout?: string } };
        assert.equal(created.spec.sessionMode, 'shared', `${file}: default sessionMode`);
        // No default timeout: a server without one gets PUNK_CALL_TIMEOUT_MS from the gateway and the front.
        assert.equal(created.spec.timeout, body.spec.timeout, `${file}: timeout as written, or none`);
      }
    }
  });

  it('refuses an McpServer with two sources, naming the field', async () => {
    const body = {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'two-sources' },
      spec: { image: 'ghcr.io/x/y:1', url: 'https://example.com/mcp' },
    };
    await assert.rejects(
      api.createNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace: 'default', plural: 'mcpservers', body }),
      (error: Error & { code?: number; body?: string }) => {
        assert.equal(error.code, 422);
        assert.match(String(error.body), /image|url/);
        assert.match(String(error.body), /exactly one of image, package, url and openapi/);
        return true;
      },
    );
  });

  it('refuses a port out of range, naming spec.port', async () => {
    const body = {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'bad-port' },
      spec: { image: 'ghcr.io/x/y:1', transport: 'streamable-http', port: 70000 },
    };
    await assert.rejects(
      api.createNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace: 'default', plural: 'mcpservers', body }),
      (error: Error & { code?: number; body?: string }) => {
        assert.equal(error.code, 422);
        assert.match(String(error.body), /spec\.port/);
        return true;
      },
    );
  });

  it('accepts an McpWorkflow with its defaults and refuses, naming the field, a start naming no node, an output with next and a repeated id', async () => {
    const workflow = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpWorkflow',
      metadata: { name },
      spec,
    });
    const create = (body: unknown) =>
      api.createNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace: 'default', plural: 'mcpworkflows', body });
    const call = {
      id: 'read',
      kind: 'tool_call',
      next: 'done',
      config: { server: 'filesystem', tool: 'read_text_file', args: { path: { kind: 'ref', path: 'input.path' } } },
    };
    const done = { id: 'done', kind: 'output', config: { value: { kind: 'ref', path: 'vars.read' } } };
    const created = (await create(workflow('read-file', { start: 'read', nodes: [call, done] }))) as {
      spec: { description: string; input: unknown; nodes: { config: unknown }[] };
    };
    assert.equal(created.spec.description, '');
    assert.deepEqual(created.spec.input, { type: 'object' });
    // Node configs and expressions are free-form in the CRD: kept as written, not pruned.
    assert.deepEqual(created.spec.nodes[0]!.config, call.config);
    const refused = async (body: unknown, field: RegExp, message: RegExp) =>
      assert.rejects(create(body), (error: Error & { code?: number; body?: string }) => {
        assert.equal(error.code, 422, String(error.body));
        assert.match(String(error.body), field);
        assert.match(String(error.body), message);
        return true;
      });
    await refused(workflow('no-start', { start: 'begin', nodes: [call, done] }), /spec\.start/, /start must be the id of a node/);
    await refused(
      workflow('output-next', { start: 'read', nodes: [call, { ...done, next: 'read' }] }),
      /spec\.nodes\[1\]\.next/,
      /an output node ends the run: remove next/,
    );
    await refused(workflow('repeated', { start: 'read', nodes: [call, { ...done, id: 'read' }] }), /spec\.nodes\[1\]/, /Duplicate value/);
  });
});
