/**
 * The governance service: answers `punk.governance.check` requests with a
 * decision, and records every decision on the ledger before replying; answers
 * `punk.governance.filter` (what a principal's lists may show) without recording.
 * Each tenant's McpPolicy objects (bucket `PUNK_MCP_POLICIES`, policy-watch.ts)
 * come before the built-in rules; their rate limits count checks, not filters.
 */
import { randomUUID } from 'node:crypto';
import {
  appendLedgerEvent,
  errorMessage,
  governanceCheckSchema,
  governanceFilterSchema,
  parseMessage,
  queues,
  subjects,
  type Bus,
  type Decision,
  type GovernanceFilter,
  type GovernanceCheck,
  type GovernanceDecision,
  type Logger,
  type Principal,
} from '@punk/lib';
import { traceGovernanceChecks } from '@punk/lib';
import { classify, type Classification } from './classify.js';
import { countRateLimited, observeChecks } from './metrics.js';
import { defaultPolicy, evaluatePolicy, type PolicyInput, type PolicyOutcome, type PolicyRule } from './policy.js';
import { watchPolicies } from './policy-watch.js';
import { RateLimiter } from './rate-limits.js';

/** Options of {@link startGovernance}. */
export interface GovernanceOptions {
  bus: Bus;
  log: Logger;
  /** The built-in rules, which follow every tenant's McpPolicy rules; {@link defaultPolicy} when absent. */
  policy?: readonly PolicyRule[];
}

/** A running governance service. */
export interface GovernanceService {
  /** Stops answering checks; in-flight checks finish. */
  stop(): Promise<void>;
}

/**
 * Decides one check: classification, then the first matching policy rule.
 * Pure apart from the minted `decisionId`.
 */
export function decide(check: GovernanceCheck, policy: readonly PolicyRule[] = defaultPolicy): GovernanceDecision {
  const { level, levelSource, action, outcome } = evaluate(check, check.principal, policy);
  return {
    decisionId: randomUUID(),
    decision: outcome.decision,
    sideEffectLevel: level,
    levelSource,
    action,
    rule: outcome.rule,
    reason: outcome.reason,
  };
}

/** Classifies one use and evaluates the policy for `principal` on it. */
function evaluate(
  use: GovernanceFilter['items'][number],
  principal: Principal,
  policy: readonly PolicyRule[],
): Classification & { outcome: PolicyOutcome } {
  const classification = classify(use);
  const input: PolicyInput = {
    kind: use.kind,
    server: use.server,
    target: use.target,
    subject: principal.subject,
    groups: principal.groups,
    level: classification.level,
  };
  return { ...classification, outcome: evaluatePolicy(policy, input) };
}

/**
 * Decides many uses for one principal (`punk.governance.filter`), in order, without minting or recording
 * anything: what lists may show is what a check would allow, so an item is kept unless its decision is `deny`.
 */
export function filterDecisions(filter: GovernanceFilter, policy: readonly PolicyRule[] = defaultPolicy): Decision[] {
  return filter.items.map((item) => evaluate(item, filter.principal, policy).outcome.decision);
}

/**
 * Starts serving `subjects.governanceCheck` and `subjects.governanceFilter` in queue group `queues.governance`.
 * A malformed check is answered with PunkError `InvalidMessage` and logged; a
 * failed ledger append is answered with the append's error (no decision is
 * acknowledged without its audit record).
 */
export async function startGovernance(options: GovernanceOptions): Promise<GovernanceService> {
  const { bus, log } = options;
  const policies = await watchPolicies(bus, log, options.policy ?? defaultPolicy);
  const limiter = await RateLimiter.open(bus);
  const subscription = await bus.serve(
    subjects.governanceCheck,
    traceGovernanceChecks(
      observeChecks(async (data) => {
        let check: GovernanceCheck;
        try {
          check = parseMessage(governanceCheckSchema, subjects.governanceCheck, data);
        } catch (error) {
          log.error({ err: errorMessage(error) }, 'rejected a malformed governance check');
          throw error;
        }
        const { rules, rateLimits } = policies.of(check.tenant);
        let decision = decide(check, rules);
        if (decision.decision !== 'deny' && rateLimits.length > 0) {
          const input: PolicyInput = {
            kind: check.kind,
            server: check.server,
            target: check.target,
            subject: check.principal.subject,
            groups: check.principal.groups,
            level: decision.sideEffectLevel,
          };
          const over = await limiter.exceeded(check.tenant, input, rateLimits);
          if (over) countRateLimited(check);
          if (over)
            decision = {
              ...decision,
              decision: 'deny',
              rule: over.name,
              reason: `rate limit ${over.limit}: ${over.requests} requests per ${over.per} exceeded`,
            };
        }
        await appendLedgerEvent(bus, {
          id: decision.decisionId,
          type: 'governance.decision',
          tenant: check.tenant,
          runId: check.runId,
          occurredAt: new Date().toISOString(),
          source: 'governance',
          principal: check.principal,
          ...(check.sessionId !== undefined && { sessionId: check.sessionId }),
          server: check.server,
          data: {
            decision: decision.decision,
            level: decision.sideEffectLevel,
            levelSource: decision.levelSource,
            action: decision.action,
            rule: decision.rule,
            reason: decision.reason,
            kind: check.kind,
            target: check.target,
          },
        });
        log.debug({ action: decision.action, decision: decision.decision, rule: decision.rule }, 'governance decision');
        return decision;
      }),
    ),
    { queue: queues.governance },
  );
  const filtering = await bus.serve(
    subjects.governanceFilter,
    async (data) => {
      const filter = parseMessage(governanceFilterSchema, subjects.governanceFilter, data);
      return { decisions: filterDecisions(filter, policies.of(filter.tenant).rules) };
    },
    { queue: queues.governance },
  );
  return {
    stop: async () => {
      await Promise.all([subscription.unsubscribe(), filtering.unsubscribe(), policies.stop()]);
    },
  };
}
