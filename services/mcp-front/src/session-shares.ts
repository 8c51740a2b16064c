/**
 * The share of 2025-era sessions each principal may hold, cluster-wide: at most `limit` live sessions per principal
 * (an anonymous caller: per client address), beside the endpoint's ceiling `PUNK_MAX_SESSIONS`, so one caller cannot
 * take every session. Each principal's stored session ids are listed in the bus's key-value bucket
 * `PUNK_PRINCIPAL_SESSIONS` (NATS KV, or a map in embedded mode), written with compare-and-set. A session that ended
 * (DELETE, expiry) frees its place at once: when a principal is at its bound, its ids are checked against the
 * session store and the ended ones dropped. Concurrent `initialize` requests of one principal may pass the check
 * together, so the bound can be passed by as many as race.
 */
import { createHash } from 'node:crypto';
import { buckets, PunkError, type Bus, type KvEntry, type KvStore } from '@punk/lib';
import type { SessionStore } from './sessions.js';

/** Outcome of a check: within the share, or refused with the sentence that says why. */
export type ShareDecision = { allowed: true } | { allowed: false; reason: string };

/** Counts the sessions of each principal. */
export class SessionShares {
  private constructor(
    private readonly kv: KvStore,
    private readonly sessions: SessionStore,
    private readonly limit: number,
  ) {}

  /**
   * Opens (creating if needed) the bucket.
   * @param limit most live sessions per owner (a positive integer).
   * @throws PunkError `BusUnavailable` when the bucket cannot be opened.
   */
  static async open(bus: Bus, sessions: SessionStore, limit: number): Promise<SessionShares> {
    return new SessionShares(await bus.keyValue(buckets.principalSessions), sessions, limit);
  }

  /**
   * Whether `owner` (limit-owner.ts: a principal, or an anonymous caller's address) may start one more session.
   * @throws PunkError from the bus when the bucket or the session store cannot be read.
   */
  async admits(owner: string): Promise<ShareDecision> {
    const listed = await this.live(idsOf(await this.kv.get(keyOf(owner))));
    if (listed.length < this.limit) return { allowed: true };
    return {
      allowed: false,
      reason: `this caller already holds ${String(listed.length)} sessions, its limit (PUNK_MAX_SESSIONS_PER_PRINCIPAL=${String(this.limit)}); end one with DELETE, or reuse a session`,
    };
  }

  /**
   * Lists the stored session `id` under `owner`, dropping ended ones when the list is at the bound. Gives up quietly
   * when the entry keeps changing under it (the session then goes uncounted rather than refused).
   * @throws PunkError from the bus when the bucket or the session store cannot be read or written.
   */
  async record(owner: string, id: string): Promise<void> {
    const key = keyOf(owner);
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.kv.get(key);
      let ids = idsOf(entry);
      if (ids.length >= this.limit) ids = await this.live(ids);
      const value = { sessions: [...ids, id] };
      try {
        if (entry) await this.kv.update(key, value, entry.revision);
        else await this.kv.create(key, value);
        return;
      } catch (error) {
        if (!(error instanceof PunkError && error.code === 'KvConflict')) throw error;
      }
    }
  }

  /** The ids whose session is still stored, when there are as many as the bound (fewer cannot refuse anyone). */
  private async live(ids: string[]): Promise<string[]> {
    if (ids.length < this.limit) return ids;
    const found = await Promise.all(ids.map(async (id) => ((await this.sessions.get(id)) ? id : undefined)));
    return found.filter((id): id is string => id !== undefined);
  }
}

/** The bucket key of an owner: a hash, so no address or subject is spelled in key names. */
function keyOf(owner: string): string {
  return createHash('sha256').update(owner).digest('hex').slice(0, 32);
}

function idsOf(entry: KvEntry | undefined): string[] {
  const sessions = (entry?.value as { sessions?: unknown } | undefined)?.sessions;
  return Array.isArray(sessions) ? sessions.filter((id): id is string => typeof id === 'string') : [];
}
