/**
 * 2025-era sessions any front replica can serve (MCP 2025-11-25
 * basic/transports "Session Management"): the state of each `Mcp-Session-Id`
 * lives in the bus's key-value bucket `PUNK_SESSIONS` (NATS KV, or a map in
 * embedded mode); a replica's memory holds only a copy. Entries expire `ttlMs`
 * after their last write; activity renews them.
 *
 * The copy: each replica watches the bucket (`KvStore.watch`) and keeps every
 * live session in a map, so a request reads its session without a bus round
 * trip. A session another replica created an instant ago, and not seen by the
 * watch yet, is read from the bucket; this replica's own writes go into the
 * map at once; another replica's deletes and updates arrive with the watch
 * (within a bus hop), and writes are compare-and-set against the bucket, so a
 * stale copy never overwrites a newer state.
 */
import {
  buckets,
  errorMessage,
  PunkError,
  sessionStateSchema,
  type Bus,
  type BusSubscription,
  type KvChange,
  type KvStore,
  type Logger,
  type Principal,
  type SessionState,
} from '@punk/lib';

/** Session ids Punk mints (lowercase UUIDs); anything else is unknown without a lookup (ids end up in bus subjects). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether a string has the shape of a session (or stream) id Punk mints. */
export function isMintedId(id: string): boolean {
  return SESSION_ID.test(id);
}

/** A stored session and the revision it was read at. */
export interface StoredSession {
  id: string;
  state: SessionState;
  revision: number;
}

/** What a request must match to use a session: anything else answers 404 as if the session did not exist. */
export interface SessionBinding {
  tenant: string;
  /** `scopeKey` of the endpoint the request came to. */
  scope: string;
  principal: Principal;
}

/** Longest wait of a DELETE for its own watch to report it, in milliseconds. */
const DELETE_SEEN_WAIT_MS = 1000;

/** Where 2025-era sessions live: one KV entry per session id, and a watched copy of the bucket in this replica. */
export class SessionStore {
  /** Every live session as the watch (or this replica's own writes) last showed it. */
  private readonly cached = new Map<string, StoredSession>();
  /** Sessions this replica deleted whose delete the watch has not delivered yet: an older put must not bring them back. */
  private readonly ending = new Set<string>();
  /** Deletes of this replica waiting for its watch to report them (see `delete`). */
  private readonly deleteSeen = new Map<string, () => void>();
  private watching: BusSubscription | undefined;

