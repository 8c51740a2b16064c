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
  evaluatePolicy,
  NO_MATCH_RULE,
  type PolicyRule,
  type PolicyMatch,
  type PolicyInput,
  type PolicyOutcome,
} from './policy.js';
export { startGovernance, decide, filterDecisions, type GovernanceOptions, type GovernanceService } from './service.js';
export { governanceService } from './definition.js';
