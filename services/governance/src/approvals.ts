/**
 * Approval requests, owned by governance in Postgres (table `governance.approvals`), so every replica sees the same
 * state and it survives a restart. A request is bound to the exact call that asked (principal, server, tool, the
 * SHA-256 of the RFC 8785 canonical arguments); once approved it authorises one call with the same four before it
 * expires, and is then `consumed` by an atomic `UPDATE … WHERE state = 'approved' RETURNING`, so two replicas never
 * both use it; a call that then fails before reaching its upstream gives it back (`release`). Every change is a ledger
 * event in the run of the call it belongs to, appended (acknowledged by the stream) inside the transaction of the
 * change, before it commits: a change whose event could not be appended is rolled back, so no state is without its
 * event (docs/governance.md "Approvals").
 */
import { randomUUID } from 'node:crypto';
import {
  appendLedgerEvent,
  PunkError,
  subjects,
  WORKFLOW_ENGINE_SUBJECT,
  type Approval,
  type ApprovalCaller,
  type ApprovalClaimReply,
  type ApprovalRequest,
  type ApprovalState,
  type ApprovalView,
  type Bus,
  type Database,
  type LedgerEventType,
  type Logger,
  type Principal,
  type Queryable,
} from '@punk/lib';

type Claim = Extract<ApprovalRequest, { op: 'claim' }>;
type Filter = Extract<ApprovalRequest, { op: 'list' }>['filter'];

/** Most requests `list` answers with, newest first. */
export const MAX_LISTED_APPROVALS = 500;

interface Row {
  id: string;
  tenant: string;
  subject: string;
  groups: string[];
  server: string;
  tool: string;
  arguments_digest: string;
  rule: string;
  generation: number;
  approvers: { subjects: string[]; groups: string[] };
  allow_self: boolean;
  run_id: string;
  session_id: string | null;
  state: ApprovalState;
  created_at: Date;
  expires_at: Date;
  decided_by: string | null;
  decided_at: Date | null;
  reason: string | null;
  consumed_at: Date | null;
  consumed_run_id: string | null;
}

function approvalOf(row: Row): Approval {
  return {
    id: row.id,
    tenant: row.tenant,
    principal: { subject: row.subject, groups: row.groups },
    server: row.server,
    tool: row.tool,
    argumentsDigest: row.arguments_digest,
    rule: row.rule,
    generation: row.generation,
    approvers: row.approvers,
    allowSelf: row.allow_self,
    runId: row.run_id,
    state: row.state,
    createdAt: new Date(row.created_at).toISOString(),
    expiresAt: new Date(row.expires_at).toISOString(),
    ...(row.decided_by !== null && { decidedBy: row.decided_by }),
    ...(row.decided_at !== null && { decidedAt: new Date(row.decided_at).toISOString() }),
    ...(row.reason !== null && { reason: row.reason }),
    ...(row.consumed_at !== null && { consumedAt: new Date(row.consumed_at).toISOString() }),
    ...(row.consumed_run_id !== null && { consumedRunId: row.consumed_run_id }),
  };
}

/**
 * Whom an approval request is bound to: the caller's subject, or, for an agent acting for a caller (the calls of a
 * workflow run), `<agent> for <caller>`, so that one caller's approved request is never used by a run another caller
 * started with the same arguments.
 */
function boundSubject(principal: Principal): string {
  return principal.actingFor ? `${principal.subject} for ${principal.actingFor.subject}` : principal.subject;
}

/** Whether `subject` made the call of `approval`, itself or through an agent acting for it. */
function madeTheCall(approval: Approval, subject: string): boolean {
  return approval.principal.subject === subject || approval.principal.subject === `${WORKFLOW_ENGINE_SUBJECT} for ${subject}`;
}

/**
 * Why `caller` may not decide `approval`, or undefined when it may. With authentication off the caller acts as an
 * admin and may decide any request. Otherwise the caller of the call never decides it unless the rule has
 * `allowSelf`; the rule's named approvers decide (a subject or a group named), and when it names none, holders
 * of the admin scope.
 */
