/**
 * The decision on a relayed use (tools/call, resources/read, prompts/get). It is made in process from the tenant's
 * compiled policies (`decide` in @punk/lib; the policies are watched from bucket `PUNK_MCP_POLICIES`, as governance
 * watches them), and asked of governance on `punk.governance.check` only when it needs governance's shared state: a
 * McpPolicy rate limit covers the use (its counters are shared by every governance replica).
 *
 * Every decision is on the ledger. Governance records those it answers before replying. The ones made here are
 * recorded by the use's own first event when it is allowed and goes out (`data.decision` of `tool.called`, so a call
 * costs one event fewer), else as `governance.decision` events of their own; the caller awaits the record before
 * answering (`CallDecision.recorded`). When governance cannot be asked, the use is refused
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
  type LedgerEvent,
  type Logger,
  type TenantPolicies,
} from '@punk/lib';
import { countDecision } from './metrics.js';

/** Rule of the refusal recorded when governance could not be asked for a decision that needs it. */
export const GOVERNANCE_UNAVAILABLE_RULE = 'gateway/governance-unavailable';

/**
 * A decision and its audit record. This gateway's decision to allow a use travels in the use's first event
 * (`tool.called`, `resource.read`, `prompt.got`: `data.decision`, the data a `governance.decision` event would hold)
 * when that event is appended ({@link carry}); otherwise it is appended as a `governance.decision` event of its own
 * ({@link recorded}). Refusals decided here are appended at once, alongside the rest of the use; governance records
 * those it decides itself.
 */
export class CallDecision {
  private own: Promise<void> | undefined;
  private carrier: Promise<unknown> | undefined;

  /** @internal built by {@link CallDecider.decide}. */
  constructor(
    private readonly bus: Bus,
    readonly decision: GovernanceDecision,
    private readonly event: LedgerEvent | undefined,
  ) {
    if (event && decision.decision !== 'allow') this.own = this.append(event);
  }

  /** The decision's data for the use's first event, when that event may carry it (an allowed use decided here). */
  get folded(): Record<string, unknown> | undefined {
    return this.event && this.decision.decision === 'allow' && this.own === undefined ? this.event.data : undefined;
  }

  /** Says that the use's first event, holding {@link folded}, is being appended by `append`: the decision needs no event of its own. */
  carry(append: Promise<unknown>): void {
    if (this.folded !== undefined) this.carrier ??= append;
  }

  /**
   * Resolves once the decision is on the ledger: with the event that carries it, or its own event (appended now when
   * nothing carried it). Rejects with its own append's error (a carrier's failure is the use's own to report).
   */
  recorded(): Promise<void> {
    if (this.carrier)
      return this.carrier.then(
        () => undefined,
        () => undefined,
      );
    if (this.event) this.own ??= this.append(this.event);
    return this.own ?? Promise.resolve();
  }

  private append(event: LedgerEvent): Promise<void> {
    const appended = appendLedgerEvent(this.bus, event);
    // Awaited by the caller before it answers; this only keeps an early failure from being unhandled meanwhile.
    appended.catch(() => undefined);
    return appended;
  }
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
      return new CallDecision(this.bus, local, decisionEvent(check, local, 'gateway'));
    }
    try {
      const decision = await requestDecision(this.bus, check);
      countDecision(decision.decision, check.kind, 'governance');
      return new CallDecision(this.bus, decision, undefined);
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
