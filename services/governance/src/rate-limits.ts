/**
 * Rate limits of McpPolicy objects: per principal, fixed windows aligned on the epoch (a `1m` window starts at
 * every whole minute), counted in bucket `PUNK_RATE_LIMITS` that every governance replica shares. A use is counted
 * with create or compare-and-set, so two replicas counting at once never lose a use; a use over the limit is not
 * counted.
 */
import {
  buckets,
  kvKey,
  matches,
  PunkError,
  rateLimitCounterSchema,
  type Bus,
  type KvStore,
  type PolicyInput,
  type RateLimitCounter,
  type RateLimitRule,
} from '@punk/lib';

/** How often a count is retried when another replica wrote the same counter in between. */
const MAX_ATTEMPTS = 20;

/** Counts uses against rate limits. */
export class RateLimiter {
  private constructor(private readonly kv: KvStore) {}

  /** Opens (creating if needed) bucket `PUNK_RATE_LIMITS`. @throws PunkError `BusUnavailable`. */
  static async open(bus: Bus): Promise<RateLimiter> {
    return new RateLimiter(await bus.keyValue(buckets.rateLimitCounters));
  }

  /**
   * Counts a use against every limit of `limits` that matches it, in order, and stops at the first whose window is
   * spent.
   * @returns that limit (the use is to be denied), or `undefined` when the use is within every matching limit.
   * @throws PunkError `RateLimitBusy`; bus errors.
   */
  async exceeded(tenant: string, input: PolicyInput, limits: readonly RateLimitRule[]): Promise<RateLimitRule | undefined> {
    for (const limit of limits) {
      if (matches(limit.match, input) && !(await this.consume(tenant, input.subject, limit))) return limit;
    }
    return undefined;
  }

  /**
   * Counts one use of `subject` (a principal of `tenant`) against `limit` in the current window.
   * @returns `true` when the use is within the limit (and was counted), `false` when the window's `requests` are spent.
   * @throws PunkError `RateLimitBusy` when the counter kept changing under {@link MAX_ATTEMPTS} attempts; bus errors.
   */
  async consume(tenant: string, subject: string, limit: RateLimitRule, now = Date.now()): Promise<boolean> {
    const key = kvKey(tenant, limit.policy, limit.limit, subject);
    const windowStart = Math.floor(now / limit.windowMs) * limit.windowMs;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const entry = await this.kv.get(key);
      const stored = entry && rateLimitCounterSchema.safeParse(entry.value);
      const count = stored?.success && stored.data.windowStart === windowStart ? stored.data.count : 0;
      if (count >= limit.requests) return false;
      const next: RateLimitCounter = { windowStart, count: count + 1 };
      try {
        if (entry) await this.kv.update(key, next, entry.revision);
        else await this.kv.create(key, next);
        return true;
      } catch (error) {
        if (!(error instanceof PunkError) || error.code !== 'KvConflict') throw error;
        // Another replica counted first: back off a random moment so racing counters do not collide again.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));
      }
    }
    throw new PunkError('RateLimitBusy', `rate limit ${limit.name}: the counter of ${subject} kept changing; try again`, {
      rule: limit.name,
    });
  }
}
