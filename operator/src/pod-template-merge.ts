/**
 * `spec.podTemplate`: a partial PodTemplateSpec merged last into the pod Punk builds, and the checks that keep
 * it from breaking the sandbox.
 *
 * Merge rule (a subset of Kubernetes' strategic merge patch, without its `$patch` directives): maps are merged
 * key by key; scalars replace Punk's; lists replace Punk's, except the lists below, merged item by item on a key:
 * - `containers` and `initContainers` by `name`: a container of the same name is merged field by field (its
 *   lists by the same rules), a new container is added on top of Punk's container security context;
 * - `volumes`, `env`, `imagePullSecrets`, `resourceClaims` by `name`, `volumeMounts` by `mountPath`, `ports` by
 *   `containerPort`: an item with the key of one of Punk's replaces it whole, a new one is appended.
 *
 * Refused (each a {@link SpecError} naming the podTemplate field), because they would break the sandbox; the
 * rules follow the Pod Security Standards' restricted profile: `null` values (they would erase Punk's
 * settings), hostNetwork, hostPID and hostIPC true, volumes other than configMap, csi, downwardAPI, emptyDir,
 * ephemeral, persistentVolumeClaim, projected and secret (hostPath above all), hostPort, sysctls,
 * serviceAccountName and serviceAccount (the pod's identity is Punk's), automountServiceAccountToken true,
 * runAsUser, runAsGroup or fsGroup 0 and supplementalGroups with 0, runAsNonRoot false, privileged true,
 * allowPrivilegeEscalation true, readOnlyRootFilesystem false, added capabilities other than NET_BIND_SERVICE,
 * a capabilities drop list without ALL, procMount other than Default, seccomp and AppArmor profiles
 * Unconfined (and the legacy seccomp and AppArmor annotations with any value but `runtime/default`,
 * `docker/default` for seccomp, or a `localhost/` profile), seLinuxOptions with a user, a role or a type outside
 * the container types, Windows hostProcess, projected volumes with a `serviceAccountToken` source (a Kubernetes
 * token in the pod), a runtimeClassName other than `spec.sandbox.runtimeClassName` when that is set (podTemplate
 * may add a runtime class, not swap the sandbox's), and another value for one of Punk's labels or for its
 * secret-checksum annotation.
 */
import type { V1PodTemplateSpec, V1SecurityContext } from '@kubernetes/client-node';
import { SpecError } from './spec-error.js';

const ROOT = 'spec.podTemplate';

/** Lists merged item by item, by their key field. */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  volumes: 'name',
  env: 'name',
  imagePullSecrets: 'name',
  resourceClaims: 'name',
  volumeMounts: 'mountPath',
  ports: 'containerPort',
};

/** Lists whose matching items are merged field by field (the others are replaced whole). */
const MERGED_ITEMS = new Set(['containers', 'initContainers']);

const CONTAINER_LISTS = ['containers', 'initContainers', 'ephemeralContainers'] as const;

/** Volume sources the restricted Pod Security Standard allows. */
const ALLOWED_VOLUME_SOURCES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

