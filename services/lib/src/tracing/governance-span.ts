/**
 * Governance's span: one SERVER span `policy check {kind}` (e.g. `policy check tool`) per decision it is asked
 * for on `punk.governance.check`, child of the context in the message headers (the gateway's route span).
 */
import { SpanKind } from '@opentelemetry/api';
import type { RequestHandler } from '../bus/bus.js';
import { PUNK_SERVER, PUNK_TENANT } from './mcp-attributes.js';
import { inSpan } from './spans.js';

/** Punk's attributes of a policy check: what was checked, and what was decided by which rule. */
export const PUNK_POLICY_KIND = 'punk.policy.kind';
export const PUNK_POLICY_TARGET = 'punk.policy.target';
export const PUNK_POLICY_DECISION = 'punk.policy.decision';
export const PUNK_POLICY_RULE = 'punk.policy.rule';

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * Wraps the handler of `punk.governance.check`: each check runs in its span, with `punk.tenant`, `punk.server`,
 * `punk.policy.kind` and `punk.policy.target` from the check, and `punk.policy.decision` and `punk.policy.rule`
 * from the decision returned; log lines inside carry `runId` and `tenant`.
 */
export function traceGovernanceChecks(handler: RequestHandler): RequestHandler {
  return (data, info) => {
    const check = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
    const [kind, target, tenant, server, runId] = [
      text(check['kind']),
      text(check['target']),
      text(check['tenant']),
      text(check['server']),
      text(check['runId']),
    ];
    const attributes = {
      ...(kind && { [PUNK_POLICY_KIND]: kind }),
      ...(target && { [PUNK_POLICY_TARGET]: target }),
      ...(tenant && { [PUNK_TENANT]: tenant }),
      ...(server && { [PUNK_SERVER]: server }),
    };
    return inSpan(
      `policy check${kind ? ` ${kind}` : ''}`,
      { kind: SpanKind.SERVER, attributes, logFields: { runId, tenant } },
      async (span) => {
        const decision = (await handler(data, info)) as { decision?: unknown; rule?: unknown } | undefined;
        const [outcome, rule] = [text(decision?.decision), text(decision?.rule)];
        if (outcome) span.setAttribute(PUNK_POLICY_DECISION, outcome);
        if (rule) span.setAttribute(PUNK_POLICY_RULE, rule);
        return decision;
      },
    );
  };
}
