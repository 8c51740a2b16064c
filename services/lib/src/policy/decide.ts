/**
 * A decision on one use of an upstream MCP server: its classification (classify.ts), then the first matching rule of
 * the tenant's compiled policies (rules.ts). One function for every replica that decides: the gateway decides calls
 * with it in process, governance when a decision needs its shared state (rate-limit counters), mcp-front when it
 * filters lists. Pure apart from the minted `decisionId`.
 */
import { randomUUID } from 'node:crypto';
import type { Decision, GovernanceCheck, GovernanceDecision, LedgerEvent, Principal, SideEffectLevel } from '../contracts.js';
import { classify } from './classify.js';
import { matches, evaluatePolicy, type PolicyInput } from './rules.js';
import type { TenantPolicy } from './watch.js';

/** One use, as a check or a listed item names it. */
type Use = Pick<GovernanceCheck, 'server' | 'kind' | 'target' | 'declaredLevel'>;

/** What rules and rate limits are matched on: the use, its principal and its side-effect level. */
export function policyInputOf(use: Use, principal: Principal, level: SideEffectLevel): PolicyInput {
  return {
    kind: use.kind,
    server: use.server,
    target: use.target,
    subject: principal.subject,
    groups: principal.groups,
    ...(principal.actingFor && { actingFor: principal.actingFor }),
    level,
  };
}

/**
 * Decides one check on `policy` (the tenant's, from `TenantPolicies.of`): classification, then the first matching
 * rule; the decision carries the policy's generation. Rate limits are not counted here (see {@link needsSharedState}).
 */
export function decide(check: GovernanceCheck, policy: Pick<TenantPolicy, 'rules' | 'generation'>): GovernanceDecision {
  const { level, levelSource, action } = classify(check);
  const outcome = evaluatePolicy(policy.rules, policyInputOf(check, check.principal, level));
  return {
    decisionId: randomUUID(),
    decision: outcome.decision,
    sideEffectLevel: level,
    levelSource,
    action,
    rule: outcome.rule,
    reason: outcome.reason,
    generation: policy.generation,
    ...(outcome.approval && { approval: outcome.approval }),
  };
}

/**
 * Whether `decision` (from {@link decide}) is final only with governance's shared state: it is not a denial and a
 * rate limit of `policy` covers the use, whose counter every governance replica shares.
 */
export function needsSharedState(check: GovernanceCheck, decision: GovernanceDecision, policy: Pick<TenantPolicy, 'rateLimits'>): boolean {
  if (decision.decision === 'deny' || policy.rateLimits.length === 0) return false;
  const input = policyInputOf(check, check.principal, decision.sideEffectLevel);
  return policy.rateLimits.some((limit) => matches(limit.match, input));
}

/**
 * Decides many uses for one principal (list filtering), in order, without minting or counting anything: what lists
 * may show is what a check would allow, so an item is kept unless its decision is `deny`.
 */
export function filterDecisions(filter: { principal: Principal; items: readonly Use[] }, policy: Pick<TenantPolicy, 'rules'>): Decision[] {
  return filter.items.map((item) => evaluatePolicy(policy.rules, policyInputOf(item, filter.principal, classify(item).level)).decision);
}

/** The `governance.decision` ledger event of `decision` on `check`, its id the decision's, appended by `source`. */
export function decisionEvent(check: GovernanceCheck, decision: GovernanceDecision, source: 'gateway' | 'governance'): LedgerEvent {
  return {
    id: decision.decisionId,
    type: 'governance.decision',
    tenant: check.tenant,
    runId: check.runId,
    occurredAt: new Date().toISOString(),
    source,
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
      generation: decision.generation,
    },
  };
}