export function decideRefusal(approval: Approval, caller: ApprovalCaller): string | undefined {
  if (caller.authOff) return undefined;
  const { subject, groups } = caller.principal;
  const self = madeTheCall(approval, subject) && !approval.allowSelf;
  // Who may decide comes first: a caller who may not decide anyway is told that, and that it made the call too.
  const alsoSelf = self ? `; ${subject} also made its call (rule ${approval.rule} does not set approval.allowSelf)` : '';
  const { subjects: named, groups: namedGroups } = approval.approvers;
  if (named.length > 0 || namedGroups.length > 0) {
    if (!named.includes(subject) && !groups.some((group) => namedGroups.includes(group)))
      return `only the approvers rule ${approval.rule} names may decide approval ${approval.id} (subjects: ${named.join(', ') || 'none'}; groups: ${namedGroups.join(', ') || 'none'})${alsoSelf}`;
  } else if (!caller.admin) {
    return `approval ${approval.id} is decided by an admin of tenant ${approval.tenant} (rule ${approval.rule} names no approvers)${alsoSelf}`;
  }
  if (self)
    return `${subject} made the call of approval ${approval.id} and may not approve it (rule ${approval.rule} does not set approval.allowSelf)`;
  return undefined;
}

/** `approval` as the approvals API shows it to `caller`: with whether it may decide it now, and why not. */
export function approvalViewFor(approval: Approval, caller: ApprovalCaller): ApprovalView {
  if (approval.state !== 'pending') return { ...approval, mayDecide: false };
  const refusal = decideRefusal(approval, caller);
  return refusal === undefined ? { ...approval, mayDecide: true } : { ...approval, mayDecide: false, decideRefusal: refusal };
}

/** Whether `caller` may see `approval`: whoever may decide it, and the caller of the call. */
function mayView(approval: Approval, caller: ApprovalCaller): boolean {
  return caller.authOff || caller.admin || madeTheCall(approval, caller.principal.subject) || !decideRefusal(approval, caller);
}

/** The approval store and its ledger events. */
export class ApprovalStore {
  constructor(
    private readonly db: Database,
    private readonly bus: Bus,
    private readonly log: Logger,
    /** Scopes that make a principal an admin (`PUNK_AUTH_ADMIN_SCOPE`, `PUNK_AUTH_PLATFORM_ADMIN_SCOPE`). */
    private readonly adminScopes: readonly string[],
  ) {}

  /**
   * A call's claim (see `approvalRequestSchema`): consumes the oldest matching approved request (or, with `claim.id`,
   * that one), else answers the pending (or, with `id`, its current) request, else records a new pending one.
   * Expired requests of the tenant are marked first.
   * @throws PunkError `ApprovalNotFound` for an unknown `claim.id` or one of another call; database and ledger errors.
   */
  async claim(claim: Claim): Promise<ApprovalClaimReply> {
    await this.expire(claim.tenant);
    const call = [claim.tenant, boundSubject(claim.principal), claim.server, claim.tool, claim.argumentsDigest];
    const callMatch = 'tenant = $1 AND subject = $2 AND server = $3 AND tool = $4 AND arguments_digest = $5';
    const target = claim.id === undefined ? '' : 'AND id = $7';
    const [consumed] = await this.change(
      `UPDATE governance.approvals SET state = 'consumed', consumed_at = now(), consumed_run_id = $6
        WHERE id = (SELECT id FROM governance.approvals WHERE ${callMatch} AND state = 'approved' AND expires_at > now() ${target}
                     ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND state = 'approved'
        RETURNING *`,
      [...call, claim.runId, ...(claim.id === undefined ? [] : [claim.id])],
      () => ({ type: 'approval.consumed', runId: claim.runId }),
    );
    if (consumed) return { approval: approvalOf(consumed), callerMayDecide: false };
    const existing =
      claim.id === undefined
        ? await this.db.query<Row>(
            `SELECT * FROM governance.approvals WHERE ${callMatch} AND state = 'pending' ORDER BY created_at LIMIT 1`,
            call,
          )
        : await this.db.query<Row>(`SELECT * FROM governance.approvals WHERE ${callMatch} AND id = $6`, [...call, claim.id]);
    let row = existing.rows[0];
    if (!row && claim.id !== undefined) throw new PunkError('ApprovalNotFound', `no approval ${claim.id} for this call`, { id: claim.id });
    if (!row) {
      [row] = await this.change(
        `INSERT INTO governance.approvals (id, tenant, subject, groups, server, tool, arguments_digest, rule, generation,
           approvers, allow_self, run_id, session_id, state, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', now() + $14 * interval '1 millisecond')
         RETURNING *`,
        [
          randomUUID(),
          claim.tenant,
          boundSubject(claim.principal),
          JSON.stringify(claim.principal.groups),
          claim.server,
          claim.tool,
          claim.argumentsDigest,
          claim.rule,
          claim.generation,
          JSON.stringify(claim.approval.approvers),
          claim.approval.allowSelf,
          claim.runId,
          claim.sessionId ?? null,
          claim.approval.timeoutMs,
        ],
        (created) => ({ type: 'approval.requested', runId: created.run_id, args: claim.arguments }),
      );
    }
    const approval = approvalOf(row!);
    return {
      approval,
      callerMayDecide: approval.state === 'pending' && decideRefusal(approval, this.callerOf(claim.principal)) === undefined,
    };
  }

