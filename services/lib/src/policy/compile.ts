/**
 * McpPolicy custom resources compiled into the rules governance evaluates: a tenant's policies by ascending
 * `spec.priority`, then name; each policy's rules in order, named `<policy>/<rule>`; then the built-in default rules.
 * Principals match subjects, tools match targets (tool names, resource URIs, prompt names), side-effect levels
 * become the level bounds. Rate limits are compiled in the same order.
 */
import { durationMs } from '../spec/mcpserver.js';
import type { McpPolicy } from '../spec/mcppolicy.js';
import { DEFAULT_APPROVAL, type PolicyMatch, type PolicyRule } from './rules.js';

/** One rate limit of a tenant: at most `requests` uses per fixed window of `windowMs`, per principal. */
export interface RateLimitRule {
  /** `<policy>/<limit>`, reported when it refuses a use. */
  name: string;
  /** The McpPolicy it comes from (`metadata.name`). */
  policy: string;
  /** The limit's own name. */
  limit: string;
  match: PolicyMatch;
  requests: number;
  /** The window as written in the policy (`1m`). */
  per: string;
  /** Length of the window, in milliseconds. */
  windowMs: number;
}

/** What a decision evaluates for one tenant (in the gateway, mcp-front and governance alike). */
export interface CompiledPolicies {
  rules: readonly PolicyRule[];
  rateLimits: readonly RateLimitRule[];
}

/** The match of a rule or limit: absent lists match everything, as in the McpPolicy. */
function matchOf(item: {
  principals?: string[] | undefined;
  groups?: string[] | undefined;
  servers?: string[] | undefined;
  tools?: string[] | undefined;
}): PolicyMatch {
  return {
    ...(item.principals && { subjects: item.principals }),
    ...(item.groups && { groups: item.groups }),
    ...(item.servers && { servers: item.servers }),
    ...(item.tools && { targets: item.tools }),
  };
}

/**
 * Compiles the McpPolicy objects of one tenant (already validated with `mcpPolicySchema`) followed by `defaults`.
 * A tenant without policies gets `defaults` and no rate limit.
 */
export function compilePolicies(policies: readonly McpPolicy[], defaults: readonly PolicyRule[]): CompiledPolicies {
  const ordered = [...policies].sort(
    (a, b) => a.spec.priority - b.spec.priority || (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0),
  );
  const rules: PolicyRule[] = [];
  const rateLimits: RateLimitRule[] = [];
  for (const { metadata, spec } of ordered) {
    for (const rule of spec.rules) {
      const levels = rule.sideEffectLevels;
      rules.push({
        name: `${metadata.name}/${rule.name}`,
        match: {
          ...matchOf(rule),
          ...(levels?.min !== undefined && { minLevel: levels.min }),
          ...(levels?.max !== undefined && { maxLevel: levels.max }),
        },
        decision: rule.decision,
        reason: rule.reason ?? `McpPolicy ${metadata.name}, rule ${rule.name}: ${rule.decision}`,
        ...(rule.decision === 'approval_required' && {
          approval: rule.approval
            ? {
                approvers: { subjects: rule.approval.approvers?.subjects ?? [], groups: rule.approval.approvers?.groups ?? [] },
                allowSelf: rule.approval.allowSelf,
                timeoutMs: durationMs(rule.approval.timeout),
                waitMs: durationMs(rule.approval.wait),
              }
            : DEFAULT_APPROVAL,
        }),
      });
    }
    for (const limit of spec.rateLimits) {
      rateLimits.push({
        name: `${metadata.name}/${limit.name}`,
        policy: metadata.name,
        limit: limit.name,
        match: matchOf(limit),
        requests: limit.requests,
        per: limit.per,
        windowMs: durationMs(limit.per),
      });
    }
  }
  return { rules: [...rules, ...defaults], rateLimits };
}
