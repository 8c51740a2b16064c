import type { Queryable } from '@punk/lib';
import { GENESIS_HASH, hashLink } from './chain.js';
import { EVENT_COLUMNS, linkOfRow, type EventRow } from './rows.js';

/** Why verification stopped: the stored hash does not match the event's content, or the event does not link to its predecessor. */
export type BreakReason = 'HashMismatch' | 'BrokenLink';

/** Outcome of re-checking one tenant's chain. `events` counts the events read (up to and including a broken one). */
export type VerifyResult =
  | { ok: true; tenant: string; events: number; head: string }
  | { ok: false; tenant: string; events: number; firstBroken: { id: string; tenantSeq: number; reason: BreakReason; message: string } };

/**
 * Walks a tenant's chain from genesis in `tenant_seq` order, reading pages of
 * `pageSize` rows (keyset on `tenant_seq`, so memory stays flat on long chains),
 * recomputing each hash (see `hashLink`) and checking each link and position.
 * Stops at the first broken event. An empty chain is ok with `head` = `GENESIS_HASH`.
 * Note: a deleted tail is not detectable from the chain alone; compare `head` with a copy kept elsewhere.
 */
export async function verifyChain(db: Queryable, tenant: string, pageSize = 1000): Promise<VerifyResult> {
  let head = GENESIS_HASH;
  let position = 0;
  for (;;) {
    const page = await db.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM ledger.events WHERE tenant = $1 AND tenant_seq > $2 ORDER BY tenant_seq LIMIT $3`,
      [tenant, position, pageSize],
    );
    for (const row of page.rows) {
      const link = linkOfRow(row);
      const broken = (reason: BreakReason, message: string): VerifyResult => ({
        ok: false,
        tenant,
        events: position + 1,
        firstBroken: { id: link.id, tenantSeq: link.tenantSeq, reason, message },
      });
      if (link.tenantSeq !== position + 1) {
        return broken('BrokenLink', `event at tenant_seq ${link.tenantSeq} follows tenant_seq ${position}: events are missing`);
      }
      if (link.prevHash !== head) {
        return broken('BrokenLink', `prev_hash ${link.prevHash} does not match the previous event's hash ${head}`);
      }
      if (hashLink(link) !== row.hash) {
        return broken('HashMismatch', `stored hash ${row.hash} does not match the event's content`);
      }
      head = row.hash;
      position = link.tenantSeq;
    }
    if (page.rows.length < pageSize) return { ok: true, tenant, events: position, head };
  }
}
