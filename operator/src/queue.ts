/**
 * The work queue of the operator, in the shape of client-go's rate-limited work queue: keys, not objects (a
 * reconcile reads the current object itself), so ten events about one object make one reconcile.
 *
 * - A key waiting in the queue is not queued twice; a key added while it is being reconciled runs once more
 *   after that reconcile ends, never twice at the same time.
 * - A failed reconcile is retried after a per-key exponential delay (`baseDelayMs` doubled per consecutive
 *   failure, at most `maxDelayMs`), forgotten on the first success.
 * - At most `workers` reconciles run at once; each gets `timeoutMs`, after which its signal is aborted, its
 *   worker moves on and the key counts as failed (a reconcile is idempotent, so the abandoned call finishing
 *   late changes nothing a retry would not).
 */

/** What a reconcile asks of the queue when it succeeds: run again after this many milliseconds (a poll). */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

/** Reconciles one key; throwing (or passing the deadline) schedules a rate-limited retry. */
export type ReconcileHandler = (key: string, signal: AbortSignal) => Promise<ReconcileResult | undefined>;

/** Options of a {@link WorkQueue}; delays and deadlines in milliseconds. */
export interface WorkQueueOptions {
  /** Most reconciles at once (at least 1). */
  workers: number;
  /** Deadline of one reconcile. */
  timeoutMs: number;
  /** Delay before the first retry of a failed key (default 5 ms, client-go's). */
  baseDelayMs?: number;
  /** Longest delay between retries of one key (default 5 minutes). */
  maxDelayMs?: number;
  /** Told about each failure (logging); never throws into the queue. */
  onError?: (key: string, error: unknown, retryInMs: number) => void;
}

/** Thrown into the handler's signal when a reconcile passes its deadline. */
export class ReconcileTimeout extends Error {
  constructor(key: string, ms: number) {
    super(`reconcile of ${key} did not finish within ${ms} ms`);
    this.name = 'ReconcileTimeout';
  }
}

/** A deduplicating, rate-limited work queue with a bounded number of workers. */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  /** Keys added while being processed: they run again when their reconcile ends. */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(
    private readonly handler: ReconcileHandler,
    private readonly options: WorkQueueOptions,
  ) {
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 5 * 60_000;
  }

  /** Keys waiting or running. */
  get length(): number {
    return this.queued.size + this.processing.size;
  }

  /** Keys waiting to be reconciled (not those being reconciled now): client-go's queue depth. */
  get depth(): number {
    return this.queued.size;
  }

  /** Queues `key` now (once, however often it is added). */
  add(key: string): void {
    const timer = this.timers.get(key);
    if (timer) {
      clearTimeout(timer);
      this.timers.delete(key);
    }
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  /** Queues `key` after `ms` milliseconds, unless it is queued earlier by another call. */
  addAfter(key: string, ms: number): void {
    if (this.queued.has(key)) return;
    const existing = this.timers.get(key);
    if (existing) clearTimeout(existing);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref();
    this.timers.set(key, timer);
  }

  /** Starts handing keys to workers (keys added before wait until then). */
  start(): void {
    this.running = true;
    this.pump();
  }

  /**
   * Stops handing out keys and waits for the reconciles in flight (each within its deadline). Queued keys and
   * failure counts are kept, so a later `start` resumes; scheduled retries still fire into the queue.
   */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all([...this.inFlight]);
  }

  /** Drops every queued key and scheduled retry (shutdown). */
  clear(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.queue.length = 0;
    this.queued.clear();
    this.dirty.clear();
  }

  private pump(): void {
    while (this.running && this.inFlight.size < this.options.workers && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      const run: Promise<void> = this.process(key).finally(() => {
        this.inFlight.delete(run);
        this.processing.delete(key);
        if (this.dirty.delete(key)) this.add(key);
        this.pump();
      });
      this.inFlight.add(run);
    }
  }

  private async process(key: string): Promise<void> {
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new ReconcileTimeout(key, this.options.timeoutMs);
        controller.abort(error);
        reject(error);
      }, this.options.timeoutMs);
    });
    try {
      const result = await Promise.race([this.handler(key, controller.signal), deadline]);
      this.failures.delete(key);
      if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch (error) {
      const count = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, count);
      const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (count - 1));
      try {
        this.options.onError?.(key, error, delay);
      } catch {
        // a logging failure must not stop the retry
      }
      this.addAfter(key, delay);
    } finally {
      clearTimeout(timer);
    }
  }
}
