/** Governance as a process of its own (`node services/governance/dist/main.js`, `punk governance`). */
import { streams, type ServiceDefinition } from '@punk/lib';
import { startGovernance } from './service.js';

/**
 * Service definition of governance for `runService`: ensures the ledger stream
 * (every decision is appended there before it is answered) and serves
 * `punk.governance.check` in its queue group with each tenant's McpPolicy objects (bucket `PUNK_MCP_POLICIES`)
 * before the default rules, and their rate limits (bucket `PUNK_RATE_LIMITS`); approvals on
 * `punk.governance.approval` and the settings API on `punk.governance.admin`, both stored in Postgres
 * (`PUNK_DATABASE_URL`, schema `governance`, migrated at start).
 */
export const governanceService: ServiceDefinition = {
  name: 'governance',
  needsDatabase: true,
  streams: [streams.ledger],
  async start({ bus, log, db, config }) {
    return startGovernance({ bus, log, db: db!, adminScopes: [config.authAdminScope, config.authPlatformAdminScope] });
  },
};
