/**
 * 2025-era sessions any front replica can serve (MCP 2025-11-25
 * basic/transports "Session Management"): the state of each `Mcp-Session-Id`
 * lives in the bus's key-value bucket `PUNK_SESSIONS` (NATS KV, or a map in
 * embedded mode), never in a replica's memory. Entries expire `ttlMs` after
 * their last write; activity renews them.
 */
import {
  buckets,
  errorMessage,
  PunkError,
  sessionStateSchema,
  type Bus,
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

/** Where 2025-era sessions live: one KV entry per session id. */
export class SessionStore {
  private constructor(
    private readonly kv: KvStore,
    private readonly ttlMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Opens (creating if needed) the sessions bucket.
   * @param ttlMs idle time after which a session expires, in milliseconds.
   * @throws PunkError `BusUnavailable` when the bucket cannot be opened.
   */
  static async open(bus: Bus, ttlMs: number, log: Logger): Promise<SessionStore> {
    return new SessionStore(await bus.keyValue(buckets.sessions(ttlMs)), ttlMs, log);
  }

  /**
   * Stores a new session.
   * @throws PunkError `KvConflict` when the id is taken, or a bus error.
   */
  async create(id: string, state: SessionState): Promise<void> {
    await this.kv.create(id, sessionStateSchema.parse(state));
  }

  /** The live session with this id, or undefined (unknown, expired, deleted, malformed id or value). */
  async get(id: string): Promise<StoredSession | undefined> {
    if (!isMintedId(id)) return undefined;
    const entry = await this.kv.get(id);
    if (!entry) return undefined;
    const parsed = sessionStateSchema.safeParse(entry.value);
    if (!parsed.success) {
      this.log.error({ sessionId: id, err: parsed.error.issues[0]?.message }, 'malformed session state; treating the session as unknown');
      return undefined;
    }
    return { id, state: parsed.data, revision: entry.revision };
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
      const session = await this.get(id);
      if (!session) return undefined;
      const next = { ...change(session.state), renewedAt: new Date().toISOString() };
      try {
        await this.kv.update(id, next, session.revision);
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
    this.kv.update(session.id, next, session.revision).catch((error: unknown) => {
      if (!(error instanceof PunkError && error.code === 'KvConflict'))
        this.log.warn({ sessionId: session.id, err: errorMessage(error) }, 'could not renew a session');
    });
  }

  /** Ends a session everywhere; a no-op when it is already gone. */
  async delete(id: string): Promise<void> {
    await this.kv.delete(id);
  }

  /**
   * How many sessions were written within one TTL, in one read of the bucket: live sessions plus, on NATS,
   * ended ones whose delete marker has not aged out yet (so an upper bound of the live count).
   * @throws PunkError from the bus.
   */
  async count(): Promise<number> {
    return this.kv.size();
  }

  /** Every live session (for fan-out of registry changes); malformed entries are skipped. */
  async list(): Promise<StoredSession[]> {
    const found = await Promise.all((await this.kv.keys()).map((key) => this.get(key)));
    return found.filter((s): s is StoredSession => s !== undefined);
  }
}
