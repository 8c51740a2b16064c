/**
 * What the informers' caches keep of each object, as controller-runtime's cache transforms do (its DefaultTransform
 * drops managedFields): only what a reconcile or an event handler reads, so thousands of children take little memory.
 *
 * - every kind: no `metadata.managedFields` (as large as the object; a Deployment's drift is read from the apply's
 *   answer, see sandbox-drift.ts) and no `kubectl.kubernetes.io/last-applied-configuration` annotation (a whole copy
 *   of the object as kubectl applied it, a Secret's data among it);
 * - Service, ServiceAccount, NetworkPolicy (and DeploymentMetadata): only `metadata` (they are watched as metadata
 *   already, metadata-informer.ts): a reconcile compares their resourceVersion with the one its own apply got (any
 *   edit makes it apply again), and reads who controls them (ownerReferences) and whose children they are (labels);
 * - Deployment: `metadata`, `spec.replicas` and `status` (the conditions of its McpServer); its pod template is not
 *   kept: the apply's memo compares it;
 * - Pod: `metadata` and `status` (the containers' states a Degraded condition reports).
 * McpServer, McpCredential, McpPolicy, Secret and ConfigMap objects keep everything else.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { WatchedKind } from './context.js';

/** The annotation kubectl apply keeps a copy of the whole object in. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** Cuts `object` (of `kind`, as a list or watch gave it) down, in place, to what the cache keeps of it (see above). */
export function slimForCache(kind: WatchedKind, object: KubernetesObject): void {
  const metadata = object.metadata;
  if (metadata) {
    delete metadata.managedFields;
    if (metadata.annotations?.[LAST_APPLIED] !== undefined) {
      const { [LAST_APPLIED]: _copy, ...annotations } = metadata.annotations;
      metadata.annotations = annotations;
    }
  }
  const whole = object as KubernetesObject & { spec?: { replicas?: number }; status?: unknown };
  switch (kind) {
    case 'Service':
    case 'ServiceAccount':
    case 'NetworkPolicy':
    case 'DeploymentMetadata':
      for (const field of Object.keys(whole) as (keyof typeof whole)[])
        if (field !== 'apiVersion' && field !== 'kind' && field !== 'metadata') whole[field] = undefined;
      return;
    case 'Deployment':
      whole.spec = whole.spec?.replicas === undefined ? {} : { replicas: whole.spec.replicas };
      return;
    case 'Pod':
      delete whole.spec;
      return;
    default:
      return;
  }
}
