/**
 * The `per-client` upstream sessions this gateway replica holds: one
 * {@link Upstream} (its own child process for stdio, its own MCP session for
 * HTTP) per (tenant, server, client session). They close when idle past their
 * time to live, when the client session ends (`punk.session.<id>.control`
 * `ended`, published by the front on DELETE), when ownership moved to another
 * replica, and when the gateway stops. The client's `roots-changed` on the same
 * control subject reaches the session's upstreams. Which replica owns a session
 * is decided in `routing.ts`; this module only keeps the local connections.
 */
import {
  errorMessage,
  parseMessage,
  sessionControlSchema,
  subjects,
  upstreamSessionKey,
  type Bus,
  type BusSubscription,
  type Logger,
  type McpServer,
} from '@punk/lib';
import type { Upstream } from './upstream.js';

/** Why a local upstream session was closed. */
export type CloseReason = 'idle' | 'ended' | 'moved' | 'stopped';

/** Options of {@link ClientSessions}. */
export interface ClientSessionsOptions {
  bus: Bus;
  log: Logger;
  /**
   * Builds (without starting) the upstream of one client session's own connection to `server`;
   * `clientCapabilities` are those the client declared (its `roots` makes the connection declare `roots`).
   */
  createUpstream(server: McpServer, key: string, sessionId: string, clientCapabilities: Record<string, unknown>): Upstream;
  /** A session unused this long is closed, in milliseconds. */
  idleMs: number;
  /** Called after a session closed (routing forgets its ownership entry unless the reason is `moved`). */
  onClosed?(key: string, reason: CloseReason): void | Promise<void>;
}

/** One client session's upstream on this replica. */
export interface LocalSession {
  /** {@link upstreamSessionKey} of the session. */
  readonly key: string;
  readonly sessionId: string;
  readonly upstream: Upstream;
  /** Time of the last write of the ownership entry (epoch ms). */
  renewedAt: number;
}

interface Held extends LocalSession {
  inFlight: number;
  idleTimer: NodeJS.Timeout | undefined;
}

/** The `per-client` upstream sessions held by this gateway replica. */
export class ClientSessions {
  private readonly held = new Map<string, Held>();
  private readonly opening = new Map<string, Promise<Held>>();
  private readonly endWatches = new Map<string, Promise<BusSubscription | undefined>>();
  private stopped = false;

  constructor(private readonly options: ClientSessionsOptions) {}

  /** How many sessions this replica holds. */
  get size(): number {
    return this.held.size;
  }

  /** The held session under `key`, if any. */
  get(key: string): LocalSession | undefined {
    return this.held.get(key);
  }

  /** The upstream of a held session of a tenant's server, if this replica holds one. */
  find(tenant: string, server: string, sessionId: string): Upstream | undefined {
    return this.held.get(upstreamSessionKey(tenant, server, sessionId))?.upstream;
  }

  /**
   * Returns the held session under `key`, opening it first when absent: starts a new upstream for
   * `server` and waits for its first start (ready or failed; a failed one answers calls as unavailable).
   * `clientCapabilities`: what the client declared (from the call's channel), used when opening.
   */
  async open(key: string, server: McpServer, sessionId: string, clientCapabilities: Record<string, unknown> = {}): Promise<LocalSession> {
    const existing = this.held.get(key);
    if (existing) return existing;
    let opening = this.opening.get(key);
    if (!opening) {
      opening = (async () => {
        const upstream = this.options.createUpstream(server, key, sessionId, clientCapabilities);
        upstream.start();
        await upstream.firstStart;
        const session: Held = { key, sessionId, upstream, renewedAt: Date.now(), inFlight: 0, idleTimer: undefined };
        this.held.set(key, session);
        this.watchEnd(sessionId);
        this.armIdle(session);
        this.options.log.info({ session: key, state: upstream.state }, 'upstream session opened');
        return session;
      })().finally(() => this.opening.delete(key));
      this.opening.set(key, opening);
    }
    return opening;
  }

  /** Runs `use` with the session marked in use, so it is not closed as idle meanwhile. */
  async using<T>(session: LocalSession, use: () => Promise<T>): Promise<T> {
    const held = session as Held;
    held.inFlight++;
    clearTimeout(held.idleTimer);
    try {
      return await use();
    } finally {
      held.inFlight--;
      this.armIdle(held);
    }
  }

  /** Closes the session under `key` (a no-op when not held); its upstream process stops. */
  async close(key: string, reason: CloseReason): Promise<void> {
    const held = this.held.get(key);
    if (!held) return;
    this.held.delete(key);
    clearTimeout(held.idleTimer);
    this.options.log.info({ session: key, reason }, 'upstream session closed');
    await held.upstream.stop();
    if (![...this.held.values()].some((s) => s.sessionId === held.sessionId)) this.unwatchEnd(held.sessionId);
    await this.options.onClosed?.(key, reason);
  }

  /** Closes every session of one client session (it ended). */
  async endClientSession(sessionId: string): Promise<void> {
    await Promise.all([...this.held.values()].filter((s) => s.sessionId === sessionId).map((s) => this.close(s.key, 'ended')));
  }

  /** Tells the upstreams of one client session that its roots changed. */
  async rootsChanged(sessionId: string): Promise<void> {
    await Promise.all([...this.held.values()].filter((s) => s.sessionId === sessionId).map((s) => s.upstream.notifyRootsChanged()));
  }

  /** The upstreams of every held session of one server (`<namespace>/<name>`). */
  ofServer(serverKey: string): Upstream[] {
    return [...this.held.values()].filter((s) => s.upstream.key === serverKey).map((s) => s.upstream);
  }

  /** Closes every held session of one server (`<namespace>/<name>`: its manifest changed or it was removed). */
  async closeServer(serverKey: string): Promise<void> {
    await Promise.all([...this.held.values()].filter((s) => s.upstream.key === serverKey).map((s) => this.close(s.key, 'stopped')));
  }

  /** Closes every held session; later `open` calls still work (used at gateway stop). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.opening.values()]);
    await Promise.all([...this.held.keys()].map((key) => this.close(key, 'stopped')));
  }

  private armIdle(session: Held): void {
    clearTimeout(session.idleTimer);
    if (session.inFlight > 0 || this.held.get(session.key) !== session) return;
    session.idleTimer = setTimeout(() => void this.close(session.key, 'idle'), this.options.idleMs);
    session.idleTimer.unref();
  }

  /** Subscribes to the client session's control subject, once per client session, to close its upstreams on `ended`. */
  private watchEnd(sessionId: string): void {
    if (this.endWatches.has(sessionId) || this.stopped) return;
    const subject = subjects.sessionControl(sessionId);
    const watch = this.options.bus
      .subscribe(subject, (data) => {
        const control = parseMessage(sessionControlSchema, subject, data);
        if (control.type === 'ended') return this.endClientSession(sessionId);
        if (control.type === 'roots-changed') return this.rootsChanged(sessionId);
      })
      .catch((error: unknown) => {
        this.options.log.warn(
          { sessionId, err: errorMessage(error) },
          'could not watch a client session for its end; its upstream sessions close when idle',
        );
        return undefined;
      });
    this.endWatches.set(sessionId, watch);
  }

  private unwatchEnd(sessionId: string): void {
    const watch = this.endWatches.get(sessionId);
    this.endWatches.delete(sessionId);
    void watch?.then((subscription) => subscription?.unsubscribe()).catch(() => undefined);
  }
}
