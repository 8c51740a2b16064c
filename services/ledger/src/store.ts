import type { Database, LedgerEvent, Queryable } from '@punk/lib';
import { GENESIS_HASH, chainEvent } from './chain.js';
import { recordAppend } from './metrics.js';
import { EVENT_COLUMNS, eventOfRow, runOfRow, type EventRow, type RunRow, type StoredEvent } from './rows.js';
import { runDeltas, type RunSummary } from './runs.js';
import { verifyChain, type VerifyResult } from './verify.js';

/** A stream message that failed the LedgerEvent contract, kept in `ledger.rejected_messages`. */
export interface RejectedMessage {
  /** Stream msgId; a redelivered message is kept once. */
  msgId: string;
  streamSeq: number;
  subject: string;
  /** Why it was rejected (the validation error). */
  error: string;
  /** The message as received. */
  payload: unknown;
}

/** What one `append` call did. */
export interface AppendResult {
  /** Events newly written, in chain order. */
  appended: number;
  /** Events skipped because an event with the same id is already stored (or repeated in the batch). */
  duplicates: number;
  /** Rejected messages newly recorded. */
  rejected: number;
}

/** Page of runs. */
export interface ListRunsOptions {
  tenant: string;
  /** Most runs returned. */
  limit: number;
  /** Only runs whose last event occurred strictly before this time. */
  before?: Date;
}

/** Namespace (first key) of the ledger's per-tenant advisory locks, so they never collide with other users of advisory locks. */
const LOCK_NAMESPACE = 'punk.ledger.chain';
const COLUMNS_PER_EVENT = 13;

/**
 * The ledger's storage: append-only, hash-chained events per tenant, run
 * summaries, rejected messages, and chain verification, all in schema `ledger`.
 *
 * Chain serialisation: each append transaction takes
 * `pg_advisory_xact_lock(hashtext('punk.ledger.chain'), hashtext(tenant))` for
 * every tenant in the batch (sorted, so two writers cannot deadlock) before it
 * reads the tenant's head, so any number of ledger processes extend each chain
 * one after the other and it never forks. The lock is released at COMMIT/ROLLBACK.
 */
export class LedgerStore {
  constructor(private readonly db: Database) {}

  /**
   * Appends a batch in one transaction: events not already stored (by `id`)
   * get the next positions of their tenant's chain, in the order given; run
   * summaries are updated; `rejected` messages are recorded. All or nothing.
   * @throws the database error; nothing of the batch is then stored.
   */
  async append(events: LedgerEvent[], rejected: RejectedMessage[] = []): Promise<AppendResult> {
    let written: LedgerEvent[] = [];
    const result = await this.db.transaction(async (tx) => {
      const unique = new Map<string, LedgerEvent>();
      for (const event of events) if (!unique.has(event.id)) unique.set(event.id, event);
      const tenants = [...new Set([...unique.values()].map((e) => e.tenant))].sort();
      for (const tenant of tenants) {
        await tx.query('SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))', [LOCK_NAMESPACE, tenant]);
      }
      if (unique.size > 0) {
        const stored = await tx.query<{ id: string }>('SELECT id FROM ledger.events WHERE id = ANY($1::uuid[])', [[...unique.keys()]]);
        for (const { id } of stored.rows) unique.delete(id);
      }
      const fresh = (written = [...unique.values()]);
      for (const tenant of tenants) {
        const ofTenant = fresh.filter((e) => e.tenant === tenant);
        if (ofTenant.length > 0) await insertChained(tx, tenant, ofTenant);
      }
      for (const delta of runDeltas(fresh)) await upsertRun(tx, delta);
      let recorded = 0;
      for (const message of rejected) recorded += await insertRejected(tx, message);
      return { appended: fresh.length, duplicates: events.length - fresh.length, rejected: recorded };
    });
    recordAppend(written, result.rejected);
    return result;
  }

  /** Runs of a tenant, most recently active first (by last event time, then run id). */
  async listRuns(options: ListRunsOptions): Promise<RunSummary[]> {
    const result = await this.db.query<RunRow>(
      `SELECT * FROM ledger.runs WHERE tenant = $1 AND ($2::timestamptz IS NULL OR last_at < $2)
       ORDER BY last_at DESC, run_id DESC LIMIT $3`,
      [options.tenant, options.before?.toISOString() ?? null, options.limit],
    );
    return result.rows.map(runOfRow);
  }

