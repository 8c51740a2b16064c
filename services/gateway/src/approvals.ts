/**
 * A tools/call that a policy rule makes `approval_required` (docs/governance.md "Approvals"): the gateway claims an
 * approval for the exact call from governance (`punk.governance.approval`, its shared state). An approved,
 * unconsumed request of the same principal, server, tool and arguments digest is consumed and the call runs.
 * Otherwise the request is pending, and the call:
 * - asks the caller itself, when the rule lets it decide and its client declared elicitation: an `elicitation/create`
 *   form (approve or deny, optional reason) on the 2025-era session, or, for a 2026-07-28 client, the same elicitation
 *   as an `input_required` result whose retry carries the answer (the link of input-required.ts);
 * - else waits up to the rule's `wait` for a decision made elsewhere (governance's broadcast
 *   `punk.governance.approval.<id>.decided`, and a re-check every {@link RECHECK_MS}, which outlasts a governance
 *   restart), sending progress
 *   notifications when the client sent a progress token (the front's SSE keep-alive comments otherwise); the wait
 *   ends {@link DEADLINE_MARGIN_MS} before the front's deadline of the call, so that the refusal answers the client,
 *   not the front's timeout;
 * - then fails closed, naming the approval id and the route that decides it (and, when the deadline cut the wait,
 *   the deadline and how to lengthen it). An unattended call (no client channel) never waits or asks.
 * An approval is spent by a call that reaches its upstream: one consumed by a call that then ends before its request
 * goes out (a dead server, a full or timed-out queue, an open circuit) is given back ({@link releaseApproval}).
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import {
  approvalClaimReplySchema,
  approvalDecidedSchema,
  DEFAULT_APPROVAL,
  deadlines,
  errorMessage,
  parseMessage,
  PunkError,
  requestApproval,
  subjects,
  type Approval,
  type ApprovalClaimReply,
  type Bus,
  type GovernanceDecision,
  type Logger,
  type Principal,
} from '@punk/lib';
import type { ClientLink } from './client-channel.js';

/** How often a waiting call asks governance again, in case a decision's broadcast was missed. */
export const RECHECK_MS = 5_000;
/** How often a waiting call sends a progress notification when the client sent a progress token. */
const PROGRESS_MS = 5_000;
/**
 * How long before the front's deadline of a call its approval wait ends, in milliseconds: time for the last claim
 * (governance's approval deadline), the ledger's audit records and the reply to reach the front.
 */
export const DEADLINE_MARGIN_MS = deadlines.governanceApprovalMs + 1_000;

/**
 * The digest an approval is bound to: SHA-256 (hex) of the RFC 8785 canonical JSON (the `canonicalize` package) of
 * the call's arguments (`{}` when absent).
 */
export function argumentsDigest(args: Record<string, unknown> | undefined): string {
  return createHash('sha256')
    .update(canonicalize(args ?? {}) ?? '{}', 'utf8')
    .digest('hex');
}

/** The call whose approval is sought. */
export interface ApprovalCall {
  tenant: string;
  principal: Principal;
  server: string;
  tool: string;
  arguments: Record<string, unknown> | undefined;
  runId: string;
  sessionId: string | undefined;
  /** The `approval_required` decision, with its rule's approval settings. */
  decision: GovernanceDecision;
  /** The client of the call; undefined for an unattended caller. */
  link: ClientLink | undefined;
  /** The client's `_meta.progressToken`, when it sent one. */
  progressToken: string | number | undefined;
  /** Aborts when the client cancels the call. */
  signal: AbortSignal | undefined;
  /**
   * The front's deadline of the call (lib `CallDeadline`: `ms` and `source` name it) and `at`, the time (epoch
   * milliseconds) the front stops waiting for the reply; undefined when the caller has none (a workflow's node).
   */
  deadline?: { at: number; ms: number; source: string } | undefined;
}

/** What came of it: the consumed approval (run the call), or the refusal to answer as a tool error. */
export type ApprovalOutcome = { approved: true; approval: Approval } | { approved: false; message: string };

/**
 * Seeks an approval for `call` as the module comment says.
 * @throws PunkError from governance (`GovernanceUnavailable`, `GovernanceTimeout`); without governance's database the
 *   call fails closed (`ApprovalsUnavailable` becomes the refusal).
 */
