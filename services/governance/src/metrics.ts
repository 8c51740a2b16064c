/**
 * governance's Prometheus metrics (docs/observability.md "Metrics"): decisions by outcome, rate-limit refusals,
 * and how long a check takes (classification, policy, rate-limit counters and the ledger append).
 */
import {
  errorTypeOf,
  FAST_BUCKETS,
  NO_ERROR,
  secondsSince,
  type GovernanceCheck,
  type GovernanceDecision,
  type RequestHandler,
} from '@punk/lib';
import { Counter, Histogram } from 'prom-client';

/**
 * `punk_governance_decisions_total` (counter; labels `decision`: `allow`, `deny` or `approval_required`; `kind`:
 * `tool`, `resource` or `prompt`): decisions answered on `punk.governance.check` (each one is on the ledger).
 */
export const decisions = new Counter({
  name: 'punk_governance_decisions_total',
  help: 'Governance decisions answered, by decision (allow, deny, approval_required) and kind of use (tool, resource, prompt).',
  labelNames: ['decision', 'kind'] as const,
});

/**
 * `punk_governance_rate_limited_total` (counter; label `kind`): checks a McpPolicy rate limit turned into `deny`
 * (they are counted in {@link decisions} as `deny` too).
 */
export const rateLimited = new Counter({
  name: 'punk_governance_rate_limited_total',
  help: 'Governance checks denied because a McpPolicy rate limit was exceeded (also counted as deny decisions).',
  labelNames: ['kind'] as const,
});

/**
 * `punk_governance_check_duration_seconds` (histogram, seconds; labels `decision`: empty when the check failed;
 * `error_type`: empty on success, else the PunkError code, e.g. `InvalidMessage` or the ledger append's error):
 * one `punk.governance.check`, from receipt to reply.
 */
export const checkDuration = new Histogram({
  name: 'punk_governance_check_duration_seconds',
  help: 'Duration of governance checks from receipt to reply, by decision and error type (empty on success).',
  labelNames: ['decision', 'error_type'] as const,
  buckets: [...FAST_BUCKETS],
});

/** Counts a check a rate limit denied. */
export function countRateLimited(check: GovernanceCheck): void {
  rateLimited.inc({ kind: check.kind });
}

/**
 * Wraps the handler of `punk.governance.check`: times each check into {@link checkDuration} and counts its
 * decision into {@link decisions}. The reply and errors pass unchanged.
 */
export function observeChecks(handler: RequestHandler): RequestHandler {
  return async (data, info) => {
    const startedAt = performance.now();
    try {
      const decision = (await handler(data, info)) as GovernanceDecision;
      const kind = (data as { kind?: unknown }).kind;
      decisions.inc({ decision: decision.decision, kind: typeof kind === 'string' ? kind : '' });
      checkDuration.observe({ decision: decision.decision, error_type: NO_ERROR }, secondsSince(startedAt));
      return decision;
    } catch (error) {
      checkDuration.observe({ decision: '', error_type: errorTypeOf(error) }, secondsSince(startedAt));
      throw error;
    }
  };
}
