/**
 * Informers of objects' metadata alone (`PartialObjectMetadata`, as controller-runtime's metadata-only watches of
 * `Owns()` with `OnlyMetadata`): the API server answers lists and watches with each object's `metadata` and no
 * `spec` or `status` (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables —
 * "Alternate representations of resources": `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`).
 * The operator watches every object of its children's kinds this way, without a label filter, so a name its cache
 * does not hold, once the cache has followed the API server past an McpServer's resourceVersion, is a name the API
 * server did not hold when that McpServer was last changed: no read is needed before taking it (mcpserver-reconciler.ts).
 */
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';

/** What a list of metadata asks for (each item a `PartialObjectMetadata`). */
export const METADATA_LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/** What a watch of metadata asks for (each event's object a `PartialObjectMetadata`). */
export const METADATA_WATCH_ACCEPT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

/**
 * The library's Watch with the metadata Accept header: it reads only `getCurrentCluster` and
 * `applySecurityAuthentication` of its config, so a config that sets the header after authenticating is enough.
 */
function metadataWatch(config: KubeConfig): Watch {
  const facade = {
    getCurrentCluster: () => config.getCurrentCluster(),
    applySecurityAuthentication: async (context: { setHeaderParam(key: string, value: string): void }) => {
      await config.applySecurityAuthentication(context as Parameters<KubeConfig['applySecurityAuthentication']>[0]);
      context.setHeaderParam('Accept', METADATA_WATCH_ACCEPT);
    },
  };
  return new Watch(facade as unknown as KubeConfig);
}

/**
 * An informer (list, then watch from its resourceVersion; its cache keyed by namespace and name) of the metadata of
 * every object at `path` (e.g. `/apis/apps/v1/deployments`), listed by `list` (which must ask for
 * {@link METADATA_LIST_ACCEPT}). Not started.
 */
export function makeMetadataInformer(
  config: KubeConfig,
  path: string,
  list: () => Promise<KubernetesListObject<KubernetesObject>>,
): ListWatch<KubernetesObject> {
  return new ListWatch<KubernetesObject>(path, metadataWatch(config), list, false);
}
