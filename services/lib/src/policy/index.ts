export {
  classify,
  heuristicToolLevel,
  splitWords,
  actionOf,
  UNKNOWN_TOOL_LEVEL,
  type Classification,
  type LevelSource,
} from './classify.js';
export { compilePolicies, type CompiledPolicies, type RateLimitRule } from './compile.js';
export {
  defaultPolicy,
  DEFAULT_APPROVAL,
  evaluatePolicy,
  matches,
  NO_MATCH_RULE,
  type PolicyRule,
  type PolicyMatch,
  type PolicyInput,
  type PolicyOutcome,
  type ApprovalSettings,
} from './rules.js';
export { watchPolicies, type TenantPolicies, type TenantPolicy } from './watch.js';
export { decide, decisionEvent, filterDecisions, needsSharedState, policyInputOf } from './decide.js';
export { policyEntryOf, publishPolicy, withdrawPolicy, type PolicyObject } from './publish.js';
