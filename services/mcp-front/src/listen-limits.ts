/**
 * The bounds of 2026-07-28 `subscriptions/listen` streams on one front replica: at most `perPrincipal` open per
 * principal (an anonymous caller counts per client address) and `total` open in all, so one caller holding its
 * share cannot deny the channel to others. A slot is taken before the stream is served and given back the moment
 * the HTTP response closes (client gone, stream ended, front closing), never later.
 */
import { limitRefusals } from './metrics.js';

/** Bounds of the listen streams of one replica. */
export interface ListenLimits {
  /** Most open streams in all (`PUNK_MAX_LISTEN_STREAMS`). */
  total: number;
  /** Most open streams of one principal (`PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL`). */
  perPrincipal: number;
}

/** Seconds a refused client is told to wait before it tries again (`Retry-After`): a slot frees when any stream ends. */
export const LISTEN_RETRY_AFTER_SECONDS = 5;

/** The open listen streams of this replica, counted in all and per owner. */
export class ListenSlots {
  private readonly perOwner = new Map<string, number>();
  private open = 0;

  constructor(private readonly limits: ListenLimits) {}

  /** Open streams now. */
  get size(): number {
    return this.open;
  }

  /**
   * Takes a slot for `owner` (limit-owner.ts): a function that gives it back (idempotent), or the sentence
   * saying which bound refused it (counted in `punk_mcp_front_limit_refusals_total`).
   */
  take(owner: string): { release: () => void } | { refusal: string } {
    const { total, perPrincipal } = this.limits;
    const mine = this.perOwner.get(owner) ?? 0;
    if (mine >= perPrincipal) {
      limitRefusals.inc({ limit: 'listen_streams_per_principal' });
      return {
        refusal: `this caller already holds ${String(mine)} subscriptions/listen streams on this replica, its limit (PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL=${String(perPrincipal)}); close one, or retry in ${String(LISTEN_RETRY_AFTER_SECONDS)} s`,
      };
    }
    if (this.open >= total) {
      limitRefusals.inc({ limit: 'listen_streams' });
      return {
        refusal: `${String(this.open)} subscriptions/listen streams are open on this replica, its limit (PUNK_MAX_LISTEN_STREAMS=${String(total)}); retry in ${String(LISTEN_RETRY_AFTER_SECONDS)} s`,
      };
    }
    this.perOwner.set(owner, mine + 1);
    this.open++;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.open--;
        const left = (this.perOwner.get(owner) ?? 1) - 1;
        if (left === 0) this.perOwner.delete(owner);
        else this.perOwner.set(owner, left);
      },
    };
  }
}
