/**
 * The decision on a relayed use (tools/call, resources/read, prompts/get). It is made in process from the tenant's
 * compiled policies (`decide` in @punk/lib; the policies are watched from bucket `PUNK_MCP_POLICIES`, as governance
 * watches them), and asked of governance on `punk.governance.check` only when it needs governance's shared state: a
 * McpPolicy rate limit covers the use (its counters are shared by every governance replica).
 *
 * Every decision is on the ledger. Governance records those it answers before replying. This module appends the
 * ones made here, starting the append at once so that it runs alongside the upstream call and `tool.called`; the
 * caller awaits it before answering (`CallDecision.recorded`). When governance cannot be asked, the use is refused
 * (fail closed) and the refusal is recorded here before the error is answered, naming governance.
 */
import {
  appendLedgerEvent,
  decide,
  decisionEvent,
  errorMessage,
  needsSharedState,
  PunkError,
  requestDecision,
  type Bus,
  type GovernanceCheck,
  type GovernanceDecision,
  type Logger,
  type TenantPolicies,
} from '@punk/lib';
import { countDecision } from './metrics.js';

/** Rule of the refusal recorded when governance could not be asked for a decision that needs it. */
export const GOVERNANCE_UNAVAILABLE_RULE = 'gateway/governance-unavailable';

/** A decision and its audit record. */
export interface CallDecision {
  decision: GovernanceDecision;
  /**
   * Resolves once the decision is in the ledger stream (at once when governance recorded it); rejects with the append's
   * error. The use's answer (result or refusal) waits for it (relay.ts): no answer without its audit record.
   */
  recorded: Promise<void>;
}

/** Decides relayed uses: in process, or through governance when shared state is needed. */
export class CallDecider {
  constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
    private readonly policies: TenantPolicies,
  ) {}

  /**
   * Decides `check`.
   * @throws PunkError `GovernanceUnavailable` or `GovernanceTimeout` (naming the subject) when the decision needs
   *   governance and it cannot be asked, after the refusal is on the ledger; governance's own errors.
   */
  async decide(check: GovernanceCheck): Promise<CallDecision> {
    const policy = this.policies.of(check.tenant);
    const local = decide(check, policy);
    if (!needsSharedState(check, local, policy)) {
      countDecision(local.decision, check.kind, 'gateway');
      this.log.debug({ action: local.action, decision: local.decision, rule: local.rule, generation: local.generation }, 'policy decision');
      const recorded = appendLedgerEvent(this.bus, decisionEvent(check, local, 'gateway'));
      // Awaited by the caller before it answers; this only keeps an early failure from being unhandled meanwhile.
      recorded.catch(() => undefined);
      return { decision: local, recorded };
    }
    try {
      const decision = await requestDecision(this.bus, check);
      countDecision(decision.decision, check.kind, 'governance');
      return { decision, recorded: Promise.resolve() };
    } catch (error) {
      if (!(error instanceof PunkError) || (error.code !== 'GovernanceUnavailable' && error.code !== 'GovernanceTimeout')) throw error;
      // Fail closed, on the record: the use is refused because governance could not count it.
      const refused: GovernanceDecision = { ...local, decision: 'deny', rule: GOVERNANCE_UNAVAILABLE_RULE, reason: error.message };
      countDecision('deny', check.kind, 'gateway');
      try {
        await appendLedgerEvent(this.bus, decisionEvent(check, refused, 'gateway'));
      } catch (appendError) {
        this.log.error(
          { err: errorMessage(appendError), server: check.server },
          'the refusal of a use governance could not decide is not on the ledger',
        );
      }
      throw error;
    }
  }
}
