/**
 * The governance service: answers `punk.governance.check` requests with a
 * decision, and records every decision on the ledger before replying.
 */
import { randomUUID } from 'node:crypto';
import {
  appendLedgerEvent,
  errorMessage,
  governanceCheckSchema,
  parseMessage,
  queues,
  subjects,
  type Bus,
  type GovernanceCheck,
  type GovernanceDecision,
  type Logger,
} from '@punk/lib';
import { classify } from './classify.js';
import { defaultPolicy, evaluatePolicy, type PolicyRule } from './policy.js';

/** Options of {@link startGovernance}. */
export interface GovernanceOptions {
  bus: Bus;
  log: Logger;
  /** Ordered policy rules; {@link defaultPolicy} when absent. */
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
  const { level, levelSource, action } = classify(check);
  const outcome = evaluatePolicy(policy, { kind: check.kind, server: check.server, target: check.target, subject: check.principal.subject, level });
  return { decisionId: randomUUID(), decision: outcome.decision, sideEffectLevel: level, levelSource, action, rule: outcome.rule, reason: outcome.reason };
}

/**
 * Starts serving `subjects.governanceCheck` in queue group `queues.governance`.
 * A malformed check is answered with PunkError `InvalidMessage` and logged; a
 * failed ledger append is answered with the append's error (no decision is
 * acknowledged without its audit record).
 */
export async function startGovernance(options: GovernanceOptions): Promise<GovernanceService> {
  const { bus, log } = options;
  const policy = options.policy ?? defaultPolicy;
  const subscription = await bus.serve(
    subjects.governanceCheck,
    async data => {
      let check: GovernanceCheck;
      try {
        check = parseMessage(governanceCheckSchema, subjects.governanceCheck, data);
      } catch (error) {
        log.error({ err: errorMessage(error) }, 'rejected a malformed governance check');
        throw error;
      }
      const decision = decide(check, policy);
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
    },
    { queue: queues.governance },
  );
  return { stop: () => subscription.unsubscribe() };
}