  /**
   * The caller of an MCP call as a decider: an admin when its principal carries an admin scope; without
   * authentication (a principal without scopes) the one person there, so the rule's `allowSelf` alone decides.
   */
  private callerOf(principal: Principal): ApprovalCaller {
    const admin = principal.scopes === undefined || principal.scopes.some((scope) => this.adminScopes.includes(scope));
    return { principal, admin, authOff: false };
  }

  /** Requests of `tenant` that `caller` may see, newest first (at most {@link MAX_LISTED_APPROVALS}). */
  async list(tenant: string, caller: ApprovalCaller, filter: Filter): Promise<Approval[]> {
    await this.expire(tenant);
    const params: unknown[] = [tenant];
    const where = ['tenant = $1'];
    for (const [column, value] of [
      ['state', filter.state],
      ['server', filter.server],
      ['tool', filter.tool],
      ['subject', filter.subject],
    ] as const) {
      if (value === undefined) continue;
      params.push(value);
      where.push(`${column} = $${String(params.length)}`);
    }
    const { rows } = await this.db.query<Row>(
      `SELECT * FROM governance.approvals WHERE ${where.join(' AND ')} ORDER BY created_at DESC LIMIT ${String(MAX_LISTED_APPROVALS)}`,
      params,
    );
    return rows.map(approvalOf).filter((approval) => mayView(approval, caller));
  }

  /** @throws PunkError `ApprovalNotFound`; `ApprovalForbidden` for a caller who may neither decide it nor made its call. */
  async get(tenant: string, caller: ApprovalCaller, id: string): Promise<Approval> {
    await this.expire(tenant);
    const approval = await this.find(this.db, tenant, id);
    if (!approval) throw notFound(tenant, id);
    if (!mayView(approval, caller)) throw new PunkError('ApprovalForbidden', decideRefusal(approval, caller)!, { id });
    return approval;
  }

  /**
   * Approves or denies pending request `id` as `caller`, records it on the ledger and tells the waiting call.
   * @throws PunkError `ApprovalNotFound`, `ApprovalForbidden` (naming who may decide), `ApprovalNotPending` (naming its state).
   */
  async decide(
    tenant: string,
    caller: ApprovalCaller,
    id: string,
    verdict: 'approve' | 'deny',
    reason: string | undefined,
  ): Promise<Approval> {
    await this.expire(tenant);
    const found = await this.find(this.db, tenant, id);
    if (!found) throw notFound(tenant, id);
    const refusal = decideRefusal(found, caller);
    if (refusal) throw new PunkError('ApprovalForbidden', refusal, { id });
    const state: ApprovalState = verdict === 'approve' ? 'approved' : 'denied';
    const [decided] = await this.change(
      `UPDATE governance.approvals SET state = $3, decided_by = $4, decided_at = now(), reason = $5
        WHERE tenant = $1 AND id = $2 AND state = 'pending' AND expires_at > now() RETURNING *`,
      [tenant, id, state, caller.principal.subject, reason ?? null],
      (row) => ({ type: state === 'approved' ? 'approval.granted' : 'approval.denied', runId: row.run_id }),
    );
    if (!decided) {
      const now = await this.find(this.db, tenant, id);
      throw new PunkError('ApprovalNotPending', `approval ${id} is ${now?.state ?? 'gone'}, not pending: it cannot be decided any more`, {
        id,
        state: now?.state,
      });
    }
    const approval = approvalOf(decided);
    await this.bus
      .publish(subjects.approvalDecided(id), { id, state })
      .catch((error: unknown) =>
        this.log.warn({ id, err: String(error) }, 'could not announce an approval decision; waiting calls re-check'),
      );
    return approval;
  }

