/**
 * The bound of calls in flight to one upstream on this gateway replica, with a queue in front of it: a call past
 * `maxConcurrent` waits, first come first served, while fewer than `maxQueued` wait and for at most `maxWaitMs`;
 * past either bound it is refused with `ServerBusy`, whose details say when to retry (`retryAfterSeconds`, the
 * value mcp-front turns into the JSON-RPC error's `data.retryAfterSeconds`). One principal holds at most
 * `maxPerPrincipal` of the slots and places in line together, so it cannot fill the queue for everyone else. A slot
 * passes to the next waiter the moment a call ends. Depth, waits and refusals are in the gateway's metrics (metrics.ts).
 */
import { PunkError, type Principal } from '@punk/lib';
import { queueRejections, queueWait } from './metrics.js';

/**
 * Whose share of a queue a call takes: its principal's; none for an anonymous caller (without authentication every
 * caller is the same anonymous principal, so a share would only be a lower bound for all).
 */
export function queueShareOf(principal: Principal | undefined): string | undefined {
  return principal === undefined || principal.subject === 'anonymous' ? undefined : `${principal.tenant}/${principal.subject}`;
}

/** Bounds of one queue. */
export interface CallQueueOptions {
  /** `<namespace>/<name>` of the server, for messages and metric labels. */
  server: string;
  /** Most calls in flight at once (`PUNK_UPSTREAM_MAX_CONCURRENT_CALLS`); unbounded (and no queue) when absent. */
  maxConcurrent?: number;
  /** Most calls waiting for a slot (`PUNK_UPSTREAM_MAX_QUEUED_CALLS`); 0 refuses at once at the bound. */
  maxQueued: number;
  /** Longest wait for a slot, in milliseconds (`PUNK_UPSTREAM_QUEUE_TIMEOUT_MS`). */
  maxWaitMs: number;
  /** Most calls of one principal holding a slot or waiting for one (`PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL`); unbounded when absent. */
  maxPerPrincipal?: number;
}

interface Waiter {
  admit: () => void;
}

/** Counts calls in flight to one upstream and queues those past its bound. */
export class CallQueue {
  private running = 0;
  private readonly waiting: Waiter[] = [];
  /** Calls of each principal holding a slot or waiting for one. */
  private readonly owned = new Map<string, number>();

  constructor(private readonly options: CallQueueOptions) {}

  /** Calls holding a slot now. */
  get inFlight(): number {
    return this.running;
  }

  /** Calls waiting for a slot now. */
  get depth(): number {
    return this.waiting.length;
  }

  /**
   * Takes a slot for a call of `principal` (none: counted against no principal), waiting in line when all are
   * taken: resolves with the function that gives the slot back (call it once, after the call ends), or undefined
   * without a slot when `signal` aborted first (the call left the line).
   * @throws PunkError `ServerBusy` (details `server`, `limit`, `queued`, `retryAfterSeconds`) when the principal
   *   holds its share, the queue is full or the wait outlasted `maxWaitMs`.
   */
  async acquire(signal?: AbortSignal, principal?: string): Promise<(() => void) | undefined> {
    const { maxConcurrent, maxPerPrincipal, server } = this.options;
    const mine = principal === undefined ? 0 : (this.owned.get(principal) ?? 0);
    if (principal !== undefined && maxPerPrincipal !== undefined && mine >= maxPerPrincipal) {
      queueRejections.inc({ server, reason: 'principal' });
      throw this.busy(
        `this principal already has ${String(mine)} calls in flight or waiting, its share (PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL=${String(maxPerPrincipal)})`,
      );
    }
    if (principal !== undefined) this.owned.set(principal, mine + 1);
    const disown = () => {
      if (principal === undefined) return;
      const left = (this.owned.get(principal) ?? 1) - 1;
      if (left === 0) this.owned.delete(principal);
      else this.owned.set(principal, left);
    };
    try {
      if (maxConcurrent === undefined || this.running < maxConcurrent) this.running++;
      else if (!(await this.wait(signal))) {
        disown();
        return undefined;
      }
    } catch (error) {
      disown();
      throw error;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      disown();
      this.release();
    };
  }

  /** Waits in line for a slot: true once given one, false when `signal` aborted first. @throws PunkError `ServerBusy` (see {@link acquire}). */
  private async wait(signal: AbortSignal | undefined): Promise<boolean> {
    const { maxConcurrent, maxQueued, maxWaitMs, server } = this.options;
    if (this.waiting.length >= maxQueued) {
      queueRejections.inc({ server, reason: 'full' });
      throw this.busy(
        `${String(this.running)} calls are in flight (PUNK_UPSTREAM_MAX_CONCURRENT_CALLS=${String(maxConcurrent)}) and ${String(this.waiting.length)} wait (PUNK_UPSTREAM_MAX_QUEUED_CALLS=${String(maxQueued)})`,
      );
    }
    if (signal?.aborted) return false;
    const startedAt = performance.now();
    const admitted = await new Promise<boolean>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
      };
      const waiter: Waiter = {
        admit: () => {
          done();
          resolve(true);
        },
      };
      const onAbort = () => {
        done();
        resolve(false);
      };
      const timer = setTimeout(() => {
        done();
        queueRejections.inc({ server, reason: 'timeout' });
        reject(
          this.busy(
            `the call waited ${String(maxWaitMs)} ms (PUNK_UPSTREAM_QUEUE_TIMEOUT_MS) behind ${String(this.running)} calls in flight (PUNK_UPSTREAM_MAX_CONCURRENT_CALLS=${String(maxConcurrent)})`,
          ),
        );
      }, maxWaitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
    if (admitted) queueWait.observe({ server }, (performance.now() - startedAt) / 1000);
    return admitted;
  }

  /** Gives a slot back: the first waiter takes it at once. */
  private release(): void {
    const next = this.waiting[0];
    if (next) next.admit();
    else this.running--;
  }

  private busy(why: string): PunkError {
    const { server, maxConcurrent, maxWaitMs } = this.options;
    const retryAfterSeconds = Math.max(1, Math.ceil(maxWaitMs / 1000));
    return new PunkError(
      'ServerBusy',
      `server ${server} is busy on this gateway replica: ${why}; retry in ${String(retryAfterSeconds)} s`,
      { server, limit: maxConcurrent, queued: this.waiting.length, retryAfterSeconds },
    );
  }
}
