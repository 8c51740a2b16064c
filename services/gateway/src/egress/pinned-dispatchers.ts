/**
 * HTTP connection pools that connect only to addresses the SSRF guard checked: the pool's socket lookup
 * answers with the checked addresses instead of asking DNS again, so there is no window between check and
 * connect for a DNS rebinding. The URL keeps its host name, so Host, TLS SNI and the certificate check
 * still use the name.
 */
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { Dispatcher, Pool } from 'undici';
import { loadUndici } from '../pool-fetch.js';
import type { CheckedDestination, ResolvedAddress } from './destination.js';

/** Pools kept at once; the least recently used one is closed (gracefully) past this. */
const MAX_POOLS = 16;

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** One undici pool per (origin, checked addresses), reused across requests for keep-alive. */
export class PinnedDispatchers {
  private readonly pools = new Map<string, Pool>();

  /** The dispatcher that sends requests for `destination` to its checked addresses only. */
  async for(destination: CheckedDestination): Promise<Dispatcher> {
    const key = `${destination.url.origin} ${destination.addresses.map((entry) => entry.address).join(',')}`;
    const { Pool } = await loadUndici();
    let pool = this.pools.get(key);
    if (pool) {
      this.pools.delete(key);
    } else {
      pool = new Pool(destination.url.origin, { connect: { lookup: pinnedLookup(destination.addresses) } });
      if (this.pools.size >= MAX_POOLS) {
        const [oldestKey, oldest] = this.pools.entries().next().value!;
        this.pools.delete(oldestKey);
        void oldest.close().catch(() => {});
      }
    }
    this.pools.set(key, pool);
    return pool;
  }

  /** Closes every pool, ending their connections (streams in flight are aborted). */
  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.destroy()));
  }
}

/** A `net.connect` lookup that answers `addresses` (checked) whatever it is asked. */
function pinnedLookup(addresses: ResolvedAddress[]) {
  return (_hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
    const usable = family === 4 || family === 6 ? addresses.filter((entry) => entry.family === family) : addresses;
    if (usable.length === 0) {
      callback(Object.assign(new Error(`no checked IPv${family} address`), { code: 'ENOTFOUND' }), '');
    } else if (options.all) {
      callback(
        null,
        usable.map((entry) => ({ address: entry.address, family: entry.family })),
      );
    } else {
      callback(null, usable[0]!.address, usable[0]!.family);
    }
  };
}
