/**
 * Writes of the operator's desired state, by server-side apply
 * (https://kubernetes.io/docs/reference/using-api/server-side-apply/) with one field manager,
 * `punk-operator`, and `force`: the operator owns every field it sets, so applying the same object again
 * changes nothing (the API server keeps the resourceVersion), and a hand edit of a field it owns is put back
 * on the next reconcile. Fields it does not set (a HorizontalPodAutoscaler's replicas, annotations added by
 * hand) are left to their owners.
 */
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import { API_GROUP } from '@punk/lib/controller';
import { API_VERSION_NAME, FIELD_MANAGER, isNotFound, resources, type KubeClients, type ResourceKind } from './kube.js';

/** A whole object to apply: apiVersion, kind, metadata.name and metadata.namespace set. */
export type ApplyObject = KubernetesObject & { apiVersion: string; kind: string; metadata: { name: string; namespace: string } };

/**
 * Applies `object` (server-side apply, field manager `punk-operator`, force) and returns it as stored.
 * @throws the API server's error (`ApiException`: 422 naming the invalid field, 403, …).
 */
export async function applyObject<T extends KubernetesObject>(clients: KubeClients, object: ApplyObject): Promise<T> {
  return clients.objects.patch<T>(object as unknown as T, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
}

/**
 * Deletes `object` (background propagation, so its own children go with it); a no-op when it is already gone.
 * @throws the API server's error other than 404.
 */
export async function deleteObject(clients: KubeClients, object: ApplyObject): Promise<void> {
  try {
    await clients.objects.delete(object, undefined, undefined, undefined, undefined, 'Background');
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}

/**
 * Writes `status` of a custom resource through its status subresource, by server-side apply with the
 * operator's field manager: the status is the operator's alone, so it applies the whole of it.
 * @throws the API server's error (404 when the object is gone, 422 naming an invalid status field).
 */
export async function applyStatus(
  clients: KubeClients,
  kind: ResourceKind,
  namespace: string,
  name: string,
  status: Record<string, unknown>,
): Promise<void> {
  await clients.custom.patchNamespacedCustomObjectStatus(
    {
      group: API_GROUP,
      version: API_VERSION_NAME,
      namespace,
      plural: resources[kind],
      name,
      body: { apiVersion: `${API_GROUP}/${API_VERSION_NAME}`, kind, metadata: { name, namespace }, status },
      fieldManager: FIELD_MANAGER,
      force: true,
    },
    setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
  );
}

/**
 * Sets `metadata.finalizers` of a custom resource to `finalizers` by a JSON merge patch carrying the
 * resourceVersion it was computed from (a concurrent change makes it fail with 409 and the reconcile retries).
 */
export async function setFinalizers(
  clients: KubeClients,
  kind: ResourceKind,
  namespace: string,
  name: string,
  resourceVersion: string,
  finalizers: string[],
): Promise<void> {
  await clients.custom.patchNamespacedCustomObject(
    {
      group: API_GROUP,
      version: API_VERSION_NAME,
      namespace,
      plural: resources[kind],
      name,
      body: { metadata: { resourceVersion, finalizers } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}
