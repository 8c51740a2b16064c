import type { Database, LedgerEvent, Queryable, RunsPosition } from '@punk/lib';
import { GENESIS_HASH, chainEvent } from './chain.js';
import { recordAppend } from './metrics.js';
import { EVENT_COLUMNS, eventOfRow, runOfRow, type EventRow, type RunRow, type StoredEvent } from './rows.js';
import { runDeltas, type RunDelta, type RunSummary } from './runs.js';
import { verifyChain, type VerifyOptions, type VerifyResult } from './verify.js';

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
  /** Only runs after this one in the order of the list (last event time, then run id, both descending): the next page. */
  after?: RunsPosition;
  /** Only runs whose last event occurred strictly before this time. */
  before?: Date;
  /** Exact matches, combined with AND: the run's server, tool, subject, outcome, trigger, and an event type it holds. */
  server?: string;
  tool?: string;
  subject?: string;
  outcome?: string;
  trigger?: string;
  type?: string;
  /** Only runs whose last event is at or after this time. */
  since?: Date;
  /** Only runs whose first event is at or before this time. */
  until?: Date;
}

/** Namespace (first key) of the ledger's per-tenant advisory locks, so they never collide with other users of advisory locks. */
const LOCK_NAMESPACE = 'punk.ledger.chain';

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
      const heads = new Map<string, { tenant_seq: string; hash: string }>();
      if (unique.size > 0) {
        // After the locks (a statement's snapshot is taken at its start): the ids already stored and each chain's head.
        const known = await tx.query<{ kind: 'stored' | 'head'; key: string; tenant_seq: string | null; hash: string | null }>(
          `SELECT 'stored' AS kind, id::text AS key, NULL::bigint AS tenant_seq, NULL::text AS hash FROM ledger.events WHERE id = ANY($1::uuid[])
           UNION ALL SELECT 'head', tenant, tenant_seq, hash FROM ledger.heads WHERE tenant = ANY($2::text[])`,
          [[...unique.keys()], tenants],
        );
        for (const row of known.rows) {
          if (row.kind === 'stored') unique.delete(row.key);
          else heads.set(row.key, { tenant_seq: row.tenant_seq!, hash: row.hash! });
        }
      }
      const fresh = (written = [...unique.values()]);
      const chained: unknown[][] = [];
      const moved: unknown[][] = [];
      for (const tenant of tenants) {
        const ofTenant = fresh.filter((e) => e.tenant === tenant);
        if (ofTenant.length === 0) continue;
        const head = heads.get(tenant) ?? (await lastStored(tx, tenant));
        const rows = chainRows(ofTenant, Number(head?.tenant_seq ?? 0), head?.hash ?? GENESIS_HASH);
        chained.push(...rows);
        const last = rows[rows.length - 1]!;
        moved.push([tenant, last[EVENT_SEQ_COLUMN], last[EVENT_HASH_COLUMN]]);
      }
      await writeChained(tx, chained, moved, runDeltas(fresh));
      let recorded = 0;
      for (const message of rejected) recorded += await insertRejected(tx, message);
      return { appended: fresh.length, duplicates: events.length - fresh.length, rejected: recorded };
    });
    recordAppend(written, result.rejected);
    return result;
  }

  /** Runs of a tenant, most recently active first (by last event time, then run id). */
  async listRuns(options: ListRunsOptions): Promise<RunSummary[]> {
    const params: unknown[] = [options.tenant];
    const where = ['tenant = $1'];
    const add = (condition: (param: string) => string, value: unknown) => {
      if (value === undefined) return;
      params.push(value);
      where.push(condition(`$${String(params.length)}`));
    };
    if (options.after) {
      params.push(options.after.lastAt, options.after.runId);
      where.push(`(last_at, run_id) < ($${String(params.length - 1)}::timestamptz, $${String(params.length)})`);
    }
    add((p) => `last_at < ${p}::timestamptz`, options.before?.toISOString());
    add((p) => `last_at >= ${p}::timestamptz`, options.since?.toISOString());
    add((p) => `first_at <= ${p}::timestamptz`, options.until?.toISOString());
    for (const column of ['server', 'tool', 'subject', 'outcome', 'trigger'] as const) add((p) => `${column} = ${p}`, options[column]);
    add((p) => `${p} = ANY(types)`, options.type);
    params.push(options.limit);
    const result = await this.db.query<RunRow>(
      `SELECT * FROM ledger.runs WHERE ${where.join(' AND ')} ORDER BY last_at DESC, run_id DESC LIMIT $${String(params.length)}`,
      params,
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

  /** Verifies a tenant's chain from the stored checkpoint, within a budget; see `verifyChain`. */
  async verify(tenant: string, options?: VerifyOptions): Promise<VerifyResult> {
    return verifyChain(this.db, tenant, options);
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

/**
 * The last stored event of a tenant without a head record (an emptied `ledger.heads`): its chain goes on from there,
 * so appends never collide. Normally every chain's head record is where it goes on from: after a deleted tail the
 * new events leave the gap for verify to report, instead of quietly re-using its positions.
 */
async function lastStored(tx: Queryable, tenant: string): Promise<{ tenant_seq: string; hash: string } | undefined> {
  const last = await tx.query<{ tenant_seq: string; hash: string }>(
    'SELECT tenant_seq, hash FROM ledger.events WHERE tenant = $1 ORDER BY tenant_seq DESC LIMIT 1',
    [tenant],
  );
  return last.rows[0];
}

/**
 * The statement of a batch: its events, the heads they move and the runs' deltas, each table's rows as one array
 * per column (`unnest`), so the text is the same for every batch (planned as cheaply for 1 event as for 1,000) and
 * a batch is one round trip to the database. A run's `types` travel comma-joined (event types hold no comma).
 */
const APPEND_STATEMENT = `
  WITH e AS (
    INSERT INTO ledger.events (id, type, tenant, tenant_seq, run_id, occurred_at, source, principal, session_id, server, data, prev_hash, hash)
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::jsonb[], $9::text[],
                         $10::text[], $11::jsonb[], $12::text[], $13::text[])
  ), h AS (
    INSERT INTO ledger.heads (tenant, tenant_seq, hash) SELECT * FROM unnest($14::text[], $15::bigint[], $16::text[])
    ON CONFLICT (tenant) DO UPDATE SET tenant_seq = EXCLUDED.tenant_seq, hash = EXCLUDED.hash, updated_at = now()
  )
  INSERT INTO ledger.runs AS r (tenant, run_id, first_at, last_at, event_count, types, server, tool, outcome, subject, trigger)
  SELECT tenant, run_id, first_at, last_at, event_count, string_to_array(types, ','), server, tool, outcome, subject, trigger
  FROM unnest($17::text[], $18::text[], $19::timestamptz[], $20::timestamptz[], $21::integer[], $22::text[], $23::text[], $24::text[],
              $25::text[], $26::text[], $27::text[])
       AS x(tenant, run_id, first_at, last_at, event_count, types, server, tool, outcome, subject, trigger)
  ON CONFLICT (tenant, run_id) DO UPDATE SET
    first_at = LEAST(r.first_at, EXCLUDED.first_at),
    last_at = GREATEST(r.last_at, EXCLUDED.last_at),
    event_count = r.event_count + EXCLUDED.event_count,
    types = ARRAY(SELECT DISTINCT t FROM unnest(r.types || EXCLUDED.types) AS t ORDER BY t),
    server = COALESCE(r.server, EXCLUDED.server),
    tool = COALESCE(r.tool, EXCLUDED.tool),
    subject = COALESCE(r.subject, EXCLUDED.subject),
    trigger = COALESCE(r.trigger, EXCLUDED.trigger),
    outcome = COALESCE(EXCLUDED.outcome, r.outcome)`;

/** Positions of `tenant_seq` and `hash` in a row of {@link chainRows}. */
const EVENT_SEQ_COLUMN = 3;
const EVENT_HASH_COLUMN = 12;

/** One tenant's new events chained after position `seq` with hash `prevHash`, as rows of `ledger.events`' columns. */
function chainRows(events: LedgerEvent[], seq: number, prevHash: string): unknown[][] {
  return events.map((event) => {
    const link = chainEvent(event, ++seq, prevHash);
    prevHash = link.hash;
    return [
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
    ];
  });
}

function runRow(delta: RunDelta): unknown[] {
  return [
    delta.tenant,
    delta.runId,
    delta.firstAt.toISOString(),
    delta.lastAt.toISOString(),
    delta.eventCount,
    [...delta.types].sort().join(','),
    delta.server ?? null,
    delta.tool ?? null,
    delta.outcome ?? null,
    delta.subject ?? null,
    delta.trigger ?? null,
  ];
}

/** `rows` (of `width` values each) as one array per column. */
function columnsOf(rows: unknown[][], width: number): unknown[][] {
  return Array.from({ length: width }, (_, column) => rows.map((row) => row[column]));
}

/** Writes chained events, the heads they move and the runs' deltas in one statement ({@link APPEND_STATEMENT}). */
async function writeChained(tx: Queryable, events: unknown[][], heads: unknown[][], deltas: RunDelta[]): Promise<void> {
  if (events.length === 0) return;
  await tx.query(APPEND_STATEMENT, [...columnsOf(events, 13), ...columnsOf(heads, 3), ...columnsOf(deltas.map(runRow), 11)]);
}

async function insertRejected(tx: Queryable, message: RejectedMessage): Promise<number> {
  const result = await tx.query(
    `INSERT INTO ledger.rejected_messages (msg_id, stream_seq, subject, error, payload)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (msg_id) DO NOTHING`,
    [message.msgId, message.streamSeq, message.subject, message.error, JSON.stringify(message.payload) ?? 'null'],
  );
  return result.rowCount;
}
