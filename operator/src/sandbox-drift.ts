/**
 * Drift of a server's Deployment from its sandbox that the operator's apply cannot undo. Server-side apply owns only
 * the fields the operator sets, so another field manager may add what the operator never sets (`hostNetwork: true`,
 * a hostPath volume, a privileged sidecar, `capabilities.add`) and every apply leaves it in place. This compares the
 * Deployment as stored after the apply with the one the operator built and names each such field, with the field
 * manager that set it (from `metadata.managedFields`), for a Degraded condition (`SandboxDrift`) and its Event.
 * The chart's ValidatingAdmissionPolicy refuses such changes in the first place (docs/operator.md).
 */
import type { V1Container, V1Deployment, V1ManagedFieldsEntry, V1PodSpec } from '@kubernetes/client-node';

/** Pod-level booleans that give a pod the host's namespaces or another container's processes. */
const HOST_FLAGS = ['hostNetwork', 'hostPID', 'hostIPC', 'shareProcessNamespace'] as const;

/** One drifted field: its path in the Deployment and what it holds now. */
export interface DriftedField {
  /** `spec.template.spec.hostNetwork`, `spec.template.spec.containers[name=server].securityContext`, … */
  field: string;
  /** What is wrong with it, for people (`is true`, `was added`, …). */
  problem: string;
  /** The field managers that set it (none found: the object has no managedFields for it). */
  managers: string[];
}

/**
 * Every field of `observed`'s pod template that loosens the sandbox of `desired` (the same Deployment as the
 * operator built it): host namespaces, the service account and its token, the runtime class, the pod's and each
 * container's securityContext, containers and volumes it did not make, any hostPath volume. Empty when none.
 */
export function sandboxDrift(desired: V1Deployment, observed: V1Deployment): DriftedField[] {
  const want = desired.spec?.template.spec ?? ({ containers: [] } as V1PodSpec);
  const have = observed.spec?.template.spec ?? ({ containers: [] } as V1PodSpec);
  const managed = observed.metadata?.managedFields ?? [];
  const base = ['spec', 'template', 'spec'];
  const out: DriftedField[] = [];
  const add = (path: string[], field: string, problem: string) =>
    out.push({ field: `spec.template.spec.${field}`, problem, managers: managersOf(managed, [...base, ...path]) });

  for (const flag of HOST_FLAGS) if (have[flag] === true && want[flag] !== true) add([flag], flag, 'is true');
  for (const field of ['automountServiceAccountToken', 'serviceAccountName', 'runtimeClassName'] as const) {
    if (!same(have[field], want[field]))
      add([field], field, `is ${JSON.stringify(have[field] ?? null)}, not ${JSON.stringify(want[field] ?? null)}`);
  }
  for (const at of differences(have.securityContext, want.securityContext, ['securityContext']))
    add(at, at.join('.'), `is ${JSON.stringify(valueAt(have, at) ?? null)}`);
  for (const list of ['initContainers', 'containers'] as const) {
    const wanted = new Map((want[list] ?? []).map((c: V1Container) => [c.name, c]));
    for (const container of have[list] ?? []) {
      const key = [list, `k:{"name":"${container.name}"}`];
      const at = `${list}[name=${container.name}]`;
      const own = wanted.get(container.name);
      if (!own) add(key, at, 'was added');
      else
        for (const path of differences(container.securityContext, own.securityContext, ['securityContext']))
          add([...key, ...path], `${at}.${path.join('.')}`, `is ${JSON.stringify(valueAt(container, path) ?? null)}`);
    }
  }
  const volumes = new Set((want.volumes ?? []).map((v) => v.name));
  for (const volume of have.volumes ?? []) {
    const key = ['volumes', `k:{"name":"${volume.name}"}`];
    if (volume.hostPath) add(key, `volumes[name=${volume.name}].hostPath`, `mounts ${volume.hostPath.path} of the node`);
    else if (!volumes.has(volume.name)) add(key, `volumes[name=${volume.name}]`, 'was added');
  }
  return out;
}

/** One sentence for the drifted fields of Deployment `namespace/name`, naming each field and who set it. */
export function driftMessage(namespace: string, name: string, fields: readonly DriftedField[]): string {
  const parts = fields.map((f) => `${f.field} ${f.problem}${f.managers.length ? ` (set by ${f.managers.join(', ')})` : ''}`);
  return `Deployment ${namespace}/${name} drifted from its sandbox: ${parts.join('; ')}; undo the change (the operator does not own these fields)`;
}

/**
 * Whether two values are the same JSON whatever the order of their keys (API objects come back as class instances
 * with the model's key order, built ones as plain objects in the order they were written).
 */
function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a ?? null)) === JSON.stringify(canonical(b ?? null));
}

/**
 * The paths (below `prefix`) where `have` differs from `want`: each key of either object whose values differ, down
 * to the first value that is not an object (a list is compared whole: the sandbox's lists are atomic).
 */
function differences(have: unknown, want: unknown, prefix: string[]): string[][] {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (same(have, want)) return [];
  if (!isObject(have) || !isObject(want)) return [prefix];
  const keys = new Set([...Object.keys(have), ...Object.keys(want)].filter((k) => have[k] !== undefined || want[k] !== undefined));
  return [...keys].sort().flatMap((k) => differences(have[k], want[k], [...prefix, k]));
}

/** The value at `path` of `object`. */
function valueAt(object: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], object);
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, canonical(v)]));
}

/** The field managers whose `fieldsV1` holds `path` (`f:` keys, or `k:{…}` list keys given whole). */
function managersOf(managed: readonly V1ManagedFieldsEntry[], path: readonly string[]): string[] {
  const found = managed.filter((entry) => {
    let node = entry.fieldsV1 as Record<string, unknown> | undefined;
    for (const step of path) {
      node = node?.[step.startsWith('k:') ? step : `f:${step}`] as Record<string, unknown> | undefined;
      if (node === undefined) return false;
    }
    return true;
  });
  return [...new Set(found.map((entry) => entry.manager ?? '(unnamed)'))];
}
