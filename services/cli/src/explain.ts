/**
 * A run of the ledger explained: its events in chain order with the time since the first, each governance decision
 * with its rule and reason, the approvals it asked for or used, the errors, its duration, and the chain's state, as
 * data and as a short narrative. Shared by `punk mcp`'s `punk_explain_run` and `punk run <id>`.
 */
import type { RunDetail, RunEvent, Verification } from './punk-api.js';

/** One step of an explained run. */
export interface ExplainedEvent {
  seq?: number;
  type: string;
  at: string;
  /** Milliseconds since the run's first event. */
  afterMs: number;
  server?: string;
  tool?: string;
  subject?: string;
  decision?: string;
  rule?: string;
  reason?: string;
  approvalId?: string;
  error?: string;
  durationMs?: number;
}

/** A run explained ({@link explainRun}). */
export interface ExplainedRun {
  runId: string;
  server?: string;
  tool?: string;
  subject?: string;
  outcome?: string;
  startedAt: string;
  endedAt: string;
  durationMs: number;
  events: ExplainedEvent[];
  decisions: Array<{ decision: string; rule?: string; reason?: string }>;
  approvals: string[];
  errors: string[];
  /** The tenant chain's verification at the time of asking (ok, events verified). */
  chain: { ok: boolean; verifiedEvents: number; complete?: boolean };
  narrative: string;
}

const text = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : value === undefined || value === null ? undefined : JSON.stringify(value);

/** What an event says, read from its `data` (field names of the gateway's and governance's events). */
function stepOf(event: RunEvent, first: number): ExplainedEvent {
  const data = event.data ?? {};
  const step: ExplainedEvent = {
    ...(event.tenantSeq !== undefined && { seq: event.tenantSeq }),
    type: event.type,
    at: event.occurredAt,
    afterMs: Date.parse(event.occurredAt) - first,
  };
  const set = (key: keyof ExplainedEvent, value: unknown) => {
    const found = text(value);
    if (found !== undefined) (step as unknown as Record<string, unknown>)[key] = found;
  };
  set('server', event.server ?? data['server']);
  set('tool', data['tool'] ?? data['name']);
  set('subject', event.principal?.subject);
  // governance.decision events (decisionEvent of @punk/lib): `decision`, `rule`, `reason`; the same in `data.decision` of a
  // use's first event that carries the gateway's decision to allow it (`tool.called`, `resource.read`, `prompt.got`).
  const carried = data['decision'];
  const decided = typeof carried === 'object' && carried !== null ? (carried as Record<string, unknown>) : data;
  set('decision', decided['decision']);
  set('rule', decided['rule']);
  set('reason', decided['reason']);
  set('approvalId', data['approvalId'] ?? (event.type.startsWith('approval.') ? data['id'] : undefined));
  set('error', data['error']);
  if (typeof data['durationMs'] === 'number') step.durationMs = data['durationMs'];
  return step;
}

/** Explains `detail` (from `GET /runs/<id>`) with `chain` (from `GET /ledger/verify`). */
export function explainRun(detail: RunDetail, chain: Verification): ExplainedRun {
  const { run } = detail;
  const first = Date.parse(run.firstAt);
  const events = detail.events.map((event) => stepOf(event, first));
  const decisions = events
    .filter((e) => e.decision !== undefined)
    .map((e) => ({ decision: e.decision!, ...(e.rule && { rule: e.rule }), ...(e.reason && { reason: e.reason }) }));
  const approvals = [...new Set(events.flatMap((e) => (e.approvalId ? [e.approvalId] : [])))];
  const errors = events.flatMap((e) => (e.error ? [e.error] : []));
  const durationMs = Date.parse(run.lastAt) - first;
  const who = run.subject ? ` by ${run.subject}` : '';
  const what = run.tool
    ? `${run.server ?? '?'}/${run.tool}`
    : run.types.includes('prompt.observed')
      ? 'a prompt observed in Claude Code'
      : (run.server ?? 'the deployment');
  const lines = [
    `Run ${run.runId}: ${what}${who}, outcome ${run.outcome ?? 'unknown'}, ${String(events.length)} event(s) over ${String(durationMs)} ms (${run.firstAt} to ${run.lastAt}).`,
    ...events.map((e) => {
      const parts = [`+${String(e.afterMs)} ms ${e.type}`];
      if (e.decision) parts.push(`decision ${e.decision}${e.rule ? ` by rule ${e.rule}` : ''}${e.reason ? `: ${e.reason}` : ''}`);
      if (e.approvalId) parts.push(`approval ${e.approvalId}`);
      if (e.error) parts.push(`error: ${e.error}`);
      if (e.durationMs !== undefined) parts.push(`took ${String(e.durationMs)} ms`);
      return `  ${parts.join('; ')}`;
    }),
    `${describeVerification(chain)}${chain.ok ? '' : '; run punk verify'}.`,
  ];
  return {
    runId: run.runId,
    ...(run.server && { server: run.server }),
    ...(run.tool && { tool: run.tool }),
    ...(run.subject && { subject: run.subject }),
    ...(run.outcome && { outcome: run.outcome }),
    startedAt: run.firstAt,
    endedAt: run.lastAt,
    durationMs,
    events,
    decisions,
    approvals,
    errors,
    chain: { ok: chain.ok, verifiedEvents: chain.events, ...(chain.complete !== undefined && { complete: chain.complete }) },
    narrative: lines.join('\n'),
  };
}

/**
 * One line on a verification of a tenant's chain (docs/governance.md, the verify answer): where it verified up to,
 * how many events this request checked itself (the others were checked by earlier requests, and the sweep goes
 * over them again), whether it reached the head record, and for a broken chain where and why.
 */
export function describeVerification(v: Verification): string {
  const ledger = `the chain of tenant ${v.tenant}'s ledger`;
  if (!v.ok) {
    const why = v.firstBroken ? ` (${v.firstBroken.reason}: ${v.firstBroken.message})` : '';
    return `BROKEN: ${ledger} breaks at event ${String(v.events)}${why}`;
  }
  if (v.events === 0) return `ok: tenant ${v.tenant}'s ledger has no events yet`;
  const checked =
    v.checked >= v.events
      ? ` (all ${String(v.events)} checked by this request)`
      : ` (${String(v.checked)} checked by this request, the others by earlier ones)`;
  if (!v.complete)
    return `ok so far: ${ledger} verifies up to event ${String(v.events)} of ${String(v.chainHead?.tenantSeq ?? '?')}${checked}; run punk verify again to go on`;
  return `ok: ${ledger} verifies: events 1 to ${String(v.events)} end at its head record${checked}`;
}