  /** Marks the open requests past their expiry (of `tenant`, or of every tenant) `expired`, each on the ledger. */
  async expire(tenant?: string): Promise<void> {
    await this.change(
      `UPDATE governance.approvals SET state = 'expired'
        WHERE state IN ('pending', 'approved') AND expires_at <= now() ${tenant === undefined ? '' : 'AND tenant = $1'} RETURNING *`,
      tenant === undefined ? [] : [tenant],
      (row) => ({ type: 'approval.expired', runId: row.run_id }),
    );
  }

  /**
   * Gives approval `id`, consumed by the call of run `runId`, back: that call ended before its request reached the
   * upstream, so the approval is `approved` again for the next call (until it expires), on the ledger in `runId`.
   * @throws PunkError `ApprovalNotFound`; `ApprovalNotConsumed` (naming its state) when it is not consumed by that run.
   */
  async release(tenant: string, id: string, runId: string): Promise<Approval> {
    const [released] = await this.change(
      `UPDATE governance.approvals SET state = 'approved', consumed_at = NULL, consumed_run_id = NULL
        WHERE tenant = $1 AND id = $2 AND state = 'consumed' AND consumed_run_id = $3 RETURNING *`,
      [tenant, id, runId],
      () => ({ type: 'approval.released', runId }),
    );
    if (released) return approvalOf(released);
    const now = await this.find(this.db, tenant, id);
    if (!now) throw notFound(tenant, id);
    throw new PunkError(
      'ApprovalNotConsumed',
      `approval ${id} is ${now.state}${now.consumedRunId ? ` (used by run ${now.consumedRunId})` : ''}, not consumed by run ${runId}: it cannot be released`,
      { id, state: now.state },
    );
  }

  /**
   * Runs the change `sql` (an UPDATE or INSERT … RETURNING *) in a transaction and appends the ledger event `event`
   * says for each row it returns before the transaction commits: when an append fails, the change is rolled back and
   * the error thrown. (A crash after the appends and before the commit leaves an event whose change is not made: the
   * event says what was attempted, never the reverse.) Resolves with the changed rows.
   */
  private change(
    sql: string,
    params: unknown[],
    event: (row: Row) => { type: LedgerEventType; runId: string; args?: Record<string, unknown> },
  ): Promise<Row[]> {
    return this.db.transaction(async (tx) => {
      const { rows } = await tx.query<Row>(sql, params);
      for (const row of rows) {
        const { type, runId, args } = event(row);
        await this.record(type, approvalOf(row), runId, args);
      }
      return rows;
    });
  }

  private async find(db: Queryable, tenant: string, id: string): Promise<Approval | undefined> {
    if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
    const { rows } = await db.query<Row>('SELECT * FROM governance.approvals WHERE tenant = $1 AND id = $2', [tenant, id]);
    return rows[0] && approvalOf(rows[0]);
  }

  /** Appends `type` for `approval` to the ledger in `runId`; `args`: the call's arguments (a new request's). */
  private async record(type: LedgerEventType, approval: Approval, runId: string, args?: Record<string, unknown>): Promise<void> {
    await appendLedgerEvent(this.bus, {
      id: randomUUID(),
      type,
      tenant: approval.tenant,
      runId,
      occurredAt: new Date().toISOString(),
      source: 'governance',
      principal: { subject: approval.principal.subject, tenant: approval.tenant, groups: approval.principal.groups },
      server: approval.server,
      data: {
        approvalId: approval.id,
        tool: approval.tool,
        argumentsDigest: approval.argumentsDigest,
        ...(args !== undefined && { arguments: args }),
        rule: approval.rule,
        generation: approval.generation,
        state: approval.state,
        expiresAt: approval.expiresAt,
        ...(approval.decidedBy !== undefined && { decidedBy: approval.decidedBy }),
        ...(approval.reason !== undefined && { reason: approval.reason }),
      },
    });
  }
}

function notFound(tenant: string, id: string): PunkError {
  return new PunkError('ApprovalNotFound', `no approval ${id} in tenant ${tenant}`, { id });
}
