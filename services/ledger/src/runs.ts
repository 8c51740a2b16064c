import { namespacedName, WORKFLOW_SERVER, type LedgerEvent } from '@punk/lib';

/** What a run's summary row says about it. Times are RFC 3339 strings. */
export interface RunSummary {
  runId: string;
  tenant: string;
  firstAt: string;
  lastAt: string;
  eventCount: number;
  /** Distinct event types of the run, sorted. */
  types: string[];
  /** The server of its first event that names one; `punk.workflow` for a workflow run. */
  server?: string;
  /** The tool called, when the run is a tools/call. */
  tool?: string;
  /** Who ran it: the principal subject of its first event that names one (for a workflow run, the caller the agent acts for). */
  subject?: string;
  /** What started it: the `data.trigger` of its first event that states one (`hook`: a prompt posted by a hook). */
  trigger?: string;
  /** `ok`, `error`, `denied`, `approval_required`, or the `outcome` a completion event states. */
  outcome?: string;
}

/** A run's contribution from a slice of its events, merged into the `runs` row. */
export interface RunDelta {
  tenant: string;
  runId: string;
  firstAt: Date;
  lastAt: Date;
  eventCount: number;
  types: string[];
  server: string | undefined;
  tool: string | undefined;
  subject: string | undefined;
  trigger: string | undefined;
  outcome: string | undefined;
}

const str = (value: unknown): string | undefined => (typeof value === 'string' && value.length > 0 ? value : undefined);

/**
 * The tool an event names: `data.tool` or `data.name` on `tool.*` events, `data.target` on a tool decision (the
 * workflow's tool `punk_workflow__<target>` on the decision of a workflow's trigger), `data.tool` on `workflow.started`.
 */
function toolOf(event: LedgerEvent): string | undefined {
  if (event.type.startsWith('tool.')) return str(event.data.tool) ?? str(event.data.name);
  // A workflow run: the workflow's tool on /mcp (`punk_workflow__<name>`), named by its first event.
  if (event.type === 'workflow.started') return str(event.data.tool);
  if (event.type === 'governance.decision' && event.data.kind === 'tool') {
    const target = str(event.data.target);
    // The decision on a workflow's trigger names the workflow: its run's tool is the workflow's tool, as above.
    return target !== undefined && event.server === WORKFLOW_SERVER ? namespacedName(WORKFLOW_SERVER, target) : target;
  }
  return undefined;
}

/**
 * The outcome an event states: a `*.completed` event gives `data.outcome`, or
 * `error` when `data.isError` is true or `data.error` is present, else `ok`;
 * a governance decision that is not `allow` gives `denied` or `approval_required`; a `workflow.failed` its
 * `data.outcome` (`failed`, `interrupted`); a `workflow.cancelled` `cancelled`.
 */
function outcomeOf(event: LedgerEvent): string | undefined {
  if (event.type === 'workflow.failed') return str(event.data.outcome) ?? 'failed';
  if (event.type === 'workflow.cancelled') return 'cancelled';
  if (event.type.endsWith('.completed')) {
    const stated = str(event.data.outcome);
    if (stated) return stated;
    return event.data.isError === true || event.data.error !== undefined ? 'error' : 'ok';
  }
  if (event.type === 'governance.decision') {
    if (event.data.decision === 'deny') return 'denied';
    if (event.data.decision === 'approval_required') return 'approval_required';
  }
  return undefined;
}

/** Folds events (in chain order) into one delta per run; later events' outcome wins. */
export function runDeltas(events: LedgerEvent[]): RunDelta[] {
  const byRun = new Map<string, RunDelta>();
  for (const event of events) {
    const key = JSON.stringify([event.tenant, event.runId]);
    const at = new Date(event.occurredAt);
    let delta = byRun.get(key);
    if (!delta) {
      delta = {
        tenant: event.tenant,
        runId: event.runId,
        firstAt: at,
        lastAt: at,
        eventCount: 0,
        types: [],
        server: undefined,
        tool: undefined,
        subject: undefined,
        trigger: undefined,
        outcome: undefined,
      };
      byRun.set(key, delta);
    }
    if (at < delta.firstAt) delta.firstAt = at;
    if (at > delta.lastAt) delta.lastAt = at;
    delta.eventCount += 1;
    if (!delta.types.includes(event.type)) delta.types.push(event.type);
    // A workflow run is filed under the server that lists workflows (its first event), not under its first node's.
    if (event.type === 'workflow.started') delta.server = WORKFLOW_SERVER;
    else delta.server ??= event.server;
    delta.tool ??= toolOf(event);
    // A workflow run's events are the agent's, acting for the caller: the caller ran it.
    delta.subject ??= event.principal?.actingFor?.subject ?? event.principal?.subject;
    delta.trigger ??= str(event.data.trigger);
    delta.outcome = outcomeOf(event) ?? delta.outcome;
  }
  return [...byRun.values()];
}
