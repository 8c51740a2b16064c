/**
 * The workflows API (docs/workflows.md "The API"): the tenant's workflows, one with its spec, and starting a run,
 * whose node-by-node trace is then read from the ledger (`GET /runs/{runId}`: `workflow.started`, `node.started`,
 * `node.completed`, …, `workflow.completed`, `workflow.failed` or `workflow.cancelled`), and cancelling it.
 */
import type { WorkflowDetail, WorkflowRunReply, WorkflowView } from '@punk/lib';
import { apiRequest } from './api.js';
import type { RunEvent } from './api-runs.js';

export type { WorkflowDetail, WorkflowRunReply, WorkflowView };

const encode = encodeURIComponent;

/** `GET /workflows`. */
export const listWorkflows = () => apiRequest<{ workflows: WorkflowView[] }>('GET', '/workflows').then((a) => a.workflows);
/** `GET /workflows/{name}`: the view and its spec. */
export const getWorkflow = (name: string) =>
  apiRequest<{ workflow: WorkflowDetail }>('GET', `/workflows/${encode(name)}`).then((a) => a.workflow);
/** `POST /workflows/{name}/runs`: starts a run and waits up to `waitSeconds` (0 to 30) for it to end. */
export const runWorkflow = (name: string, args: Record<string, unknown>, waitSeconds = 10) =>
  apiRequest<WorkflowRunReply>('POST', `/workflows/${encode(name)}/runs`, { arguments: args, waitSeconds });

/** `POST /workflows/{name}/runs/{runId}/cancel`: `cancelled`, or `running` while it stops; a 409 names the state a run ended in. */
export const cancelWorkflowRun = (name: string, runId: string) =>
  apiRequest<WorkflowRunReply>('POST', `/workflows/${encode(name)}/runs/${encode(runId)}/cancel`);

/** One node of a run's trace, from its `node.started` and `node.completed` events. */
export interface TraceNode {
  node: string;
  kind: string;
  startedAt: string;
  durationMs?: number;
  /** The node after it, when it completed. */
  next?: string;
  server?: string;
  tool?: string;
  isError?: boolean;
  /** The tool call's events between the node's start and end (decision, `tool.called`, `tool.completed`). */
  events: RunEvent[];
}

/**
 * A run's trace: its nodes in the order they ran, and how it ended (`ok`, `failed`, `interrupted`, `cancelled`;
 * undefined while it runs); `failedNode` is the node it failed or was cancelled at.
 */
export interface Trace {
  nodes: TraceNode[];
  outcome?: string;
  result?: unknown;
  error?: string;
  failedNode?: string;
  durationMs?: number;
}

const str = (value: unknown) => (typeof value === 'string' ? value : undefined);

/** The trace of a workflow run's events (in chain order). */
export function traceOf(events: RunEvent[]): Trace {
  const trace: Trace = { nodes: [] };
  let open: TraceNode | undefined;
  for (const event of events) {
    const { data } = event;
    if (event.type === 'node.started') {
      open = { node: str(data['node']) ?? '?', kind: str(data['kind']) ?? '?', startedAt: event.occurredAt, events: [] };
      trace.nodes.push(open);
    } else if (event.type === 'node.completed' && open) {
      if (typeof data['durationMs'] === 'number') open.durationMs = data['durationMs'];
      const next = str(data['next']);
      if (next) open.next = next;
      const server = str(data['server']);
      if (server) open.server = server;
      const tool = str(data['tool']);
      if (tool) open.tool = tool;
      if (typeof data['isError'] === 'boolean') open.isError = data['isError'];
      open = undefined;
    } else if (event.type === 'workflow.completed' || event.type === 'workflow.failed' || event.type === 'workflow.cancelled') {
      trace.outcome =
        str(data['outcome']) ?? (event.type === 'workflow.completed' ? 'ok' : event.type === 'workflow.failed' ? 'failed' : 'cancelled');
      // A cancellation says who cancelled it and how.
      if (event.type === 'workflow.cancelled') trace.error = `cancelled at node ${str(data['node']) ?? '?'}: ${str(data['reason']) ?? ''}`;
      if ('result' in data) trace.result = data['result'];
      const error = data['error'];
      if (error !== undefined) trace.error = str(error) ?? str((error as { message?: unknown }).message) ?? JSON.stringify(error);
      const node = str(data['node']);
      if (node) trace.failedNode = node;
      if (typeof data['durationMs'] === 'number') trace.durationMs = data['durationMs'];
    } else if (open) open.events.push(event);
  }
  return trace;
}