  /**
   * A run and its events in chain order, or `undefined` when unknown.
   * With `tenant`, only that tenant's run; without it, the run id must belong to one tenant.
   * @returns `'ambiguous'` when no tenant is given and several tenants have a run with this id.
   */
  async getRun(runId: string, tenant?: string): Promise<{ run: RunSummary; events: StoredEvent[] } | 'ambiguous' | undefined> {
    const runs = await this.db.query<RunRow>(
      'SELECT * FROM ledger.runs WHERE run_id = $1 AND ($2::text IS NULL OR tenant = $2) ORDER BY tenant LIMIT 2',
      [runId, tenant ?? null],
    );
    if (runs.rows.length > 1) return 'ambiguous';
    const row = runs.rows[0];
    if (!row) return undefined;
    const events = await this.db.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM ledger.events WHERE tenant = $1 AND run_id = $2 ORDER BY tenant_seq`,
      [row.tenant, runId],
    );
    return { run: runOfRow(row), events: events.rows.map(eventOfRow) };
  }

  /** Re-checks a tenant's whole chain; see `verifyChain`. */
  async verify(tenant: string, pageSize?: number): Promise<VerifyResult> {
    return verifyChain(this.db, tenant, pageSize);
  }

  /** Rejected messages, oldest first (for operators and tests). */
  async listRejected(limit = 100): Promise<Array<RejectedMessage & { receivedAt: string }>> {
    const result = await this.db.query<{
      msg_id: string;
      stream_seq: string;
      subject: string;
      error: string;
      payload: string;
      received_at: Date;
    }>('SELECT msg_id, stream_seq, subject, error, payload, received_at FROM ledger.rejected_messages ORDER BY id LIMIT $1', [limit]);
    return result.rows.map((r) => ({
      msgId: r.msg_id,
      streamSeq: Number(r.stream_seq),
      subject: r.subject,
      error: r.error,
      payload: JSON.parse(r.payload) as unknown,
      receivedAt: r.received_at.toISOString(),
    }));
  }
}

/** Chains and inserts one tenant's new events after its current head; the tenant's lock must be held. */
async function insertChained(tx: Queryable, tenant: string, events: LedgerEvent[]): Promise<void> {
  const head = await tx.query<{ tenant_seq: string; hash: string }>(
    'SELECT tenant_seq, hash FROM ledger.events WHERE tenant = $1 ORDER BY tenant_seq DESC LIMIT 1',
    [tenant],
  );
  let seq = Number(head.rows[0]?.tenant_seq ?? 0);
  let prevHash = head.rows[0]?.hash ?? GENESIS_HASH;
  const values: string[] = [];
  const params: unknown[] = [];
  for (const event of events) {
    const link = chainEvent(event, ++seq, prevHash);
    prevHash = link.hash;
    const base = params.length;
    values.push(`(${Array.from({ length: COLUMNS_PER_EVENT }, (_, i) => `$${base + i + 1}`).join(', ')})`);
    params.push(
      link.id,
      link.type,
      link.tenant,
      link.tenantSeq,
      link.runId,
      link.occurredAt,
      link.source,
      link.principal === undefined ? null : JSON.stringify(link.principal),
      link.sessionId ?? null,
      link.server ?? null,
      JSON.stringify(link.data),
      link.prevHash,
      link.hash,
    );
  }
  await tx.query(
    `INSERT INTO ledger.events (id, type, tenant, tenant_seq, run_id, occurred_at, source, principal, session_id, server, data, prev_hash, hash)
     VALUES ${values.join(', ')}`,
    params,
  );
}

async function upsertRun(tx: Queryable, delta: ReturnType<typeof runDeltas>[number]): Promise<void> {
  await tx.query(
    `INSERT INTO ledger.runs AS r (tenant, run_id, first_at, last_at, event_count, types, server, tool, outcome, subject)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (tenant, run_id) DO UPDATE SET
       first_at = LEAST(r.first_at, EXCLUDED.first_at),
       last_at = GREATEST(r.last_at, EXCLUDED.last_at),
       event_count = r.event_count + EXCLUDED.event_count,
       types = ARRAY(SELECT DISTINCT t FROM unnest(r.types || EXCLUDED.types) AS t ORDER BY t),
       server = COALESCE(r.server, EXCLUDED.server),
       tool = COALESCE(r.tool, EXCLUDED.tool),
       subject = COALESCE(r.subject, EXCLUDED.subject),
       outcome = COALESCE(EXCLUDED.outcome, r.outcome)`,
    [
      delta.tenant,
      delta.runId,
      delta.firstAt.toISOString(),
      delta.lastAt.toISOString(),
      delta.eventCount,
      [...delta.types].sort(),
      delta.server ?? null,
      delta.tool ?? null,
      delta.outcome ?? null,
      delta.subject ?? null,
    ],
  );
}

async function insertRejected(tx: Queryable, message: RejectedMessage): Promise<number> {
  const result = await tx.query(
    `INSERT INTO ledger.rejected_messages (msg_id, stream_seq, subject, error, payload)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (msg_id) DO NOTHING`,
    [message.msgId, message.streamSeq, message.subject, message.error, JSON.stringify(message.payload) ?? 'null'],
  );
  return result.rowCount;
}
