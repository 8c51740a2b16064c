/**
 * The use of each server with `spec.idle` as this gateway replica sees it, written to bucket `PUNK_SERVER_ACTIVITY`
 * (key `kvKey(namespace, name, instanceId)`) for the operator, which scales a server idle for its
 * `spec.idle.scaleToZeroAfter` to zero. A call only counts itself in memory (no I/O on the call path); the entry is
 * written at most once per {@link ACTIVITY_WRITE_MS} per server, at once when a call comes after a quiet period (so
 * the operator never misses a call that just began), and again every period while calls are in flight or streams
 * are open (so its freshness says this replica still holds them). A failed write is logged; the next one repeats it.
 */
import { ACTIVITY_WRITE_MS, errorMessage, kvKey, type KvStore, type Logger, type McpServer, type ServerActivity } from '@punk/lib';

interface Use {
  namespace: string;
  name: string;
  inFlight: number;
  lastUsedAt: number;
  /** When the entry was last written (0: never). */
  writtenAt: number;
  /** Whether something changed since the last write. */
  dirty: boolean;
}

/** What {@link ServerActivityReporter} needs. */
export interface ServerActivityOptions {
  /** Bucket `PUNK_SERVER_ACTIVITY`. */
  bucket: KvStore;
  log: Logger;
  /** This replica's `instanceId` (the last part of its keys). */
  instanceId: string;
  /** Streams this replica holds open on server `<namespace>/<name>` now (per-client sessions, resource subscriptions). */
  streamsOf(key: string): number;
  /** Write period, in milliseconds (default {@link ACTIVITY_WRITE_MS}). */
  intervalMs?: number;
}

/** Reports this replica's use of servers with `spec.idle` (see the module comment). */
export class ServerActivityReporter {
  private readonly uses = new Map<string, Use>();
  private readonly timer: NodeJS.Timeout;
  private readonly intervalMs: number;

  constructor(private readonly options: ServerActivityOptions) {
    this.intervalMs = options.intervalMs ?? ACTIVITY_WRITE_MS;
    this.timer = setInterval(() => this.flush(), this.intervalMs);
    this.timer.unref();
  }

  /**
   * Counts one call to `server` as begun; the returned function counts it as ended. A server without `spec.idle`
   * is not tracked (nothing reads its use).
   */
  begin(server: McpServer): () => void {
    if (!server.spec.idle) return () => undefined;
    const { namespace = 'default', name } = server.metadata;
    const key = `${namespace}/${name}`;
    let use = this.uses.get(key);
    if (!use) {
      use = { namespace, name, inFlight: 0, lastUsedAt: 0, writtenAt: 0, dirty: false };
      this.uses.set(key, use);
    }
    const now = Date.now();
    use.inFlight++;
    use.lastUsedAt = now;
    use.dirty = true;
    if (now - use.writtenAt >= this.intervalMs) this.write(key, use);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      use.inFlight--;
      use.lastUsedAt = Date.now();
      use.dirty = true;
    };
  }

  /** Writes each server's entry that changed, or whose calls or streams it holds up (its freshness says so). */
  private flush(): void {
    for (const [key, use] of this.uses) {
      const streams = this.options.streamsOf(key);
      if (use.dirty || use.inFlight > 0 || streams > 0) this.write(key, use, streams);
      else if (Date.now() - use.writtenAt > 10 * this.intervalMs) this.uses.delete(key);
    }
  }

  private write(key: string, use: Use, streams = this.options.streamsOf(key)): void {
    const now = Date.now();
    use.writtenAt = now;
    use.dirty = false;
    const entry: ServerActivity = {
      lastUsedAt: new Date(use.lastUsedAt).toISOString(),
      inFlight: use.inFlight,
      streams,
      writtenAt: new Date(now).toISOString(),
    };
    this.options.bucket.put(kvKey(use.namespace, use.name, this.options.instanceId), entry).catch((error: unknown) => {
      use.dirty = true;
      this.options.log.warn({ server: key, err: errorMessage(error) }, 'could not report the use of a server for spec.idle');
    });
  }

  /** Stops writing (the gateway's stop); what is in flight then is no longer reported, and its entry goes stale. */
  stop(): void {
    clearInterval(this.timer);
  }
}
