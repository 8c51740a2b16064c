import { setTimeout as pause } from 'node:timers/promises';
import type { Queryable } from '@punk/lib';
import { GENESIS_HASH, hashLink } from './chain.js';
import { EVENT_COLUMNS, linkOfRow, type EventRow } from './rows.js';

/**
 * Why verification stopped: the stored hash does not match the event's content (`HashMismatch`), the event does not
 * link to its predecessor or follows a gap (`BrokenLink`), the chain ends before the head record (`TruncatedTail`),
 * or the chain's last event is not the head record's (`HeadMismatch`, also when the head record is missing).
 */
export type BreakReason = 'HashMismatch' | 'BrokenLink' | 'TruncatedTail' | 'HeadMismatch';

/** A position of a chain: `tenantSeq` (0 before the first event) and the hash there (`GENESIS_HASH` at 0). */
export interface ChainPosition {
  tenantSeq: number;
  hash: string;
}

/** What every verification answer tells beside its verdict. */
interface VerifyProgress {
  tenant: string;
  /**
   * Events this request checked, each once: the new ones since the checkpoint (all of them from genesis), then a
   * stretch of the sweep over the ones verified before this request.
   */
  checked: number;
  /** The tenant's head record (last position and hash, written with each append), or `null` when it has none. */
  chainHead: ChainPosition | null;
  /**
   * The sweep that checks already verified events again, a stretch per request: the position it has reached (0: a
   * new pass starts next) and when it last went over every verified event (RFC 3339, `null` before the first time).
   */
  sweep: { tenantSeq: number; sweptAt: string | null };
}

/**
 * The first broken event: `id` and `runId` (its run, as stored) are absent when that event is missing (a deleted
 * tail, a removed head record).
 */
export interface ChainBreak {
  id?: string;
  runId?: string;
  tenantSeq: number;
  reason: BreakReason;
  message: string;
}

/**
 * Outcome of one verification request of a tenant's chain.
 * - ok: every event up to `events` (a chain position) is linked and hashed right; `head` is the hash there;
 *   `complete` is true when that is the head record (the whole chain), false when the request's budget ran out
 *   first (call again: the next request resumes there).
 * - broken: `events` is the position of the first broken event, described by `firstBroken`.
 */
export type VerifyResult =
  | ({ ok: true; events: number; head: string; complete: boolean } & VerifyProgress)
  | ({ ok: false; events: number; complete: boolean; firstBroken: ChainBreak } & VerifyProgress);

/** Bounds and starting point of one verification request. */
export interface VerifyOptions {
  /** `checkpoint` (default): resume after the stored checkpoint; `genesis`: verify every event again from the first. */
  from?: 'checkpoint' | 'genesis';
  /** Most events this request checks (default {@link DEFAULT_VERIFY_MAX_EVENTS}). */
  maxEvents?: number;
  /** Time after which the request stops at the next page boundary, in milliseconds (default {@link DEFAULT_VERIFY_MAX_MS}). */
  maxMs?: number;
  /** Rows read per query (default 100); between pages the request pauses as long as the page took, so calls get in between. */
  pageSize?: number;
}

/** Default of {@link VerifyOptions.maxEvents}. */
export const DEFAULT_VERIFY_MAX_EVENTS = 100_000;
/** Default of {@link VerifyOptions.maxMs}. */
export const DEFAULT_VERIFY_MAX_MS = 2_000;

const genesis = (): ChainPosition => ({ tenantSeq: 0, hash: GENESIS_HASH });

/** What is left of a request's budget. */
interface Budget {
  events: number;
  stopAt: number;
  pageSize: number;
}

const spent = (budget: Budget) => budget.events <= 0 || performance.now() >= budget.stopAt;

/**
 * Checks the events after `from` up to position `to` (inclusive), page by page, pausing between pages as long as
 * the page took and stopping once the budget is spent (after at least one page). `done`: it reached `to` or the last stored
 * event; `at`: the last good position.
 */