export async function seekApproval(bus: Bus, log: Logger, call: ApprovalCall): Promise<ApprovalOutcome> {
  const settings = call.decision.approval;
  const claim = async (id?: string): Promise<ApprovalClaimReply> =>
    parseMessage(
      approvalClaimReplySchema,
      subjects.governanceApproval,
      await requestApproval(bus, {
        op: 'claim',
        tenant: call.tenant,
        principal: call.principal,
        server: call.server,
        tool: call.tool,
        argumentsDigest: argumentsDigest(call.arguments),
        arguments: call.arguments ?? {},
        rule: call.decision.rule,
        generation: call.decision.generation,
        approval: settings ?? DEFAULT_APPROVAL,
        runId: call.runId,
        ...(call.sessionId !== undefined && { sessionId: call.sessionId }),
        ...(id !== undefined && { id }),
      }),
    );
  let reply: ApprovalClaimReply;
  try {
    reply = await claim();
  } catch (error) {
    // Governance runs without a database: no approval can exist, so the call fails closed and says why.
    if (!(error instanceof PunkError) || error.code !== 'ApprovalsUnavailable') throw error;
    return {
      approved: false,
      message: `tool ${call.tool} on server ${call.server} was not run: ${call.decision.action} requires an approval (policy rule ${call.decision.rule}), and ${error.message}`,
    };
  }
  if (reply.approval.state === 'consumed') return { approved: true, approval: reply.approval };
  const id = reply.approval.id;
  if (call.link && reply.callerMayDecide && call.link.supports('elicitation/create')) {
    const decided = await askInConversation(bus, call, reply.approval);
    if (decided) {
      reply = await claim(id);
      if (reply.approval.state === 'consumed') return { approved: true, approval: reply.approval };
    }
  } else if (call.link && (settings?.waitMs ?? 0) > 0 && reply.approval.state === 'pending') {
    const ruleWaitMs = settings!.waitMs;
    const waitMs = call.deadline ? Math.max(0, Math.min(ruleWaitMs, call.deadline.at - DEADLINE_MARGIN_MS - Date.now())) : ruleWaitMs;
    reply = await waitForDecision(bus, log, call, id, waitMs, claim);
    if (reply.approval.state === 'consumed') return { approved: true, approval: reply.approval };
    if (waitMs < ruleWaitMs && reply.approval.state === 'pending')
      return { approved: false, message: `${refusalOf(call, reply.approval)}. ${cutWaitOf(call.deadline!, ruleWaitMs, waitMs)}` };
  }
  return { approved: false, message: refusalOf(call, reply.approval) };
}

/**
 * Gives back approval `id`, consumed by the call of run `runId` that then ended before its request reached the
 * upstream, so the next call of the same four may use it (`punk.governance.approval` op `release`). Never throws: when
 * governance cannot release it, the approval stays consumed (its `approval.consumed` event on the ledger) and a
 * warning says so.
 */
export async function releaseApproval(bus: Bus, log: Logger, release: { tenant: string; id: string; runId: string }): Promise<void> {
  try {
    await requestApproval(bus, { op: 'release', ...release });
  } catch (error) {
    log.warn(
      { approvalId: release.id, runId: release.runId, err: errorMessage(error) },
      'a call that did not reach its upstream could not give its approval back; the approval stays consumed',
    );
  }
}

/** Why a call waited less than its rule's `wait`, and the fix. */
function cutWaitOf(deadline: { ms: number; source: string }, ruleWaitMs: number, waitMs: number): string {
  return (
    `It waited ${seconds(waitMs)} of its rule's approval.wait of ${seconds(ruleWaitMs)}: the call's deadline is ${seconds(deadline.ms)} ` +
    `(${deadline.source}), and the wait ends before it. To wait longer, raise that deadline above the wait, or shorten the rule's approval.wait`
  );
}

/** Milliseconds as seconds for people (`57 s`, `0.5 s`). */
function seconds(ms: number): string {
  return `${String(ms >= 10_000 ? Math.round(ms / 1000) : Math.round(ms / 100) / 10)} s`;
}

/** The tool error of a call that did not get its approval, naming the request and what to do. */
function refusalOf(call: ApprovalCall, approval: Approval): string {
  const what = `tool ${call.tool} on server ${call.server} was not run: ${call.decision.action} requires an approval (policy rule ${call.decision.rule})`;
  const id = approval.id;
  switch (approval.state) {
    case 'denied':
      return `${what}, and approval ${id} was denied by ${approval.decidedBy ?? 'an approver'}${approval.reason ? `: ${approval.reason}` : ''}`;
    case 'expired':
      return `${what}, and approval ${id} expired at ${approval.expiresAt} undecided; call again to request a new one`;
    default:
      return (
        `${what}: approval ${id} is ${approval.state}; an approver decides it with POST /api/v1/approvals/${id}/approve ` +
        `(or /deny), then the same call runs once (until ${approval.expiresAt})`
      );
  }
}

