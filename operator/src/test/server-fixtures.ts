// McpServer objects and options shared by the children tests: each server parsed by the real schema, so the
// defaults (path, env, replicas, sessionMode, timeout) are the ones the operator sees.
import assert from 'node:assert/strict';
import type { KubernetesObject, V1Container, V1Deployment } from '@kubernetes/client-node';
import { mcpServerSchema, type McpServer } from '@punk/lib';
import type { ServerChildrenOptions } from '../server-children.js';

/** An McpServer named `name` in `namespace` with this spec, parsed by `mcpServerSchema`, with a uid and generation. */
export function mcpServer(name: string, spec: Record<string, unknown>, namespace = 'team-a'): McpServer {
  return mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace, uid: `uid-of-${name}`, generation: 3 },
    spec,
  });
}

/** Credentials of the tests: `github` (keys token and user), `slack` (one key, bot-token), `plain` (keys not listed). */
export const credentials: Record<string, { secretName: string; keys?: string[] }> = {
  github: { secretName: 'github-secret', keys: ['token', 'user'] },
  slack: { secretName: 'slack-secret', keys: ['bot-token'] },
  plain: { secretName: 'plain-secret' },
};

/** Options as the operator passes them, with the test credentials. */
export function childrenOptions(overrides: Partial<ServerChildrenOptions> = {}): ServerChildrenOptions {
  return {
    bridgeImage: 'ghcr.io/punk/bridge:0.1.0',
    runnerImages: { npm: 'ghcr.io/punk/runner-npm:0.1.0', pypi: 'ghcr.io/punk/runner-pypi:0.1.0' },
    gateway: { namespace: 'punk-system', podLabels: { 'app.kubernetes.io/name': 'punk-gateway' } },
    secretChecksum: 'c0ffee',
    credentialSecrets: (name) => credentials[name],
    ...overrides,
  };
}

/** The child of `kind` named `name` among `objects`, typed as the caller expects. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- T is the caller's expected kind
export function child<T extends KubernetesObject>(objects: readonly KubernetesObject[], kind: string, name: string): T {
  const found = objects.find((object) => object.kind === kind && object.metadata?.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata?.name}`).join(', ')}`);
  return found as T;
}

/** The container `name` of a Deployment's pods. */
export function container(deployment: V1Deployment, name = 'server'): V1Container {
  const found = deployment.spec!.template.spec!.containers.find((c) => c.name === name);
  assert.ok(found, `container ${name}`);
  return found;
}
