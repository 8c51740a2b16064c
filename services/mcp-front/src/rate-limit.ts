/**
 * The `initialize` rate limit of the 2025-era endpoint: at most `limit`
 * new sessions per client address per minute, counted in fixed one-minute
 * windows in the bus's key-value bucket `PUNK_INITIALIZE_COUNTERS`, so the
 * limit holds across every front replica (NATS KV; in embedded mode, one
 * process, a map). A counter costs one read and one compare-and-set write.
 */
import { createHash } from 'node:crypto';
import { buckets, PunkError, type Bus, type KvStore } from '@punk/lib';

/** Length of a counting window, in milliseconds. */
const WINDOW_MS = 60_000;

/** Outcome of one attempt: allowed, or refused with the seconds until the window ends (`Retry-After`, RFC 9110 §10.2.3). */
export type RateDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** Counts `initialize` requests per client address. */
export class InitializeRateLimiter {
  private constructor(
    private readonly kv: KvStore,
    /** Most `initialize` requests per client address per minute. */
    readonly limit: number,
  ) {}

  /**
   * Opens (creating if needed) the counters bucket.
   * @param limit most `initialize` requests per client address per minute (a positive integer).
   * @throws RangeError for a limit that is not a positive integer; PunkError `BusUnavailable` when the bucket cannot be opened.
   */
  static async open(bus: Bus, limit: number): Promise<InitializeRateLimiter> {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`the initialize rate limit must be a positive integer, got ${limit}`);
    return new InitializeRateLimiter(await bus.keyValue(buckets.initializeCounters), limit);
  }

  /**
   * Counts one attempt by `address` and says whether it is within the limit.
   * Refused attempts are not counted. Fails open (allowed) when the bucket
   * keeps changing under it, so a hot address cannot lock others out.
   * @throws PunkError from the bus when the bucket cannot be read or written.
   */
  async attempt(address: string, now = Date.now()): Promise<RateDecision> {
    const window = Math.floor(now / WINDOW_MS);
    const key = `${createHash('sha256').update(address).digest('hex').slice(0, 32)}.${window}`;
    for (let attempt = 0; attempt < 5; attempt++) {
      const entry = await this.kv.get(key);
      const count = (entry?.value as { count?: number } | undefined)?.count ?? 0;
      if (count >= this.limit)
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000)) };
      try {
        if (entry) await this.kv.update(key, { count: count + 1 }, entry.revision);
        else await this.kv.create(key, { count: 1 });
        return { allowed: true };
      } catch (error) {
        if (!(error instanceof PunkError && error.code === 'KvConflict')) throw error;
      }
    }
    return { allowed: true };
  }
}
