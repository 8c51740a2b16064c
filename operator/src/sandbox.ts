/**
 * The sandbox every pod Punk makes runs in (shared/design.md, "Sandbox defaults for server pods"): a fixed
 * non-root user, a read-only root filesystem with writable emptyDirs for /tmp and HOME, no privilege
 * escalation, no capabilities, the RuntimeDefault seccomp profile, no service account token, and requests
 * and limits on every container. Also the labels and owner references every child of an McpServer carries.
 */
import type {
  KubernetesObject,
  V1Container,
  V1OwnerReference,
  V1PodSecurityContext,
  V1ResourceRequirements,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { API_VERSION, type McpServer } from '@punk/lib/controller';
import { SpecError } from './spec-error.js';

/** The uid and gid every container runs as (the `nonroot` user of distroless images). */
export const SANDBOX_UID = 65532;

/** Where the writable HOME emptyDir is mounted, and the value of HOME. */
export const HOME_DIR = '/home/punk';

/** Names of the emptyDir volumes Punk adds; `spec.sandbox.volumes` may not reuse them. */
export const TMP_VOLUME = 'tmp';
export const HOME_VOLUME = 'home';

/** Which part of a server a child belongs to (`app.kubernetes.io/component`). */
export type Component = 'mcp-server' | 'egress-proxy';

/** Label keys Punk sets on every child; a podTemplate may not change them. */
export const SERVER_LABEL = 'mcp.punk.dev/server';
export const MANAGED_BY = 'punk-operator';

/**
 * The labels of every child of `server`: app.kubernetes.io/name and /instance (the server's name),
 * /component, /managed-by (punk-operator) and mcp.punk.dev/server (the server's name).
 */
export function childLabels(server: McpServer, component: Component): Record<string, string> {
  return {
    'app.kubernetes.io/name': server.metadata.name,
    'app.kubernetes.io/instance': server.metadata.name,
    'app.kubernetes.io/component': component,
    'app.kubernetes.io/managed-by': MANAGED_BY,
    [SERVER_LABEL]: server.metadata.name,
  };
}

/** Whether McpServer `server` (as stored, not yet parsed) runs in pods: neither a `url` nor an `openapi` server. */
export function hasPods(server: KubernetesObject): boolean {
  const spec = (server as { spec?: { url?: unknown; openapi?: unknown } }).spec;
  return spec?.url === undefined && spec?.openapi === undefined;
}

/** The labels that select the pods of one component of a server (a Deployment's selector, a NetworkPolicy's podSelector). */
export function selectorLabels(server: McpServer, component: Component): Record<string, string> {
  return { [SERVER_LABEL]: server.metadata.name, 'app.kubernetes.io/component': component };
}

/** The owner reference of every child: the McpServer, as controller, blocking its deletion until the child is gone. */
export function ownerReference(server: McpServer): V1OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: 'McpServer',
    name: server.metadata.name,
    uid: server.metadata.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The pod-level security context: non-root uid/gid 65532, fsGroup 65532, seccomp RuntimeDefault. */
export function podSecurityContext(): V1PodSecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    fsGroup: SANDBOX_UID,
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** The container-level security context: read-only root, no privilege escalation, all capabilities dropped. */
export function containerSecurityContext(): V1SecurityContext {
  return {
    runAsNonRoot: true,
    runAsUser: SANDBOX_UID,
    runAsGroup: SANDBOX_UID,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    privileged: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

/** The writable emptyDirs: /tmp (256Mi) and HOME (1Gi, room for the npm and uv caches of a package server). */
export function writableVolumes(): V1Volume[] {
  return [
    { name: TMP_VOLUME, emptyDir: { sizeLimit: '256Mi' } },
    { name: HOME_VOLUME, emptyDir: { sizeLimit: '1Gi' } },
  ];
}

/** Mounts of {@link writableVolumes}. */
export function writableMounts(): V1VolumeMount[] {
  return [
    { name: TMP_VOLUME, mountPath: '/tmp' },
    { name: HOME_VOLUME, mountPath: HOME_DIR },
  ];
}

/**
 * Environment that makes a read-only root filesystem livable: HOME and the XDG, npm and uv cache directories
 * under it (so `npx` and `uvx` can download and unpack), TMPDIR on the /tmp emptyDir.
 */
export function sandboxEnv(): { name: string; value: string }[] {
  return [
    { name: 'HOME', value: HOME_DIR },
    { name: 'TMPDIR', value: '/tmp' },
    { name: 'XDG_CACHE_HOME', value: `${HOME_DIR}/.cache` },
    { name: 'XDG_DATA_HOME', value: `${HOME_DIR}/.local/share` },
    { name: 'XDG_CONFIG_HOME', value: `${HOME_DIR}/.config` },
    { name: 'npm_config_cache', value: `${HOME_DIR}/.npm` },
    { name: 'npm_config_update_notifier', value: 'false' },
    { name: 'UV_CACHE_DIR', value: `${HOME_DIR}/.cache/uv` },
    { name: 'UV_TOOL_DIR', value: `${HOME_DIR}/.local/share/uv/tools` },
    { name: 'UV_PYTHON_INSTALL_DIR', value: `${HOME_DIR}/.local/share/uv/python` },
  ];
}

/** Requests and limits of one resource, as Kubernetes quantities. */
type Quantities = { cpu: string; memory: string };

/** Default compute resources of a server container (a Node or Python MCP server with its runner). */
export const SERVER_RESOURCES: { requests: Quantities; limits: Quantities } = {
  requests: { cpu: '50m', memory: '128Mi' },
  limits: { cpu: '1', memory: '512Mi' },
};

/** Compute resources of Punk's own small containers (the bridge's init copy, the egress proxy). */
export const HELPER_RESOURCES: { requests: Quantities; limits: Quantities } = {
  requests: { cpu: '10m', memory: '32Mi' },
  limits: { cpu: '500m', memory: '256Mi' },
};

// Kubernetes' quantity syntax (k8s.io/apimachinery/pkg/api/resource, "Quantity"): a decimal number with an
// optional binary (Ki…Ei), decimal (m, k, M…E) or exponent suffix.
const QUANTITY = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$/;
const SUFFIX: Record<string, number> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The value of a Kubernetes quantity as a number (`500m` → 0.5, `1Gi` → 1073741824); undefined when not a quantity. */
export function quantityValue(quantity: string): number | undefined {
  const match = QUANTITY.exec(quantity);
  if (!match) return undefined;
  const suffix = match[2] ?? '';
  const factor = suffix === '' ? 1 : /^[eE]/.test(suffix) ? 10 ** Number(suffix.slice(1)) : SUFFIX[suffix]!;
  return Number(match[1]) * factor;
}

/**
 * The server container's resources: `spec.resources` over {@link SERVER_RESOURCES}, key by key. A default never
 * makes the pair invalid: a request the spec raises above the default limit raises the limit to it, a limit the
 * spec lowers below the default request lowers the request to it.
 * @throws SpecError naming `spec.resources.<requests|limits>.<cpu|memory>` for a value that is not a quantity,
 *   or a request above the limit when the spec sets both.
 */
export function serverResources(spec: McpServer['spec']): V1ResourceRequirements {
  const requests: Record<string, string> = { ...SERVER_RESOURCES.requests };
  const limits: Record<string, string> = { ...SERVER_RESOURCES.limits };
  for (const key of ['cpu', 'memory'] as const) {
    const request = spec.resources?.requests?.[key];
    const limit = spec.resources?.limits?.[key];
    for (const [kind, value] of [
      ['requests', request],
      ['limits', limit],
    ] as const) {
      if (value !== undefined && quantityValue(value) === undefined) {
        throw new SpecError(`spec.resources.${kind}.${key}`, `"${value}" is not a Kubernetes quantity (such as 100m, 0.5, 128Mi or 1Gi)`);
      }
    }
    if (request !== undefined) requests[key] = request;
    if (limit !== undefined) limits[key] = limit;
    if (quantityValue(requests[key]!)! <= quantityValue(limits[key]!)!) continue;
    if (request !== undefined && limit !== undefined) {
      throw new SpecError(
        `spec.resources.requests.${key}`,
        `the request ${request} is above the limit ${limit} (spec.resources.limits.${key}); a request must not exceed its limit`,
      );
    }
    if (request !== undefined) limits[key] = request;
    else requests[key] = limits[key]!;
  }
  return { requests, limits };
}

/** A container of Punk's own with the sandbox's security context, writable mounts and {@link HELPER_RESOURCES}. */
export function helperContainer(container: V1Container): V1Container {
  return {
    ...container,
    securityContext: containerSecurityContext(),
    resources: { requests: { ...HELPER_RESOURCES.requests }, limits: { ...HELPER_RESOURCES.limits } },
  };
}
