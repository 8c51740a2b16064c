/**
 * Status of the custom resources as the operator writes it: conditions in the shape of `metav1.Condition`
 * (`lastTransitionTime` changes only when `status` does), written through the status subresource only when it
 * differs from what the object holds, with an Event for each condition whose status or reason changed.
 */
import { isDeepStrictEqual } from 'node:util';
import { API_GROUP, type Condition } from '@punk/lib/controller';
import { applyStatus } from './apply.js';
import type { EventRecorder } from './events.js';
import { transitions } from './server-status.js';
import { API_VERSION_NAME, type KubeClients, type ResourceKind } from './kube.js';

/** A condition as a reconcile decides it; the time and generation are filled in by {@link setConditions}. */
export interface ConditionDecision {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/**
 * The conditions `decisions` make of `previous`: each keeps its `lastTransitionTime` when its status is
 * unchanged, else takes `now`; every one carries `observedGeneration`. Conditions of other types are dropped.
 */
export function setConditions(
  previous: readonly Condition[],
  decisions: readonly ConditionDecision[],
  now: Date,
  observedGeneration: number,
): Condition[] {
  return decisions.map((decision) => {
    const before = previous.find((c) => c.type === decision.type);
    const lastTransitionTime =
      before && before.status === decision.status ? before.lastTransitionTime : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
    return { ...decision, observedGeneration, lastTransitionTime };
  });
}

/**
 * Ready=True with `reason`, Degraded=False: the two conditions of a healthy McpCredential, McpPolicy or McpWorkflow. Both
 * carry `message` (what is working), so `kubectl describe` never shows an empty Degraded message.
 */
export function healthy(reason: string, message: string): ConditionDecision[] {
  return [
    { type: 'Ready', status: 'True', reason, message },
    { type: 'Degraded', status: 'False', reason, message: `no problem: ${message}` },
  ];
}

/** Ready=False and Degraded=True with `reason` and `message` (naming the field or object at fault). */
export function degraded(reason: string, message: string): ConditionDecision[] {
  return [
    { type: 'Ready', status: 'False', reason, message },
    { type: 'Degraded', status: 'True', reason, message },
  ];
}

/**
 * Ready=Unknown and Degraded=False with `reason`: served, but a check could not be made yet (`message` says which
 * and when it will be).
 */
export function undetermined(reason: string, message: string): ConditionDecision[] {
  return [
    { type: 'Ready', status: 'Unknown', reason, message },
    { type: 'Degraded', status: 'False', reason, message: `no problem found: ${message}` },
  ];
}

/** The conditions an object's status holds (none when it has no status yet). */
export function conditionsOf(object: { status?: unknown }): Condition[] {
  const status = object.status as { conditions?: Condition[] } | undefined;
  return Array.isArray(status?.conditions) ? status.conditions : [];
}

/** The custom resource whose status is written. */
export interface StatusSubject {
  kind: ResourceKind;
  metadata: { name: string; namespace: string; uid?: string | undefined; resourceVersion?: string | undefined };
  status?: unknown;
}

/**
 * The statuses this operator wrote whose echo its cache has not shown yet. A reconcile that runs again before the
 * watch brings its own status write back sees the object's older status in the cache; compared with that, the same
 * status would be written twice (and its conditions stamped anew). Keyed by uid.
 */
export class WrittenStatuses {
  private readonly written = new Map<string, { from: string; status: unknown }>();

  /**
   * The status `object` (as the cache holds it) has as far as this operator knows: the one it wrote last when the
   * cache still shows the resourceVersion that write was made from, else the object's own.
   */
  current(object: StatusSubject): unknown {
    const { uid, resourceVersion } = object.metadata;
    const memo = uid === undefined ? undefined : this.written.get(uid);
    if (memo && memo.from === resourceVersion) return memo.status;
    // The cache has moved past the write (its echo or a later change): the memo is of no more use.
    if (memo) this.written.delete(uid!);
    return object.status;
  }

  /** Records that `status` was written to `object` (as the cache held it when the write was computed). */
  record(object: StatusSubject, status: unknown): void {
    const { uid, resourceVersion } = object.metadata;
    if (uid !== undefined && resourceVersion !== undefined) this.written.set(uid, { from: resourceVersion, status });
  }

  /** Forgets object `uid` (deleted). */
  forget(uid: string | undefined): void {
    if (uid !== undefined) this.written.delete(uid);
  }
}

/**
 * Writes `next` as the status of `object` when it differs from the object's current status (compared as JSON,
 * so a reconcile that observes nothing new writes nothing), and queues one Event for its condition transitions (events.ts).
 * With `written`, the current status is {@link WrittenStatuses.current}'s, and the write is recorded there.
 * @returns whether a write happened.
 * @throws the API server's error (404 when the object is gone).
 */
export async function writeStatus(
  clients: KubeClients,
  recorder: EventRecorder,
  object: StatusSubject,
  next: Record<string, unknown>,
  written?: WrittenStatuses,
): Promise<boolean> {
  const known = written ? written.current(object) : object.status;
  const current = JSON.parse(JSON.stringify(known ?? {})) as unknown;
  const wanted = JSON.parse(JSON.stringify(next)) as unknown;
  if (isDeepStrictEqual(current, wanted)) return false;
  const { name, namespace } = object.metadata;
  await applyStatus(clients, object.kind, namespace, name, next);
  written?.record(object, wanted);
  const subject = { apiVersion: `${API_GROUP}/${API_VERSION_NAME}`, kind: object.kind, metadata: object.metadata };
  recorder.recordTransitions(subject, transitions(conditionsOf({ status: known }), (next.conditions as Condition[] | undefined) ?? []));
  return true;
}

/** `spec.rules[0].name`: a zod issue path as a field path of the object. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, part) => (typeof part === 'number' ? `${out}[${part}]` : out === '' ? String(part) : `${out}.${String(part)}`),
    '',
  );
}