async function walk(
  db: Queryable,
  tenant: string,
  from: ChainPosition,
  to: number,
  budget: Budget,
): Promise<{ at: ChainPosition; done: boolean; broken?: ChainBreak }> {
  let at = from;
  for (;;) {
    const pageStarted = performance.now();
    const page = await db.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM ledger.events WHERE tenant = $1 AND tenant_seq > $2 AND tenant_seq <= $3 ORDER BY tenant_seq LIMIT $4`,
      [tenant, at.tenantSeq, to, Math.max(1, Math.min(budget.pageSize, budget.events))],
    );
    for (const row of page.rows) {
      const link = linkOfRow(row);
      const where = { id: link.id, runId: link.runId, tenantSeq: link.tenantSeq };
      budget.events--;
      if (link.tenantSeq !== at.tenantSeq + 1) {
        const message = `event at tenant_seq ${link.tenantSeq} follows tenant_seq ${at.tenantSeq}: events ${at.tenantSeq + 1} to ${link.tenantSeq - 1} are missing`;
        return { at, done: true, broken: { ...where, reason: 'BrokenLink', message } };
      }
      if (link.prevHash !== at.hash) {
        const message = `prev_hash ${link.prevHash} does not match the previous event's hash ${at.hash}`;
        return { at, done: true, broken: { ...where, reason: 'BrokenLink', message } };
      }
      if (hashLink(link) !== row.hash) {
        return {
          at,
          done: true,
          broken: { ...where, reason: 'HashMismatch', message: `stored hash ${row.hash} does not match the event's content` },
        };
      }
      at = { tenantSeq: link.tenantSeq, hash: row.hash };
    }
    if (page.rows.length === 0 || at.tenantSeq >= to) return { at, done: true };
    if (spent(budget)) return { at, done: false };
    // As long again as the page took: verification takes at most about half the process's time (on PGlite, the
    // database's too), so the calls' reads and commits get in between.
    await pause(performance.now() - pageStarted);
  }
}

/** Where the chain must end, given its head record and the last verified position; `undefined` when it does. */
async function headBreak(
  db: Queryable,
  tenant: string,
  chainHead: ChainPosition | null,
  at: ChainPosition,
): Promise<ChainBreak | undefined> {
  if (chainHead === null) {
    if (at.tenantSeq === 0) return undefined;
    const message = `the chain has ${at.tenantSeq} events but no head record (ledger.heads): it was removed, so the tail cannot be checked`;
    return { tenantSeq: at.tenantSeq, reason: 'HeadMismatch', message };
  }
  if (at.tenantSeq < chainHead.tenantSeq) {
    const message = `the chain ends at tenant_seq ${at.tenantSeq} but its head record is tenant_seq ${chainHead.tenantSeq} (hash ${chainHead.hash}): events ${at.tenantSeq + 1} to ${chainHead.tenantSeq} are missing`;
    return { tenantSeq: at.tenantSeq + 1, reason: 'TruncatedTail', message };
  }
  if (at.hash === chainHead.hash) return undefined;
  const last = await db.query<{ id: string; run_id: string }>(
    'SELECT id, run_id FROM ledger.events WHERE tenant = $1 AND tenant_seq = $2',
    [tenant, at.tenantSeq],
  );
  return {
    ...(last.rows[0] && { id: last.rows[0].id, runId: last.rows[0].run_id }),
    tenantSeq: at.tenantSeq,
    reason: 'HeadMismatch',
    message: `the event at tenant_seq ${at.tenantSeq} has hash ${at.hash} but the head record says ${chainHead.hash}`,
  };
}

/**
 * Verifies a tenant's chain incrementally, within a budget (`maxEvents`, `maxMs`), in pages of `pageSize` rows
 * with a pause as long as each page took after it (so calls get at least about half the process's time):
 * 1. the events appended since the stored checkpoint (`ledger.verified`), up to the head record read at the start
 *    (later appends wait for the next request): each hash recomputed (see `hashLink`), each link and position
 *    checked. From genesis with `from: 'genesis'`, or when the checkpoint's event is gone or changed.
 * 2. on reaching the head record, that the chain ends there with the recorded hash: a deleted tail
 *    (`TruncatedTail`) or a replaced last event (`HeadMismatch`) is reported;
 * 3. with what is left of the budget, the next stretch of the sweep: the events verified before this request checked
 *    again from genesis, so an edit behind the checkpoint is found too (within one request on a short chain, over
 *    several on a long one). A request that started from genesis checked every event already: that is the pass.
 * Stops at the first broken event. Stores the checkpoint (the last good position) and the sweep's position.
 * An empty chain without a head record is ok with `head` = `GENESIS_HASH`.
 */
