/**
 * The gateway's Prometheus metrics (docs/observability.md "Metrics"): every relayed call to an upstream MCP
 * server, timed as the OpenTelemetry MCP semantic conventions time a client's request (gen-ai/mcp.md, metric
 * `mcp.client.operation.duration`) and labelled with the server; the upstream connections of this replica by
 * state; and the calls in flight per server.
 */
import {
  errorTypeOf,
  jsonRpcErrorTypeOf,
  MCP_DURATION_BUCKETS,
  NO_ERROR,
  OTHER,
  PunkError,
  secondsSince,
  type ServerState,
} from '@punk/lib';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { CallOutcome } from './upstream-calls.js';
import type { Upstream } from './upstream.js';

/**
 * `mcp_client_operation_duration_seconds` (histogram, seconds; semconv `mcp.client.operation.duration`, its bucket
 * boundaries): one relayed `tools/call`, `resources/read` or `prompts/get`, from the pool taking it (waiting for a
 * (re)connect included) until the upstream's answer. Labels: `mcp_method_name`; `server` (`<namespace>/<name>`);
 * `gen_ai_tool_name` (on `tools/call`: the upstream's tool name when the server lists it, else `_OTHER`; empty for
 * other methods); `error_type` (empty on success; `tool_error` for a result with `isError: true`; the upstream's
 * JSON-RPC error code such as `-32602`; `timeout`, `unavailable`, `exited`, `cancelled` or `refused` for a call that
 * got no answer; else the PunkError code, e.g. `ServerBusy`). Errors per server are its series with an `error_type`.
 */
export const clientOperationDuration = new Histogram({
  name: 'mcp_client_operation_duration_seconds',
  help: 'Duration of MCP calls the gateway relayed to an upstream server, by method, server, tool and error type (OpenTelemetry mcp.client.operation.duration).',
  labelNames: ['mcp_method_name', 'server', 'gen_ai_tool_name', 'error_type'] as const,
  buckets: [...MCP_DURATION_BUCKETS],
});

/**
 * `punk_gateway_decisions_total` (counter; labels `decision`: `allow`, `deny` or `approval_required`; `kind`: `tool`,
 * `resource` or `prompt`; `decided_by`: `gateway` when the replica decided in process, `governance` when the decision
 * needed governance's shared state, a rate limit): the decisions on the uses this replica relayed, each on the ledger.
 * A use refused because governance could not be asked counts as `deny` by `gateway`.
 */
export const decisions = new Counter({
  name: 'punk_gateway_decisions_total',
  help: 'Policy decisions on relayed uses, by decision, kind of use and who decided (gateway in process, or governance for shared state).',
  labelNames: ['decision', 'kind', 'decided_by'] as const,
});

/** Counts one decision into {@link decisions}. */
export function countDecision(decision: string, kind: string, decidedBy: 'gateway' | 'governance'): void {
  decisions.inc({ decision, kind, decided_by: decidedBy });
}

/**
 * `punk_gateway_server_wake_duration_seconds` (histogram, seconds; labels `server` (`<namespace>/<name>`), `outcome`:
 * `woken`, `timeout` or `failed`): one wake of a server scaled to zero by `spec.idle`, from the first call held for
 * it on this replica until it was served running again here (or given up); its `_count` counts the wakes.
 */
export const serverWakeDuration = new Histogram({
  name: 'punk_gateway_server_wake_duration_seconds',
  help: 'Duration of wakes of servers scaled to zero by spec.idle, from the first held call until served again, by server and outcome (woken, timeout, failed).',
  labelNames: ['server', 'outcome'] as const,
  buckets: [0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300],
});

/** Observes one wake into {@link serverWakeDuration}. */
export function observeWake(server: string, outcome: 'woken' | 'timeout' | 'failed', seconds: number): void {
  serverWakeDuration.observe({ server, outcome }, seconds);
}

/** Where the gateways of this process keep their upstreams: the pooled ones, and the `per-client` sessions' own. */
interface UpstreamSource {
  shared: () => Iterable<Upstream>;
  perClient: () => Iterable<Upstream>;
}
const sources = new Set<UpstreamSource>();

/**
 * `punk_gateway_upstreams` (gauge; labels `pool`: `shared` for a server's pooled connection, `per_client` for a
 * `per-client` server's connection of one client session; `state`: `starting`, `ready`, `idle`, `failed`, `stopped`):
 * upstream connections this replica keeps, read at scrape time.
 */
export const upstreamsGauge = new Gauge({
  name: 'punk_gateway_upstreams',
  help: 'Upstream MCP server connections this gateway replica keeps, by pool (shared or per_client) and state.',
  labelNames: ['pool', 'state'] as const,
  collect() {
    this.reset();
    const states: ServerState[] = ['starting', 'ready', 'idle', 'failed', 'stopped'];
    for (const pool of ['shared', 'per_client'] as const) for (const state of states) this.set({ pool, state }, 0);
    for (const source of sources) {
      for (const upstream of source.shared()) this.inc({ pool: 'shared', state: upstream.state });
      for (const upstream of source.perClient()) this.inc({ pool: 'per_client', state: upstream.state });
    }
  },
});