/** SELinux types the Pod Security Standards allow. */
const ALLOWED_SELINUX_TYPES = new Set(['container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** What Punk protects in the merged pod: its labels and annotations (keys to their values), its runtime class. */
export interface ProtectedMetadata {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** `spec.sandbox.runtimeClassName`: a podTemplate may repeat it, not replace it. */
  runtimeClassName?: string;
}

// The legacy annotations for seccomp and AppArmor profiles (before the securityContext fields), and the values
// the restricted Pod Security Standard allows in them: the runtime's default profile or a profile on the node.
const SECCOMP_POD_ANNOTATION = 'seccomp.security.alpha.kubernetes.io/pod';
const SECCOMP_CONTAINER_ANNOTATION = 'container.seccomp.security.alpha.kubernetes.io/';
const APPARMOR_CONTAINER_ANNOTATION = 'container.apparmor.security.beta.kubernetes.io/';
const SECCOMP_ANNOTATION_VALUES = ['runtime/default', 'docker/default'];
const APPARMOR_ANNOTATION_VALUES = ['runtime/default'];

/**
 * Checks one podTemplate annotation that sets a seccomp or AppArmor profile the old way.
 * @throws SpecError naming `spec.podTemplate.metadata.annotations["<key>"]` for a value other than the allowed
 *   defaults or `localhost/<profile>` (`unconfined` above all).
 */
function checkProfileAnnotation(key: string, value: unknown): void {
  const allowed =
    key === SECCOMP_POD_ANNOTATION || key.startsWith(SECCOMP_CONTAINER_ANNOTATION)
      ? SECCOMP_ANNOTATION_VALUES
      : key.startsWith(APPARMOR_CONTAINER_ANNOTATION)
        ? APPARMOR_ANNOTATION_VALUES
        : undefined;
  if (allowed === undefined) return;
  const text = String(value);
  if (allowed.includes(text) || /^localhost\/[^/].*$/.test(text)) return;
  throw new SpecError(
    `${ROOT}.metadata.annotations["${key}"]`,
    `"${text}" would loosen the sandbox's profile; use ${allowed.join(' or ')} or localhost/<profile> (Pod Security Standards, restricted)`,
  );
}

/**
 * Merges `spec.podTemplate` into `base` by the rule of this module, after checking it.
 * @param containerSecurityContext the security context a container new to the pod starts from.
 * @throws SpecError naming the `spec.podTemplate…` field that is malformed (not an object where the pod has
 *   one, a list item without its key) or refused.
 */
export function mergePodTemplate(
  base: V1PodTemplateSpec,
  podTemplate: Json,
  protect: ProtectedMetadata,
  containerSecurityContext: V1SecurityContext,
): V1PodTemplateSpec {
  checkPodTemplate(podTemplate, protect);
  return merge(base, podTemplate, ROOT, undefined, containerSecurityContext) as V1PodTemplateSpec;
}

function merge(base: unknown, patch: unknown, path: string, field: string | undefined, containerBase: V1SecurityContext): unknown {
  if (isObject(base)) {
    if (!isObject(patch)) throw new SpecError(path, 'must be an object, as in a PodTemplateSpec');
    const out: Json = { ...base };
    for (const [key, value] of Object.entries(patch)) {
      out[key] = key in base ? merge(base[key], value, `${path}.${key}`, key, containerBase) : structuredClone(value);
    }
    return out;
  }
  if (Array.isArray(base)) {
    if (!Array.isArray(patch)) throw new SpecError(path, 'must be a list, as in a PodTemplateSpec');
    const key = field === undefined ? undefined : MERGE_KEYS[field];
    if (key === undefined) return structuredClone(patch);
    const out: unknown[] = [...(base as unknown[])];
    patch.forEach((item, i) => {
      const at = out.findIndex((existing) => isObject(existing) && existing[key] === (item as Json)[key]);
      if (at === -1) {
        const added: unknown = MERGED_ITEMS.has(field!)
          ? merge({ securityContext: structuredClone(containerBase) }, item, `${path}[${i}]`, undefined, containerBase)
          : structuredClone(item);
        out.push(added);
      } else out[at] = MERGED_ITEMS.has(field!) ? merge(out[at], item, `${path}[${i}]`, undefined, containerBase) : structuredClone(item);
    });
    return out;
  }
  return structuredClone(patch);
}

/**
 * Checks `spec.podTemplate` alone: its shape where the merge needs one (objects, list items with their key),
 * and every refused setting listed in this module's comment.
 * @throws SpecError naming the first offending field.
 */
export function checkPodTemplate(podTemplate: Json, protect: ProtectedMetadata): void {
  checkNoNull(podTemplate, ROOT);
  for (const key of Object.keys(podTemplate)) {
    if (key !== 'metadata' && key !== 'spec') throw new SpecError(`${ROOT}.${key}`, 'a PodTemplateSpec has only metadata and spec');
  }
  const metadata = objectAt(podTemplate, 'metadata', ROOT);
  for (const kind of ['labels', 'annotations'] as const) {
    const values = objectAt(metadata, kind, `${ROOT}.metadata`);
    for (const [key, value] of Object.entries(values)) {
      if (key in protect[kind] && value !== protect[kind][key]) {
        throw new SpecError(`${ROOT}.metadata.${kind}["${key}"]`, `is set by Punk to "${protect[kind][key]}" and cannot be changed`);
      }
      if (kind === 'annotations') checkProfileAnnotation(key, value);
    }
  }
  const spec = objectAt(podTemplate, 'spec', ROOT);
  const at = (field: string) => `${ROOT}.spec.${field}`;
  for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
    if (spec[field] === true) throw new SpecError(at(field), "would share the node's namespace with the server; the sandbox refuses it");
  }
  for (const field of ['serviceAccountName', 'serviceAccount'] as const) {
    if (spec[field] !== undefined)
      throw new SpecError(
        at(field),
        "the pod runs as the ServiceAccount Punk makes for the namespace's servers, without a token; it cannot be changed",
      );
  }
  if (spec.runtimeClassName !== undefined && protect.runtimeClassName !== undefined && spec.runtimeClassName !== protect.runtimeClassName) {
    throw new SpecError(
      at('runtimeClassName'),
      `would replace the sandbox's runtime class ${protect.runtimeClassName} (spec.sandbox.runtimeClassName); change it there, or remove this one`,
    );
  }
  if (spec.automountServiceAccountToken === true)
    throw new SpecError(at('automountServiceAccountToken'), 'a server pod gets no ServiceAccount token; it must not be true');
  checkPodSecurityContext(objectAt(spec, 'securityContext', `${ROOT}.spec`), at('securityContext'));
  for (const list of CONTAINER_LISTS) {
    listAt(spec, list, `${ROOT}.spec`).forEach((container, i) => {
      const where = at(`${list}[${i}]`);
      if (!isObject(container)) throw new SpecError(where, 'must be an object, as in a PodSpec');
      if (typeof container.name !== 'string')
        throw new SpecError(`${where}.name`, 'is required: containers are merged by name (the server container is "server")');
      checkContainerSecurityContext(objectAt(container, 'securityContext', where), `${where}.securityContext`);
      listAt(container, 'ports', where).forEach((port, j) => {
        if (isObject(port) && port.hostPort !== undefined && port.hostPort !== 0)
          throw new SpecError(`${where}.ports[${j}].hostPort`, 'would open a port on the node; the sandbox refuses it');
      });
      checkKeyedItems(container, where);
    });
  }
  listAt(spec, 'volumes', `${ROOT}.spec`).forEach((volume, i) => checkVolume(volume, at(`volumes[${i}]`)));
  checkKeyedItems(spec, `${ROOT}.spec`);
}

/**
 * Checks one pod volume (of `spec.sandbox.volumes` or of the podTemplate): an object with a name and a volume
 * source the restricted Pod Security Standard allows, and no projected `serviceAccountToken` (the pod gets no
 * Kubernetes token; a clusterTrustBundle holds only public certificates and is allowed).
 * @throws SpecError naming `<field>.name`, `<field>.<source>` or `<field>.projected.sources[j].serviceAccountToken`.
 */
export function checkVolume(volume: unknown, field: string): void {
  if (!isObject(volume)) throw new SpecError(field, 'must be a Volume object (name and one volume source)');
  if (typeof volume.name !== 'string') throw new SpecError(`${field}.name`, 'is required');
  for (const source of Object.keys(volume)) {
    if (source !== 'name' && !ALLOWED_VOLUME_SOURCES.has(source)) {
      throw new SpecError(`${field}.${source}`, `is not a volume type the sandbox allows (${[...ALLOWED_VOLUME_SOURCES].join(', ')})`);
    }
  }
  if (!isObject(volume.projected)) return;
  listAt(volume.projected, 'sources', `${field}.projected`).forEach((source, j) => {
    if (isObject(source) && source.serviceAccountToken !== undefined) {
      throw new SpecError(
        `${field}.projected.sources[${j}].serviceAccountToken`,
        "would put a Kubernetes token in the server's pod, which runs without one; the sandbox refuses it",
      );
    }
  });
}

function checkNoNull(value: unknown, path: string): void {
  if (value === null) throw new SpecError(path, "must not be null: podTemplate can add and replace settings, not remove Punk's");
  if (Array.isArray(value)) value.forEach((item, i) => checkNoNull(item, `${path}[${i}]`));
  else if (isObject(value)) for (const [key, item] of Object.entries(value)) checkNoNull(item, `${path}.${key}`);
}

function objectAt(parent: Json, key: string, path: string): Json {
  const value = parent[key];
  if (value === undefined) return {};
  if (!isObject(value)) throw new SpecError(`${path}.${key}`, 'must be an object, as in a PodTemplateSpec');
  return value;
}

function listAt(parent: Json, key: string, path: string): unknown[] {
  const value = parent[key];
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new SpecError(`${path}.${key}`, 'must be a list, as in a PodTemplateSpec');
  return value;
}

/** Every merged list under `parent` has items with their key (except containers, checked with a better message). */
function checkKeyedItems(parent: Json, path: string): void {
  for (const [field, key] of Object.entries(MERGE_KEYS)) {
    if (MERGED_ITEMS.has(field)) continue;
    listAt(parent, field, path).forEach((item, i) => {
      if (!isObject(item) || item[key] === undefined)
        throw new SpecError(`${path}.${field}[${i}].${key}`, `is required: ${field} are merged by ${key}`);
    });
  }
}

/** Settings refused in both a pod's and a container's security context. */
function checkCommonSecurityContext(context: Json, path: string): void {
  if (context.runAsNonRoot === false) throw new SpecError(`${path}.runAsNonRoot`, 'must stay true: the server never runs as root');
  for (const field of ['runAsUser', 'runAsGroup'] as const) {
    if (context[field] === 0) throw new SpecError(`${path}.${field}`, 'must not be 0 (root): the server never runs as root');
  }
  for (const profile of ['seccompProfile', 'appArmorProfile'] as const) {
    const value = context[profile];
    if (isObject(value) && value.type === 'Unconfined')
      throw new SpecError(`${path}.${profile}.type`, 'must not be Unconfined: use RuntimeDefault or Localhost');
  }
  const seLinux = context.seLinuxOptions;
  if (isObject(seLinux)) {
    for (const field of ['user', 'role'] as const) {
      if (seLinux[field] !== undefined) throw new SpecError(`${path}.seLinuxOptions.${field}`, 'must not be set (Pod Security Standards)');
    }
    if (seLinux.type !== undefined && !(typeof seLinux.type === 'string' && ALLOWED_SELINUX_TYPES.has(seLinux.type))) {
      throw new SpecError(`${path}.seLinuxOptions.type`, `must be one of ${[...ALLOWED_SELINUX_TYPES].join(', ')}`);
    }
  }
  const windows = context.windowsOptions;
  if (isObject(windows) && windows.hostProcess === true)
    throw new SpecError(`${path}.windowsOptions.hostProcess`, 'would run the server as a process of the node; the sandbox refuses it');
}

function checkPodSecurityContext(context: Json, path: string): void {
  checkCommonSecurityContext(context, path);
  if (context.fsGroup === 0) throw new SpecError(`${path}.fsGroup`, "must not be 0 (root's group)");
  if (Array.isArray(context.supplementalGroups) && context.supplementalGroups.includes(0)) {
    throw new SpecError(`${path}.supplementalGroups`, "must not contain 0 (root's group)");
  }
  if (Array.isArray(context.sysctls) && context.sysctls.length > 0)
    throw new SpecError(`${path}.sysctls`, "would change the node's kernel settings for the pod; the sandbox refuses them");
}

function checkContainerSecurityContext(context: Json, path: string): void {
  checkCommonSecurityContext(context, path);
  if (context.privileged === true)
    throw new SpecError(`${path}.privileged`, 'must not be true: a privileged container escapes the sandbox');
  if (context.allowPrivilegeEscalation === true) throw new SpecError(`${path}.allowPrivilegeEscalation`, 'must stay false');
  if (context.readOnlyRootFilesystem === false)
    throw new SpecError(`${path}.readOnlyRootFilesystem`, 'must stay true: write to /tmp, HOME or a volume instead');
  if (context.procMount !== undefined && context.procMount !== 'Default') throw new SpecError(`${path}.procMount`, 'must be Default');
  const capabilities = context.capabilities;
  if (isObject(capabilities)) {
    const added = Array.isArray(capabilities.add) ? capabilities.add.filter((c) => c !== 'NET_BIND_SERVICE') : [];
    if (added.length > 0) throw new SpecError(`${path}.capabilities.add`, `may add only NET_BIND_SERVICE, not ${added.join(', ')}`);
    if (capabilities.drop !== undefined && !(Array.isArray(capabilities.drop) && capabilities.drop.includes('ALL'))) {
      throw new SpecError(`${path}.capabilities.drop`, 'must contain ALL');
    }
  }
}
