/**
 * The Kubernetes API as the operator uses it: one set of clients made from a KubeConfig, the custom resources'
 * coordinates, and the reading of API errors.
 */
import {
  ApiException,
  CoordinationV1Api,
  CustomObjectsApi,
  EventsV1Api,
  HttpMethod,
  KubeConfig,
  KubernetesObjectApi,
  type KubernetesListObject,
  type KubernetesObject,
  type ResponseContext,
} from '@kubernetes/client-node';
import { METADATA_LIST_ACCEPT } from './metadata-informer.js';

/** Field manager of every write the operator makes (server-side apply and status). */
export const FIELD_MANAGER = 'punk-operator';

/** Version of the custom resources the operator reconciles. */
export const API_VERSION_NAME = 'v1alpha1';

/** The custom resource kinds and their plural resource names (group `mcp.punk.dev`). */
export const resources = {
  McpServer: 'mcpservers',
  McpCredential: 'mcpcredentials',
  McpPolicy: 'mcppolicies',
  McpWorkflow: 'mcpworkflows',
} as const;
export type ResourceKind = keyof typeof resources;

/** The clients of one API server. */
export interface KubeClients {
  config: KubeConfig;
  /** Any object by apiVersion and kind (server-side apply, reads, lists, deletes), answering JSON (see JsonObjectApi). */
  objects: JsonObjectApi;
  /** The custom resources' status subresource. */
  custom: CustomObjectsApi;
  /** Leases of leader election. */
  coordination: CoordinationV1Api;
  /** events.k8s.io/v1 Events. */
  events: EventsV1Api;
}

/**
 * Makes `config` reuse one HTTP dispatcher (connection pool) per set of TLS settings. @kubernetes/client-node
 * 2.0.1 builds a new undici Agent for every request when the cluster has a CA (always, in a cluster), so each
 * request opened its own TLS connection: measured with bench/operator.mjs, 200 McpServers from a cold start took
 * 38 s and 484 MiB RSS that way, 24 s and 302 MiB with this. The key is the dispatcher options the library
 * itself derives (CA, client certificate), so a rotated certificate still gets a new pool. A no-op when the
 * library no longer has the method.
 */
function shareDispatchers(config: KubeConfig): void {
  type Create = (cluster: unknown, options: unknown) => unknown;
  const target = config as unknown as { createDispatcher?: Create; createDispatcherOptions: Create; punkShared?: true };
  const create = target.createDispatcher?.bind(config);
  if (!create || target.punkShared) return;
  const pools = new Map<string, unknown>();
  target.createDispatcher = (cluster, options) => {
    const key = dispatcherKey(target.createDispatcherOptions.call(config, cluster, options));
    if (!pools.has(key)) pools.set(key, create(cluster, options));
    return pools.get(key);
  };
  target.punkShared = true;
}

/**
 * The JSON of dispatcher options with each Buffer (CA, certificate, key: read again for every request) as base64:
 * JSON.stringify would write a Buffer as an array of byte numbers, which cost more CPU than the request itself.
 */
function dispatcherKey(options: unknown): string {
  const plain = (value: unknown): unknown => {
    if (Buffer.isBuffer(value)) return value.toString('base64');
    if (Array.isArray(value)) return value.map(plain);
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, plain(inner)]));
  };
  return JSON.stringify(plain(options));
}

/**
 * A KubernetesObjectApi whose answers are the API server's JSON as parsed, not the library's model classes: the
 * library's deserializer walks every field of a Deployment into new class instances (and dates into Date objects),
 * which cost the operator more CPU and garbage than the request itself. Watch events are such JSON already, so the
 * informers' caches hold one shape. Requests are still written by the library's serializer (a NetworkPolicy rule's
 * `_from` becomes `from`); failures are its ApiException.
 */
export class JsonObjectApi extends KubernetesObjectApi {
  /** The client of the API server `config` points at, with the namespace of its current context as the default. */
  static make(config: KubeConfig): JsonObjectApi {
    const client = config.makeApiClient(JsonObjectApi);
    client.setDefaultNamespace(config);
    return client;
  }

  /**
   * Lists the metadata of every object at `path` (e.g. `/api/v1/services`, or one namespace's
   * `/api/v1/namespaces/<ns>/services`): a `PartialObjectMetadataList`, each item's `metadata` alone (metadata-informer.ts).
   * @throws ApiException with the API server's answer.
   */
  async listMetadata(path: string): Promise<KubernetesListObject<KubernetesObject>> {
    const context = this.configuration.baseServer.makeRequestContext(path, HttpMethod.GET);
    context.setHeaderParam('Accept', METADATA_LIST_ACCEPT);
    return this.requestPromise<KubernetesListObject<KubernetesObject>>(context);
  }

  protected override async processResponse<T extends KubernetesObject>(response: ResponseContext, type?: string): Promise<T> {
    if (response.httpStatusCode < 200 || response.httpStatusCode > 299) return super.processResponse<T>(response, type);
    return JSON.parse(await response.body.text()) as T;
  }
}

/** Makes the clients of the API server `config` points at (and makes `config` share connections, see above). */
export function kubeClients(config: KubeConfig): KubeClients {
  shareDispatchers(config);
  return {
    config,
    objects: JsonObjectApi.make(config),
    custom: config.makeApiClient(CustomObjectsApi),
    coordination: config.makeApiClient(CoordinationV1Api),
    events: config.makeApiClient(EventsV1Api),
  };
}

/** The HTTP status of a failed API call (404, 409, …), or undefined when the call never got an answer. */
export function httpStatusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

/** Whether an API call failed because the object does not exist. */
export function isNotFound(error: unknown): boolean {
  return httpStatusOf(error) === 404;
}

/**
 * Whether an API call failed in a way that fails again the same way until someone changes the object or the
 * cluster: 400 (bad request), 403 (forbidden: RBAC), 404 (a kind the API server does not serve, e.g. a CRD not
 * installed), 409 other than an optimistic-concurrency conflict (an immutable field), 422 (invalid). Retrying
 * such a failure at once only loads the API server; it waits for a slow retry (or the object's next change).
 */
export function isPermanentApiError(error: unknown): boolean {
  const code = httpStatusOf(error);
  if (code === 409) return !apiErrorMessage(error).includes('the object has been modified');
  return code === 400 || code === 403 || code === 404 || code === 422;
}

/** A sentence for an API failure: the server's own `message` when it sent a Status, else the error's. */
export function apiErrorMessage(error: unknown): string {
  if (error instanceof ApiException) {
    const body: unknown = typeof error.body === 'string' ? safeJson(error.body) : error.body;
    const message = typeof body === 'object' && body !== null && 'message' in body ? String(body.message) : undefined;
    return `HTTP ${error.code}: ${message ?? error.message}`;
  }
  return error instanceof Error ? error.message : String(error);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** `<namespace>/<name>`: how logs and queue keys name an object. */
export function objectName(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