export async function verifyChain(db: Queryable, tenant: string, options: VerifyOptions = {}): Promise<VerifyResult> {
  const budget: Budget = {
    events: options.maxEvents ?? DEFAULT_VERIFY_MAX_EVENTS,
    stopAt: performance.now() + (options.maxMs ?? DEFAULT_VERIFY_MAX_MS),
    pageSize: options.pageSize ?? 100,
  };
  const startEvents = budget.events;
  const chainHead = await readHead(db, tenant);
  const state = options.from === 'genesis' ? { checkpoint: genesis(), sweep: genesis(), sweptAt: null } : await readState(db, tenant);
  let { checkpoint, sweep, sweptAt } = state;
  const result = async (verdict: { ok: true; complete: boolean } | { ok: false; complete: boolean; firstBroken: ChainBreak }) => {
    // A tenant without events leaves no row behind.
    if (chainHead !== null || checkpoint.tenantSeq > 0) await storeState(db, tenant, checkpoint, sweep, sweptAt);
    const progress: VerifyProgress = {
      tenant,
      checked: startEvents - budget.events,
      chainHead,
      sweep: { tenantSeq: sweep.tenantSeq, sweptAt: sweptAt?.toISOString() ?? null },
    };
    return verdict.ok
      ? { ...verdict, events: checkpoint.tenantSeq, head: checkpoint.hash, ...progress }
      : { ...verdict, events: verdict.firstBroken.tenantSeq, ...progress };
  };
  const brokenAt = (at: ChainPosition, firstBroken: ChainBreak) => {
    // Resume just before the break, so every later request reports it again until the chain is mended.
    checkpoint = at;
    if (sweep.tenantSeq > at.tenantSeq) sweep = genesis();
    return result({ ok: false, complete: true, firstBroken });
  };

  // The events verified before this request: the sweep goes over them only, so no event is checked twice in one
  // request (`checked` counts each once) and the pass is over on reaching the ones this request checked.
  const before = checkpoint.tenantSeq;
  const fresh = await walk(db, tenant, checkpoint, chainHead?.tenantSeq ?? Number.MAX_SAFE_INTEGER, budget);
  if (fresh.broken) return brokenAt(fresh.at, fresh.broken);
  checkpoint = fresh.at;
  if (!fresh.done) return result({ ok: true, complete: false });
  const tail = await headBreak(db, tenant, chainHead, checkpoint);
  if (tail) return result({ ok: false, complete: true, firstBroken: tail });

  if (before === 0) {
    // Every event was checked from genesis by this request: that is a whole pass.
    sweep = genesis();
    if (checkpoint.tenantSeq > 0) sweptAt = new Date();
  } else if (!spent(budget)) {
    if (sweep.tenantSeq >= before) sweep = genesis();
    const swept = await walk(db, tenant, sweep, before, budget);
    if (swept.broken) return brokenAt(swept.at, swept.broken);
    sweep = swept.at;
    if (swept.done) {
      sweep = genesis();
      sweptAt = new Date();
    }
  }
  return result({ ok: true, complete: true });
}

async function readHead(db: Queryable, tenant: string): Promise<ChainPosition | null> {
  const row = (
    await db.query<{ tenant_seq: string; hash: string }>('SELECT tenant_seq, hash FROM ledger.heads WHERE tenant = $1', [tenant])
  ).rows[0];
  return row ? { tenantSeq: Number(row.tenant_seq), hash: row.hash } : null;
}

/**
 * The stored checkpoint and sweep. Each is used only while its event is still there with the hash it was checked
 * with; otherwise it starts again from genesis (the stored chain changed under it).
 */
async function readState(
  db: Queryable,
  tenant: string,
): Promise<{ checkpoint: ChainPosition; sweep: ChainPosition; sweptAt: Date | null }> {
  const row = (
    await db.query<{
      tenant_seq: string;
      hash: string;
      at_checkpoint: string | null;
      sweep_seq: string;
      sweep_hash: string;
      at_sweep: string | null;
      swept_at: Date | null;
    }>(
      `SELECT v.tenant_seq, v.hash, c.hash AS at_checkpoint, v.sweep_seq, v.sweep_hash, s.hash AS at_sweep, v.swept_at
       FROM ledger.verified v
       LEFT JOIN ledger.events c ON c.tenant = v.tenant AND c.tenant_seq = v.tenant_seq
       LEFT JOIN ledger.events s ON s.tenant = v.tenant AND s.tenant_seq = v.sweep_seq
       WHERE v.tenant = $1`,
      [tenant],
    )
  ).rows[0];
  if (!row) return { checkpoint: genesis(), sweep: genesis(), sweptAt: null };
  const usable = (seq: string, hash: string, stored: string | null): ChainPosition =>
    Number(seq) > 0 && stored === hash ? { tenantSeq: Number(seq), hash } : genesis();
  return {
    checkpoint: usable(row.tenant_seq, row.hash, row.at_checkpoint),
    sweep: usable(row.sweep_seq, row.sweep_hash, row.at_sweep),
    sweptAt: row.swept_at,
  };
}

async function storeState(
  db: Queryable,
  tenant: string,
  checkpoint: ChainPosition,
  sweep: ChainPosition,
  sweptAt: Date | null,
): Promise<void> {
  await db.query(
    `INSERT INTO ledger.verified (tenant, tenant_seq, hash, sweep_seq, sweep_hash, swept_at) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (tenant) DO UPDATE SET tenant_seq = EXCLUDED.tenant_seq, hash = EXCLUDED.hash, verified_at = now(),
       sweep_seq = EXCLUDED.sweep_seq, sweep_hash = EXCLUDED.sweep_hash, swept_at = EXCLUDED.swept_at`,
    [tenant, checkpoint.tenantSeq, checkpoint.hash, sweep.tenantSeq, sweep.hash, sweptAt?.toISOString() ?? null],
  );
}
