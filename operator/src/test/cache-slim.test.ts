// What the informers' caches keep of the children the operator builds (cache-slim.ts): the metadata a reconcile
// compares and reads (resourceVersion, owner references, labels), a Deployment's replicas and status, a Pod's status;
// never managedFields or kubectl's last-applied copy. The McpServer itself keeps its spec.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubernetesObject } from '@kubernetes/client-node';
import { slimForCache } from '../cache-slim.js';
import { buildServerChildren } from '../server-children.js';
import { sharedServiceAccount } from '../shared-service-account.js';
import { childrenOptions, mcpServer } from './server-fixtures.js';

/** `object` as the API server would answer it: with a resourceVersion, managedFields and a status. */
function stored(object: KubernetesObject & { spec?: unknown; status?: unknown }): KubernetesObject & { status?: unknown } {
  const copy = JSON.parse(JSON.stringify(object)) as KubernetesObject & { status?: unknown };
  copy.metadata = {
    ...copy.metadata,
    resourceVersion: '42',
    managedFields: [{ manager: 'punk-operator', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: {} }],
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"a":1}', 'deployment.kubernetes.io/revision': '1' },
  };
  return copy;
}

describe('slimForCache', () => {
  const server = mcpServer('files', { image: 'ghcr.io/example/s:1', command: ['s'] });
  const children = [...buildServerChildren(server, childrenOptions()).objects, sharedServiceAccount(server.metadata.namespace!)];
  const byKind = (kind: string) => stored(children.find((o) => o.kind === kind)!);

  it('keeps only the metadata of Services, ServiceAccounts and NetworkPolicies', () => {
    for (const kind of ['Service', 'ServiceAccount', 'NetworkPolicy'] as const) {
      const object = byKind(kind);
      const { ownerReferences, labels, name } = object.metadata!;
      slimForCache(kind, object);
      assert.deepEqual(
        Object.entries(object)
          .filter(([, value]) => value !== undefined)
          .map(([key]) => key)
          .sort(),
        ['apiVersion', 'kind', 'metadata'],
        kind,
      );
      assert.equal(object.metadata!.resourceVersion, '42');
      assert.deepEqual([object.metadata!.name, object.metadata!.ownerReferences, object.metadata!.labels], [name, ownerReferences, labels]);
      assert.equal(object.metadata!.managedFields, undefined);
      assert.deepEqual(object.metadata!.annotations, { 'deployment.kubernetes.io/revision': '1' });
    }
  });

  it("keeps a Deployment's metadata, replicas and status, not its pod template", () => {
    const deployment = byKind('Deployment') as KubernetesObject & { spec?: Record<string, unknown>; status?: unknown };
    deployment.status = { availableReplicas: 1, conditions: [{ type: 'Available', status: 'True' }] };
    slimForCache('Deployment', deployment);
    assert.deepEqual(deployment.spec, { replicas: 1 });
    assert.deepEqual(deployment.status, { availableReplicas: 1, conditions: [{ type: 'Available', status: 'True' }] });
    assert.ok(deployment.metadata?.ownerReferences?.length);
  });

  it("keeps a Pod's status and drops its spec; an McpServer keeps its spec", () => {
    const pod = stored({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', namespace: 'n' },
      spec: { containers: [] },
      status: { phase: 'Running' },
    });
    slimForCache('Pod', pod);
    assert.deepEqual([(pod as { spec?: unknown }).spec, pod.status], [undefined, { phase: 'Running' }]);
    const server = stored({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 's', namespace: 'n' },
      spec: { url: 'https://x' },
    });
    slimForCache('McpServer', server);
    assert.deepEqual((server as { spec?: unknown }).spec, { url: 'https://x' });
    assert.equal(server.metadata!.managedFields, undefined);
  });
});
