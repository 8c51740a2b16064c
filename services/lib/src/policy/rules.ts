/**
 * Policies as data: ordered rules, first match wins. The default policy
 * allows levels 0-3 and requires approval for level 4 (docs/governance.md "Approvals").
 */
import type { Decision, GovernanceCheck, SideEffectLevel } from '../contracts.js';

/** What a rule matches; an absent field matches everything. */
export interface PolicyMatch {
  kinds?: GovernanceCheck['kind'][];
  /** Server names (`metadata.name`). */
  servers?: string[];
  /** Tool names, resource URIs or prompt names. */
  targets?: string[];
  /** Principal subjects. */
  subjects?: string[];
  /** Principal groups: the rule matches a principal in any of them. */
  groups?: string[];
  /** Inclusive lower bound of the side-effect level. */
  minLevel?: SideEffectLevel;
  /** Inclusive upper bound of the side-effect level. */
  maxLevel?: SideEffectLevel;
}

/**
 * How the uses a rule makes `approval_required` are decided: who may decide (named approvers, else holders of the
 * admin scope), whether the caller may approve its own call, how long a request lives and how long a call waits.
 */
export interface ApprovalSettings {
  /** Subjects and groups that may decide; both empty: holders of the admin scope. */
  approvers: { subjects: string[]; groups: string[] };
  allowSelf: boolean;
  /** Lifetime of a request (pending or approved and not yet consumed), in milliseconds. */
  timeoutMs: number;
  /** How long an interactive call waits for a decision made elsewhere, in milliseconds (0: it fails closed at once). */
  waitMs: number;
}

/** Settings of rules that name none (the built-in level-4 rule among them): admins decide, 15 minutes, no wait. */
export const DEFAULT_APPROVAL: ApprovalSettings = {
  approvers: { subjects: [], groups: [] },
  allowSelf: false,
  timeoutMs: 15 * 60_000,
  waitMs: 0,
};

/** One rule of a policy. */
export interface PolicyRule {
  /** Unique name, reported in every decision the rule takes (`default/approval-for-level-4`). */
  name: string;
  match: PolicyMatch;
  decision: Decision;
  /** A sentence for people, reported with the decision. */
  reason: string;
  /** For `approval_required` rules: how approvals are decided ({@link DEFAULT_APPROVAL} when absent). */
  approval?: ApprovalSettings;
}

/** What a policy is evaluated on. */
export interface PolicyInput {
  kind: GovernanceCheck['kind'];
  server: string;
  target: string;
  subject: string;
  /** Groups of the principal (none when absent). */
  groups?: readonly string[];
  /** The caller the principal (an agent: `workflow-engine`) acts for; a rule's subjects and groups match either. */
  actingFor?: { subject: string; groups: readonly string[] };
  level: SideEffectLevel;
}

/** The outcome of evaluating a policy. */
export interface PolicyOutcome {
  decision: Decision;
  rule: string;
  reason: string;
  /** The approval settings of an `approval_required` outcome. */
  approval?: ApprovalSettings;
}

/** The built-in rules of every tenant: they follow the tenant's McpPolicy rules (all of its rules when it has none). */
export const defaultPolicy: readonly PolicyRule[] = [
  {
    name: 'default/allow-up-to-level-3',
    match: { maxLevel: 3 },
    decision: 'allow',
    reason: 'side-effect levels 0 to 3 are allowed by default',
  },
  {
    name: 'default/approval-for-level-4',
    match: { minLevel: 4 },
    decision: 'approval_required',
    reason: 'side-effect level 4 (destructive or payment) needs a human approval',
  },
];

/** Name of the implicit last rule: nothing matched, so the use is denied (fail closed). */
export const NO_MATCH_RULE = 'default/deny-unmatched';

/** Whether a rule's or rate limit's match covers a use. */
export function matches(match: PolicyMatch, input: PolicyInput): boolean {
  if (match.kinds && !match.kinds.includes(input.kind)) return false;
  if (match.servers && !match.servers.includes(input.server)) return false;
  if (match.targets && !match.targets.includes(input.target)) return false;
  // The principal, or the caller an agent acts for: a rule's subjects and groups match either one.
  const identities = [{ subject: input.subject, groups: input.groups }, ...(input.actingFor ? [input.actingFor] : [])];
  const matchesIdentity = (identity: { subject: string; groups?: readonly string[] | undefined }) =>
    (!match.subjects || match.subjects.includes(identity.subject)) &&
    (!match.groups || match.groups.some((group) => identity.groups?.includes(group)));
  if (!identities.some(matchesIdentity)) return false;
  if (match.minLevel !== undefined && input.level < match.minLevel) return false;
  if (match.maxLevel !== undefined && input.level > match.maxLevel) return false;
  return true;
}

/**
 * Evaluates ordered rules; the first rule that matches decides. When none
 * matches, the outcome is `deny` by {@link NO_MATCH_RULE}.
 */
export function evaluatePolicy(rules: readonly PolicyRule[], input: PolicyInput): PolicyOutcome {
  for (const rule of rules) {
    if (matches(rule.match, input))
      return {
        decision: rule.decision,
        rule: rule.name,
        reason: rule.reason,
        ...(rule.decision === 'approval_required' && { approval: rule.approval ?? DEFAULT_APPROVAL }),
      };
  }
  return { decision: 'deny', rule: NO_MATCH_RULE, reason: 'no policy rule matched, so the use is denied' };
}