  private constructor(
    private readonly kv: KvStore,
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Opens (creating if needed) the sessions bucket and starts watching it; resolves once every live session is in
   * the replica's copy.
   * @param ttlMs idle time after which a session expires, in milliseconds.
   * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
   */
  static async open(bus: Bus, ttlMs: number, log: Logger): Promise<SessionStore> {
    const store = new SessionStore(await bus.keyValue(buckets.sessions(ttlMs)), ttlMs, log);
    store.watching = await store.kv.watch((change) => store.apply(change));
    return store;
  }

  /** Stops watching the bucket (the front's close). */
  async close(): Promise<void> {
    await this.watching?.unsubscribe();
    this.cached.clear();
  }

  private apply(change: KvChange): void {
    if (change.operation === 'delete') {
      this.ending.delete(change.key);
      this.cached.delete(change.key);
      this.deleteSeen.get(change.key)?.();
      return;
    }
    if (this.ending.has(change.key)) return;
    const held = this.cached.get(change.key);
    if (held && held.revision >= change.revision) return;
    const session = this.parse(change.key, change.value, change.revision);
    if (session) this.cached.set(change.key, session);
    else this.cached.delete(change.key);
  }

  private parse(id: string, value: unknown, revision: number): StoredSession | undefined {
    const parsed = sessionStateSchema.safeParse(value);
    if (!parsed.success) {
      this.log.error({ sessionId: id, err: parsed.error.issues[0]?.message }, 'malformed session state; treating the session as unknown');
      return undefined;
    }
    return { id, state: parsed.data, revision };
  }

  /** Puts this replica's own write into its copy (unless the watch brought a newer one already). */
  private hold(id: string, state: SessionState, revision: number): void {
    const held = this.cached.get(id);
    if (!this.ending.has(id) && !(held && held.revision >= revision)) this.cached.set(id, { id, state, revision });
  }

  /**
   * Stores a new session.
   * @throws PunkError `KvConflict` when the id is taken, or a bus error.
   */
  async create(id: string, state: SessionState): Promise<void> {
    const value = sessionStateSchema.parse(state);
    this.hold(id, value, await this.kv.create(id, value));
  }

  /**
   * The live session with this id, or undefined (unknown, expired, deleted, malformed id or value): from the
   * replica's copy, else (a session created elsewhere an instant ago, or one whose copy looks expired) from the bucket.
   */
  async get(id: string): Promise<StoredSession | undefined> {
    if (!isMintedId(id)) return undefined;
    const held = this.cached.get(id);
    if (held && Date.parse(held.state.renewedAt) + this.ttlMs > Date.now()) return held;
    return this.read(id);
  }

  /** The session as the bucket holds it now (copied into the replica's map). */
  private async read(id: string): Promise<StoredSession | undefined> {
    const entry = await this.kv.get(id);
    if (!entry) {
      this.cached.delete(id);
      return undefined;
    }
    const session = this.parse(id, entry.value, entry.revision);
    if (session) this.hold(id, session.state, session.revision);
    return session;
  }

  /**
   * The session with this id if the request matches its binding (same tenant,
   * endpoint and principal subject); undefined otherwise, so another
   * principal cannot tell a foreign session from a missing one.
   */
  async lookup(id: string, binding: SessionBinding): Promise<StoredSession | undefined> {
    const session = await this.get(id);
    if (!session) return undefined;
    const { state } = session;
    const same =
      state.tenant === binding.tenant &&
      state.scope === binding.scope &&
      state.principal.subject === binding.principal.subject &&
      state.principal.tenant === binding.principal.tenant;
    return same ? session : undefined;
  }

  /**
   * Applies `change` with compare-and-set, retrying on concurrent writes; the
   * write renews the time to live. Resolves with the new state, or undefined
   * when the session is gone.
   * @throws PunkError `KvConflict` after 5 lost races, or a bus error.
   */
  async update(id: string, change: (state: SessionState) => SessionState): Promise<SessionState | undefined> {
    for (let attempt = 0; attempt < 5; attempt++) {
      // Read-modify-write starts from the bucket, not from a copy that may be behind.
      const session = await this.read(id);
      if (!session) return undefined;
      const next = { ...change(session.state), renewedAt: new Date().toISOString() };
      try {
        this.hold(id, next, await this.kv.update(id, next, session.revision));
        return next;
      } catch (error) {
        if (!(error instanceof PunkError && error.code === 'KvConflict')) throw error;
      }
    }
    throw new PunkError('KvConflict', `session ${id} kept changing during an update; try again`);
  }

  /**
   * Renews a session's time to live when its last write is older than a
   * quarter of the TTL (so a busy session costs one write per TTL/4, not one
   * per request). Never throws: a failure is logged, a lost race means
   * another write renewed it.
   */
  renew(session: StoredSession): void {
    if (Date.now() - Date.parse(session.state.renewedAt) < this.ttlMs / 4) return;
    const next = { ...session.state, renewedAt: new Date().toISOString() };
    this.kv.update(session.id, next, session.revision).then(
      (revision) => this.hold(session.id, next, revision),
      (error: unknown) => {
        if (!(error instanceof PunkError && error.code === 'KvConflict'))
          this.log.warn({ sessionId: session.id, err: errorMessage(error) }, 'could not renew a session');
      },
    );
  }

  /** Ends a session everywhere; a no-op when it is already gone. */
  async delete(id: string): Promise<void> {
    this.ending.add(id);
    this.cached.delete(id);
    // Resolves once this replica's watch reports the delete: the bucket pushes it to every replica's watch at once,
    // so a request the client sends after the DELETE's answer finds the session gone on any replica.
    const seen = new Promise<void>((resolve) => this.deleteSeen.set(id, resolve));
    try {
      await this.kv.delete(id);
      await Promise.race([seen, new Promise((resolve) => setTimeout(resolve, DELETE_SEEN_WAIT_MS).unref())]);
    } catch (error) {
      this.ending.delete(id);
      throw error;
    } finally {
      this.deleteSeen.delete(id);
    }
  }

  /**
   * How many sessions were written within one TTL, in one read of the bucket: live sessions plus, on NATS,
   * ended ones whose delete marker has not aged out yet (so an upper bound of the live count).
   * @throws PunkError from the bus.
   */
  async count(): Promise<number> {
    return this.kv.size();
  }

  /** Every live session as this replica's copy holds it (for fan-out of registry changes); malformed entries are skipped. */
  list(): Promise<StoredSession[]> {
    const now = Date.now();
    return Promise.resolve([...this.cached.values()].filter((s) => Date.parse(s.state.renewedAt) + this.ttlMs > now));
  }
}
