export { startGovernance, type GovernanceOptions, type GovernanceService } from './service.js';
export { GOVERNANCE_SCHEMA, GOVERNANCE_MIGRATIONS_DIR } from './migrations.js';
export { governanceService } from './definition.js';