/**
 * Asks the caller with an elicitation form, and records its answer as the decision (governance checks again that
 * it may). Resolves `true` once decided, `false` when the client cancelled, failed or answered nothing usable.
 */
async function askInConversation(bus: Bus, call: ApprovalCall, approval: Approval): Promise<boolean> {
  const link = call.link!;
  let answer: Record<string, unknown>;
  try {
    answer = await link.request('elicitation/create', {
      mode: 'form',
      message:
        `Approve the call of tool ${call.tool} on server ${call.server} (${call.decision.action}, rule ${call.decision.rule})? ` +
        `Arguments: ${JSON.stringify(call.arguments ?? {})}. Approval ${approval.id}.`,
      requestedSchema: {
        type: 'object',
        properties: {
          decision: { type: 'string', title: 'Decision', enum: ['approve', 'deny'], enumNames: ['Approve', 'Deny'] },
          reason: { type: 'string', title: 'Reason (optional)' },
        },
        required: ['decision'],
      },
    });
  } catch {
    return false;
  }
  const content = (answer['content'] ?? {}) as Record<string, unknown>;
  const verdict = answer['action'] === 'decline' ? 'deny' : answer['action'] === 'accept' ? content['decision'] : undefined;
  if (verdict !== 'approve' && verdict !== 'deny') return false;
  const reason = typeof content['reason'] === 'string' && content['reason'] !== '' ? content['reason'] : undefined;
  await requestApproval(bus, {
    op: 'decide',
    tenant: call.tenant,
    // Governance said the caller may decide (it holds what makes it an approver); it checks again here.
    caller: { principal: call.principal, admin: true, authOff: false },
    id: approval.id,
    verdict,
    reason: reason ?? (answer['action'] === 'decline' ? 'declined in conversation' : 'decided in conversation'),
  });
  return true;
}

/**
 * Waits up to `waitMs` for request `id` to be decided: on governance's broadcast, or a re-check every
 * {@link RECHECK_MS}; ends early when the client cancels. Resolves with the last claim's reply.
 */
async function waitForDecision(
  bus: Bus,
  log: Logger,
  call: ApprovalCall,
  id: string,
  waitMs: number,
  claim: (id: string) => Promise<ApprovalClaimReply>,
): Promise<ApprovalClaimReply> {
  const started = Date.now();
  // Set by the broadcast; a broadcast between two waits is kept for the next one.
  let decided = false;
  let wake: () => void = () => undefined;
  const subject = subjects.approvalDecided(id);
  const subscription = await bus.subscribe(subject, (data) => {
    parseMessage(approvalDecidedSchema, subject, data);
    decided = true;
    wake();
  });
  const progress =
    call.progressToken === undefined
      ? undefined
      : setInterval(() => {
          call.link?.notify('notifications/progress', {
            progressToken: call.progressToken,
            progress: Date.now() - started,
            total: waitMs,
            message: `waiting for approval ${id} (POST /api/v1/approvals/${id}/approve)`,
          });
        }, PROGRESS_MS);
  try {
    for (;;) {
      const left = waitMs - (Date.now() - started);
      if (left > 0 && !call.signal?.aborted && !decided) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, RECHECK_MS));
          const done = () => {
            clearTimeout(timer);
            resolve();
          };
          wake = done;
          call.signal?.addEventListener('abort', done, { once: true });
        });
      }
      decided = false;
      const ended = Date.now() - started >= waitMs || call.signal?.aborted === true;
      let reply: ApprovalClaimReply;
      try {
        reply = await claim(id);
      } catch (error) {
        // Governance restarting while the call waits: ask again at the next re-check (at the end, the error stands).
        if (ended || !(error instanceof PunkError) || (error.code !== 'GovernanceUnavailable' && error.code !== 'GovernanceTimeout'))
          throw error;
        log.warn({ id, err: error.message }, 'governance did not answer a waiting call; it asks again');
        continue;
      }
      if (reply.approval.state !== 'pending' || ended) return reply;
    }
  } finally {
    clearInterval(progress);
    await subscription
      .unsubscribe()
      .catch((error: unknown) => log.warn({ id, err: errorMessage(error) }, 'could not stop waiting for an approval'));
  }
}
