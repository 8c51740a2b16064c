/** Governance as a process of its own (`node services/governance/dist/main.js`, `punk governance`). */
import { streams, type ServiceDefinition } from '@punk/lib';
import { startGovernance } from './service.js';

/**
 * Service definition of governance for `runService`: ensures the ledger stream
 * (every decision is appended there before it is answered) and serves
 * `punk.governance.check` and `punk.governance.filter` in its queue group with each tenant's McpPolicy
 * objects (bucket `PUNK_MCP_POLICIES`) before the default rules, and their rate limits (bucket `PUNK_RATE_LIMITS`).
 */
export const governanceService: ServiceDefinition = {
  name: 'governance',
  needsDatabase: false,
  streams: [streams.ledger],
  async start({ bus, log }) {
    return startGovernance({ bus, log });
  },
};
