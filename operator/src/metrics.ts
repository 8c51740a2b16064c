/**
 * The operator's Prometheus metrics (docs/observability.md "Metrics"), after controller-runtime's
 * (`controller_runtime_reconcile_total`, `_errors_total`, `_time_seconds`, `workqueue_depth`, `leader_election_master_status`)
 * with a `punk_operator_` prefix: reconciles by kind and result, their duration, the work queue's depth and
 * whether this instance leads.
 */
import { errorTypeOf, NO_ERROR, OTHER, secondsSince } from '@punk/lib/controller';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { ReconcileHandler } from './queue.js';

/** The custom resource kinds the operator reconciles: the bounded `kind` label values (anything else is `_OTHER`). */
const KINDS = new Set(['McpServer', 'McpCredential', 'McpPolicy', 'McpWorkflow']);

/** `punk_operator_reconcile_total` (counter; labels `kind`: McpServer, McpCredential, McpPolicy or McpWorkflow; `result`: `success`, `requeue_after` or `error`): reconciles that ended. */
export const reconciles = new Counter({
  name: 'punk_operator_reconcile_total',
  help: 'Reconciles that ended, by kind and result (success, requeue_after, error).',
  labelNames: ['kind', 'result'] as const,
});

/** `punk_operator_reconcile_errors_total` (counter; labels `kind`, `error_type`: the PunkError code, `ReconcileTimeout`, or `_OTHER`, e.g. an API error): reconciles that failed and are retried with backoff. */
export const reconcileErrors = new Counter({
  name: 'punk_operator_reconcile_errors_total',
  help: 'Reconciles that failed (retried with backoff), by kind and error type.',
  labelNames: ['kind', 'error_type'] as const,
});

/** `punk_operator_reconcile_duration_seconds` (histogram, seconds; labels `kind`, `error_type`: empty on success): one reconcile call, from a worker taking the key until it returned or threw. */
export const reconcileDuration = new Histogram({
  name: 'punk_operator_reconcile_duration_seconds',
  help: 'Duration of one reconcile, by kind and error type (empty on success).',
  labelNames: ['kind', 'error_type'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
});

/** What a running manager shows at scrape time. */
interface ManagerView {
  /** Keys waiting in the work queue (not those being reconciled). */
  depth(): number;
  /** Whether this instance holds the Lease. */
  leading(): boolean;
}
const managers = new Set<ManagerView>();

/** `punk_operator_workqueue_depth` (gauge): keys waiting in the work queue (not those being reconciled), read at scrape time. */
export const queueDepth = new Gauge({
  name: 'punk_operator_workqueue_depth',
  help: 'Keys waiting in the operator work queue (not those being reconciled).',
  collect() {
    this.set([...managers].reduce((sum, m) => sum + m.depth(), 0));
  },
});

/** `punk_operator_leader` (gauge): 1 while this instance holds the leader-election Lease (and so reconciles), else 0. */
export const leader = new Gauge({
  name: 'punk_operator_leader',
  help: 'Whether this operator instance holds the leader-election Lease (1) or not (0).',
  collect() {
    this.set([...managers].some((m) => m.leading()) ? 1 : 0);
  },
});

/** Makes a manager's queue and Lease visible to {@link queueDepth} and {@link leader}; returns what stops it (the manager's stop). */
export function watchManager(view: ManagerView): () => void {
  managers.add(view);
  return () => void managers.delete(view);
}

/** The `kind` label of a work-queue key (`<Kind>/<namespace>/<name>`). */
function kindOf(key: string): string {
  const kind = key.split('/')[0] ?? '';
  return KINDS.has(kind) ? kind : OTHER;
}

/**
 * Wraps the work queue's reconcile handler: times each reconcile into {@link reconcileDuration} and counts it into
 * {@link reconciles} (and {@link reconcileErrors} when it throws). Results and errors pass unchanged.
 */
export function observeReconciles(handler: ReconcileHandler): ReconcileHandler {
  return async (key, signal) => {
    const kind = kindOf(key);
    const startedAt = performance.now();
    try {
      const result = await handler(key, signal);
      reconcileDuration.observe({ kind, error_type: NO_ERROR }, secondsSince(startedAt));
      reconciles.inc({ kind, result: result?.requeueAfterMs !== undefined ? 'requeue_after' : 'success' });
      return result;
    } catch (error) {
      const errorType = signal.aborted ? 'ReconcileTimeout' : errorTypeOf(error);
      reconcileDuration.observe({ kind, error_type: errorType }, secondsSince(startedAt));
      reconciles.inc({ kind, result: 'error' });
      reconcileErrors.inc({ kind, error_type: errorType });
      throw error;
    }
  };
}

/** `punk_operator_server_sleeps_total` (counter): McpServers scaled to zero by `spec.idle` after `scaleToZeroAfter` unused. */
export const serverSleeps = new Counter({
  name: 'punk_operator_server_sleeps_total',
  help: 'McpServers scaled to zero by spec.idle after spec.idle.scaleToZeroAfter without a call.',
});

/** `punk_operator_server_wakes_total` (counter): McpServers scaled back from zero for a call (`punk.server.wake`). */
export const serverWakes = new Counter({
  name: 'punk_operator_server_wakes_total',
  help: 'McpServers scaled to zero by spec.idle and scaled back to their replicas for a call.',
});
