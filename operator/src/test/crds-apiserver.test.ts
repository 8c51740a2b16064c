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
        assert.match(String(error.body), /exactly one of image, package and url/);
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
});
