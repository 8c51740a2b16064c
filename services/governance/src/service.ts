/**
 * The governance service: the shared state of decisions. Gateways decide calls in process (`decide` in @punk/lib) and
 * ask here, on `punk.governance.check`, only when a decision needs what replicas share: a McpPolicy rate limit's
 * counters. Governance answers with the decision and records it on the ledger before replying. Each tenant's McpPolicy
 * objects (bucket `PUNK_MCP_POLICIES`, watched as every replica that decides watches it) come before the built-in
 * rules; their rate limits count checks (mcp-front filters its lists in process and counts nothing).
 */
import {
  appendLedgerEvent,
  approvalRequestSchema,
  PunkError,
  decide,
  decisionEvent,
  errorMessage,
  governanceCheckSchema,
  parseMessage,
  policyInputOf,
  queues,
  subjects,
  watchPolicies,
  watchTenantSettings,
  type Bus,
  type Database,
  type GovernanceCheck,
  type Logger,
} from '@punk/lib';
import { traceGovernanceChecks } from '@punk/lib';
import { ApprovalStore, approvalViewFor } from './approvals.js';
import { countRateLimited, observeChecks } from './metrics.js';
import { migrateGovernance } from './migrations.js';
import { RateLimiter } from './rate-limits.js';
import { SettingsStore, settingsAdminHandler } from './settings.js';

/** How often expired approval requests are marked `expired` (and ledgered) besides on every use of the store. */
const EXPIRY_SWEEP_MS = 30_000;

/** Options of {@link startGovernance}. */
export interface GovernanceOptions {
  bus: Bus;
  log: Logger;
  /**
   * Governance's database (schema `governance`, migrated at start): approvals and the tenant settings. Without it,
   * `punk.governance.approval` answers `ApprovalsUnavailable` (every approval_required call fails closed) and the
   * settings API is not served (the settings are only watched).
   */
  db?: Database | undefined;
  /** Scopes that make a principal an admin, who decides approvals of rules naming no approvers; default `punk:admin`, `punk:platform-admin`. */
  adminScopes?: readonly string[];
}

/** A running governance service. */
export interface GovernanceService {
  /** Stops answering checks; in-flight checks finish. */
  stop(): Promise<void>;
}

/**
 * Starts serving `subjects.governanceCheck` and `subjects.governanceAdmin` (the settings API, settings.ts) in queue
 * group `queues.governance`, after migrating its schema and publishing the stored tenant settings.
 * A malformed check is answered with PunkError `InvalidMessage` and logged; a
 * failed ledger append is answered with the append's error (no decision is
 * acknowledged without its audit record).
 */
export async function startGovernance(options: GovernanceOptions): Promise<GovernanceService> {
  const { bus, log, db } = options;
  if (db) await migrateGovernance(db, log);
  // Before serving: this replica's own appends (decisions, settings changes) are masked as the tenant's setting says.
  const settings = await watchTenantSettings(bus, log);
  const admin = db
    ? await bus.serve(subjects.governanceAdmin, settingsAdminHandler(await SettingsStore.open(db, bus), log), { queue: queues.governance })
    : undefined;
  const approvals = db && new ApprovalStore(db, bus, log, options.adminScopes ?? ['punk:admin', 'punk:platform-admin']);
  const policies = await watchPolicies(bus, log);
  const limiter = await RateLimiter.open(bus);
  const subscription = await bus.serve(
    subjects.governanceCheck,
    traceGovernanceChecks(
      observeChecks(async (data) => {
        let check: GovernanceCheck;
        try {
          check = parseMessage(governanceCheckSchema, subjects.governanceCheck, data);
        } catch (error) {
          log.error({ err: errorMessage(error) }, 'rejected a malformed governance check');
          throw error;
        }
        const policy = policies.of(check.tenant);
        let decision = decide(check, policy);
        if (decision.decision !== 'deny' && policy.rateLimits.length > 0) {
          const input = policyInputOf(check, check.principal, decision.sideEffectLevel);
          const over = await limiter.exceeded(check.tenant, input, policy.rateLimits);
          if (over) countRateLimited(check);
          if (over)
            decision = {
              ...decision,
              decision: 'deny',
              rule: over.name,
              reason: `rate limit ${over.limit}: ${over.requests} requests per ${over.per} exceeded`,
            };
        }
        await appendLedgerEvent(bus, decisionEvent(check, decision, 'governance'));
        log.debug({ action: decision.action, decision: decision.decision, rule: decision.rule }, 'governance decision');
        return decision;
      }),
    ),
    { queue: queues.governance },
  );
  const approvalSubscription = await bus.serve(
    subjects.governanceApproval,
    async (data) => {
      const request = parseMessage(approvalRequestSchema, subjects.governanceApproval, data);
      if (!approvals)
        throw new PunkError(
          'ApprovalsUnavailable',
          'approvals need governance to have a database (PUNK_DATABASE_URL); the call is refused until then',
        );
      switch (request.op) {
        case 'claim':
          return approvals.claim(request);
        case 'release':
          return { approval: await approvals.release(request.tenant, request.id, request.runId) };
        case 'list':
          return {
            approvals: (await approvals.list(request.tenant, request.caller, request.filter)).map((approval) =>
              approvalViewFor(approval, request.caller),
            ),
          };
        case 'get':
          return { approval: approvalViewFor(await approvals.get(request.tenant, request.caller, request.id), request.caller) };
        case 'decide':
          return {
            approval: approvalViewFor(
              await approvals.decide(request.tenant, request.caller, request.id, request.verdict, request.reason),
              request.caller,
            ),
          };
      }
    },
    { queue: queues.governance },
  );
  const sweep =
    approvals &&
    setInterval(() => {
      approvals.expire().catch((error: unknown) => log.warn({ err: errorMessage(error) }, 'could not expire approval requests'));
    }, EXPIRY_SWEEP_MS);
  sweep?.unref();
  return {
    stop: async () => {
      clearInterval(sweep);
      await Promise.all([subscription.unsubscribe(), approvalSubscription.unsubscribe(), admin?.unsubscribe(), policies.stop()]);
      await settings.stop();
    },
  };
}