/** `punk_gateway_upstream_calls_in_flight` (gauge; label `server`): calls this replica has relayed to the server and not yet seen answered. */
export const callsInFlight = new Gauge({
  name: 'punk_gateway_upstream_calls_in_flight',
  help: 'Calls in flight from this gateway replica to each upstream server (pooled and per-client connections together).',
  labelNames: ['server'] as const,
  collect() {
    this.reset();
    for (const source of sources) {
      for (const upstream of [...source.shared(), ...source.perClient()]) this.inc({ server: upstream.key }, upstream.callsInFlight);
    }
  },
});

/** `punk_gateway_upstream_queue_depth` (gauge; label `server`): calls waiting on this replica for a slot under the server's bound of calls in flight (call-queue.ts). */
export const queueDepth = new Gauge({
  name: 'punk_gateway_upstream_queue_depth',
  help: 'Calls waiting on this gateway replica for a slot under each upstream server bound of calls in flight (PUNK_UPSTREAM_MAX_CONCURRENT_CALLS).',
  labelNames: ['server'] as const,
  collect() {
    this.reset();
    for (const source of sources) {
      for (const upstream of [...source.shared(), ...source.perClient()]) this.inc({ server: upstream.key }, upstream.callsQueued);
    }
  },
});

/** `punk_gateway_upstream_queue_wait_seconds` (histogram, seconds; label `server`): how long each call that had to queue waited until it got a slot. */
export const queueWait = new Histogram({
  name: 'punk_gateway_upstream_queue_wait_seconds',
  help: 'Time calls waited on this gateway replica for a slot under an upstream server bound of calls in flight, by server.',
  labelNames: ['server'] as const,
  buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
});

/**
 * `punk_gateway_upstream_queue_rejections_total` (counter; labels `server`, `reason`: `full` when
 * `PUNK_UPSTREAM_MAX_QUEUED_CALLS` calls already waited, `timeout` after `PUNK_UPSTREAM_QUEUE_TIMEOUT_MS`, `principal` when the caller
 * held its share, `PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL`): calls refused with `ServerBusy`.
 */
export const queueRejections = new Counter({
  name: 'punk_gateway_upstream_queue_rejections_total',
  help: 'Calls this gateway replica refused with ServerBusy past an upstream server bound, by server and reason (full, timeout or principal).',
  labelNames: ['server', 'reason'] as const,
});

/** Makes a gateway's upstreams visible to {@link upstreamsGauge}, {@link callsInFlight} and {@link queueDepth}; returns what stops it (the gateway's stop). */
export function watchUpstreams(shared: () => Iterable<Upstream>, perClient: () => Iterable<Upstream>): () => void {
  const source = { shared, perClient };
  sources.add(source);
  return () => void sources.delete(source);
}

/** The `error_type` of a settled relayed call (see {@link clientOperationDuration}). */
function errorTypeOfOutcome(outcome: PromiseSettledResult<CallOutcome>): string {
  if (outcome.status === 'rejected') {
    const mcpCode =
      outcome.reason instanceof PunkError && outcome.reason.code === 'UpstreamError' ? outcome.reason.details?.['mcpCode'] : undefined;
    return mcpCode !== undefined ? jsonRpcErrorTypeOf(mcpCode) : errorTypeOf(outcome.reason);
  }
  if (!outcome.value.ok) return outcome.value.kind;
  return outcome.value.result['isError'] === true ? 'tool_error' : NO_ERROR;
}

/**
 * Times one relayed call into {@link clientOperationDuration} and returns the same promise. `tool` is the
 * upstream's tool name of a `tools/call` (kept as a label only when the server lists it).
 */
export function observeUpstreamCall(
  upstream: Upstream,
  method: string,
  tool: string | undefined,
  call: Promise<CallOutcome>,
): Promise<CallOutcome> {
  const startedAt = performance.now();
  const toolLabel = tool === undefined ? '' : typeof upstream.knownTool(tool) === 'object' ? tool : OTHER;
  const record = (outcome: PromiseSettledResult<CallOutcome>) =>
    clientOperationDuration.observe(
      { mcp_method_name: method, server: upstream.key, gen_ai_tool_name: toolLabel, error_type: errorTypeOfOutcome(outcome) },
      secondsSince(startedAt),
    );
  return call.then(
    (value) => {
      record({ status: 'fulfilled', value });
      return value;
    },
    (reason: unknown) => {
      record({ status: 'rejected', reason });
      throw reason;
    },
  );
}
