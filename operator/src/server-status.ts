/**
 * The status conditions of an McpServer, computed from what the operator observed (its Deployment, its pods,
 * a problem met while reconciling, the gateway's last tool listing), never from what it hopes. Conditions
 * follow Kubernetes' `metav1.Condition`: CamelCase `reason`, a `message` for people, `observedGeneration`,
 * and a `lastTransitionTime` that changes only when `status` changes.
 *
 * - Available: the server can take calls: it is published to the gateways and, for a pod server, at least one
 *   replica of its Deployment is available (`status.availableReplicas`); a url server that is not published (a
 *   new object with an invalid spec) is not Available.
 * - Progressing: a rollout is under way (a generation the Deployment controller has not seen, replicas not yet
 *   updated or available, old replicas not yet gone); False when complete or when it failed.
 * - Degraded: something needs a person: the reconcile's problem (InvalidSpec, SecretMissing, CredentialMissing,
 *   …), the Deployment's ProgressDeadlineExceeded or ReplicaFailure, pods waiting in CrashLoopBackOff, on an
 *   image (ImageMissing), on a missing Secret (SecretMissing) or container config, or unschedulable.
 * - Ready: Available and the gateway's last listing of the server's tools succeeded.
 */
import type { V1ContainerStatus, V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { Condition } from '@punk/lib/controller';

/** The condition types of an McpServer, in the order {@link serverConditions} returns them. */
export const CONDITION_TYPES = ['Ready', 'Available', 'Progressing', 'Degraded'] as const;

/** What the operator observed of one McpServer. */
export interface ObservedServer {
  /** metadata.generation of the McpServer the observation is for. */
  generation: number;
  /** Whether the server runs in pods (image or package); false for a url server. */
  hasPod: boolean;
  /** The server's Deployment as read from the API server; absent when there is none (yet). */
  deployment?: V1Deployment;
  /** The server's pods (selected by its labels), of every ReplicaSet. */
  pods: V1Pod[];
  /** A problem met while reconciling, with a CamelCase reason: InvalidSpec, SecretMissing, CredentialMissing, … */
  problem?: { reason: string; message: string };
  /**
   * The gateway's last listing of the server's tools, when there was one: `ok` with the tool count, or the
   * error; `reachable: false` when the gateway could not connect at all (no HTTP answer).
   */
  listing?: { ok: boolean; toolCount?: number; error?: string; reachable?: boolean };
  /** Whether bucket `PUNK_MCP_SERVERS` holds an entry of the server (this generation or the last good one). */
  published: boolean;
  /** Whether `spec.replicas` is 0: published as scaled to zero, so the gateways refuse its calls at once. */
  scaledToZero?: boolean;
}

type Status = Condition['status'];
type Draft = { status: Status; reason: string; message: string };

/** Longest `message` of a condition (`metav1.Condition`). */
const MAX_MESSAGE = 32768;

/**
 * The four conditions of the server (Ready, Available, Progressing, Degraded, in that order), each with
 * `observedGeneration` = `observed.generation`, and `lastTransitionTime` kept from the condition of the same
 * type in `previous` when its status is unchanged, else `now` (RFC 3339).
 */
export function serverConditions(observed: ObservedServer, previous: readonly Condition[], now: Date): Condition[] {
  const available = availableCondition(observed);
  const drafts: Record<(typeof CONDITION_TYPES)[number], Draft> = {
    Ready: readyCondition(observed, available),
    Available: available,
    Progressing: progressingCondition(observed),
    Degraded: degradedCondition(observed),
  };
  return CONDITION_TYPES.map((type) => {
    const draft = drafts[type];
    const before = previous.find((condition) => condition.type === type);
    return {
      type,
      status: draft.status,
      observedGeneration: observed.generation,
      lastTransitionTime: before && before.status === draft.status ? before.lastTransitionTime : now.toISOString(),
      reason: camelCaseReason(draft.reason),
      message: draft.message.length > MAX_MESSAGE ? `${draft.message.slice(0, MAX_MESSAGE - 1)}…` : draft.message,
    };
  });
}

/** One condition whose status or reason changed: the change an Event reports. */
export interface ConditionTransition {
  type: string;
  /** The condition before; absent when it is new. */
  from?: Condition;
  to: Condition;
}

/** The conditions of `next` that are new in it or whose status or reason differs from `previous`, in `next`'s order. */
export function transitions(previous: readonly Condition[], next: readonly Condition[]): ConditionTransition[] {
  return next.flatMap((to) => {
    const from = previous.find((condition) => condition.type === to.type);
    if (from && from.status === to.status && from.reason === to.reason) return [];
    return [{ type: to.type, ...(from && { from }), to }];
  });
}

function availableCondition(observed: ObservedServer): Draft {
  if (observed.scaledToZero)
    return {
      status: 'False',
      reason: 'ScaledToZero',
      message: 'spec.replicas is 0: the gateways answer calls at once that the server is scaled to zero',
    };
  if (!observed.hasPod) {
    if (!observed.published) {
      const why = observed.problem ? `: ${observed.problem.message}` : '';
      return {
        status: 'False',
        reason: observed.problem?.reason ?? 'NotPublished',
        message: `the server is not published to the gateways${why}`,
      };
    }
    return observed.problem
      ? {
          status: 'True',
          reason: 'RemoteServer',
          message: `the gateways serve the last generation that could run; generation ${observed.generation} cannot (see Degraded)`,
        }
      : { status: 'True', reason: 'RemoteServer', message: 'a url server runs outside the cluster; there is no pod to wait for' };
  }
  const deployment = observed.deployment;
  if (!deployment) return { status: 'False', reason: 'DeploymentMissing', message: "the server's Deployment does not exist yet" };
  const desired = deployment.spec?.replicas ?? 1;
  const availableReplicas = deployment.status?.availableReplicas ?? 0;
  if (availableReplicas > 0 && !observed.published)
    return {
      status: 'False',
      reason: 'NotPublished',
      message: `${availableReplicas} of ${desired} replicas available, but the server is not published to the gateways yet`,
    };
  if (availableReplicas > 0)
    return { status: 'True', reason: 'ReplicasAvailable', message: `${availableReplicas} of ${desired} replicas available` };
  if (desired === 0) return { status: 'False', reason: 'ScaledToZero', message: 'spec.replicas is 0: no pod serves the server' };
  const condition = deployment.status?.conditions?.find((c) => c.type === 'Available');
  const why = condition?.message ? `: ${condition.message}` : '';
  return { status: 'False', reason: 'ReplicasUnavailable', message: `0 of ${desired} replicas available${why}` };
}

function progressingCondition(observed: ObservedServer): Draft {
  if (!observed.hasPod) return { status: 'False', reason: 'RemoteServer', message: 'a url server has nothing to roll out' };
  const deployment = observed.deployment;
  if (!deployment) {
    if (observed.problem)
      return { status: 'False', reason: observed.problem.reason, message: `no Deployment can be made: ${observed.problem.message}` };
    return { status: 'True', reason: 'DeploymentPending', message: "the server's Deployment is being created" };
  }
  const progressing = deployment.status?.conditions?.find((c) => c.type === 'Progressing');
  if (progressing?.reason === 'ProgressDeadlineExceeded') {
    return {
      status: 'False',
      reason: 'ProgressDeadlineExceeded',
      message: progressing.message ?? 'the rollout did not progress within its deadline',
    };
  }
  const status = deployment.status ?? {};
  const generation = deployment.metadata?.generation;
  if (generation !== undefined && (status.observedGeneration ?? 0) < generation) {
    return {
      status: 'True',
      reason: 'RolloutPending',
      message: `the Deployment controller has not yet seen generation ${generation} of the Deployment`,
    };
  }
  const desired = deployment.spec?.replicas ?? 1;
  const updated = status.updatedReplicas ?? 0;
  const replicas = status.replicas ?? 0;
  const availableReplicas = status.availableReplicas ?? 0;
  if (updated < desired) return { status: 'True', reason: 'RollingOut', message: `${updated} of ${desired} replicas updated` };
  if (replicas > updated)
    return { status: 'True', reason: 'RollingOut', message: `${replicas - updated} old replicas pending termination` };
  if (availableReplicas < updated)
    return { status: 'True', reason: 'RollingOut', message: `${availableReplicas} of ${updated} updated replicas available` };
  return { status: 'False', reason: 'RolloutComplete', message: `${desired} of ${desired} replicas updated and available` };
}

function degradedCondition(observed: ObservedServer): Draft {
  if (observed.problem) return { status: 'True', ...observed.problem };
  const conditions = observed.deployment?.status?.conditions ?? [];
  const deadline = conditions.find((c) => c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded');
  if (deadline)
    return {
      status: 'True',
      reason: 'ProgressDeadlineExceeded',
      message: deadline.message ?? 'the rollout did not progress within its deadline',
    };
  const pods = podProblem(observed.pods);
  if (pods) return { status: 'True', ...pods };
  const failure = conditions.find((c) => c.type === 'ReplicaFailure' && c.status === 'True');
  if (failure) return { status: 'True', reason: 'ReplicaFailure', message: failure.message ?? 'the Deployment could not create a pod' };
  return { status: 'False', reason: 'AsExpected', message: asExpected(observed) };
}

/** The message of Degraded=False: what is fine, claiming no more than was observed. */
function asExpected(observed: ObservedServer): string {
  if (!observed.hasPod)
    return observed.published ? 'the server is applied and published to the gateway' : 'no problem met; the server is being published';
  return observed.deployment
    ? 'the children are applied and no pod reports a problem'
    : "no problem met; the server's Deployment is being created";
}

function readyCondition(observed: ObservedServer, available: Draft): Draft {
  if (available.status !== 'True') return { status: 'False', reason: available.reason, message: available.message };
  const listing = observed.listing;
  if (!listing) return { status: 'Unknown', reason: 'ListingPending', message: "the gateway has not listed the server's tools yet" };
  if (listing.ok) {
    const count = listing.toolCount === undefined ? 'its' : `${listing.toolCount}`;
    return { status: 'True', reason: 'ToolsListed', message: `the gateway listed ${count} tools` };
  }
  const error = listing.error ?? 'no error message';
  if (listing.reachable === false) {
    return observed.hasPod
      ? {
          status: 'False',
          reason: 'BridgeUnreachable',
          message: `the gateway could not reach the server's pods (its bridge or HTTP port): ${error}`,
        }
      : { status: 'False', reason: 'ServerUnreachable', message: `the gateway could not reach the server: ${error}` };
  }
  return { status: 'False', reason: 'ListingFailed', message: `the gateway could not list the server's tools: ${error}` };
}

/** Why pods cannot serve, most severe first; the first kind found wins, counted over the pods. */
const POD_PROBLEMS = [
  'SecretMissing',
  'ContainerConfigError',
  'ImageMissing',
  'CrashLoopBackOff',
  'ContainerStartFailed',
  'Unschedulable',
] as const;
type PodProblem = (typeof POD_PROBLEMS)[number];

/** The most severe problem among `pods`, with the first such pod's details and how many pods have it. */
function podProblem(pods: readonly V1Pod[]): { reason: PodProblem; message: string } | undefined {
  const found = new Map<PodProblem, string[]>();
  const add = (reason: PodProblem, message: string) => found.set(reason, [...(found.get(reason) ?? []), message]);
  for (const pod of pods) {
    const name = pod.metadata?.name ?? '(unnamed)';
    const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
    for (const status of statuses) {
      const problem = containerProblem(status);
      if (problem) add(problem.reason, `pod ${name} container ${status.name}: ${problem.message}`);
    }
    const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
    if (scheduled?.status === 'False' && scheduled.reason === 'Unschedulable')
      add('Unschedulable', `pod ${name} cannot be scheduled: ${scheduled.message ?? 'no node fits'}`);
  }
  for (const reason of POD_PROBLEMS) {
    const messages = found.get(reason);
    if (!messages) continue;
    const more = messages.length > 1 ? ` (and ${messages.length - 1} more)` : '';
    return { reason, message: `${messages[0]}${more}` };
  }
  return undefined;
}

function containerProblem(status: V1ContainerStatus): { reason: PodProblem; message: string } | undefined {
  const waiting = status.state?.waiting;
  if (!waiting?.reason) return undefined;
  const detail = waiting.message ? `: ${waiting.message}` : '';
  switch (waiting.reason) {
    case 'ErrImagePull':
    case 'ImagePullBackOff':
    case 'InvalidImageName':
    case 'ErrImageNeverPull':
      return { reason: 'ImageMissing', message: `image ${status.image} cannot be pulled (${waiting.reason})${detail}` };
    case 'CrashLoopBackOff': {
      const last = status.lastState?.terminated;
      const exit = last ? ` after exiting with code ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}` : '';
      return { reason: 'CrashLoopBackOff', message: `restarting with back-off${exit}, ${status.restartCount} restarts${detail}` };
    }
    case 'CreateContainerConfigError':
      return /secret "[^"]+" not found/.test(waiting.message ?? '')
        ? { reason: 'SecretMissing', message: waiting.message! }
        : { reason: 'ContainerConfigError', message: `cannot be configured${detail}` };
    case 'CreateContainerError':
    case 'RunContainerError':
      return { reason: 'ContainerStartFailed', message: `cannot start (${waiting.reason})${detail}` };
    default:
      return undefined;
  }
}

/** A reason as `metav1.Condition` accepts it: letters, digits, `_`, `,` and `:`, starting with a letter. */
function camelCaseReason(reason: string): string {
  const cleaned = reason
    .replace(/[^A-Za-z0-9_,:]/g, '')
    .replace(/^[^A-Za-z]+/, '')
    .replace(/[,:]+$/, '');
  return cleaned === '' ? 'Unknown' : cleaned;
}
