/**
 * Routing of requests for `sessionMode: per-client` servers to the one
 * gateway replica that owns the client session's upstream session.
 *
 * Ownership lives in bucket `PUNK_UPSTREAM_SESSIONS`: key
 * `upstreamSessionKey(tenant, server, sessionId)`, value the owner's
 * `instanceId`. A replica claims a free key with KV create and takes over a
 * dead owner's key with a compare-and-set update on the revision it read, so
 * two replicas never both own one session.
 *
 * Where the choice of owner is made: the gateway, not the front. Any replica
 * that takes a `punk.gateway.call` request from the queue group looks the
 * owner up and, when it is another replica, forwards the request once on
 * `punk.gateway.instance.<owner>.call` (one extra hop, paid only for
 * `per-client` servers and only when the queue group picked another replica).
 * Fronts and the CLI keep one subject and stay unaware of upstream placement,
 * and the replica that notices a dead owner (`BusNoResponders` on its subject)
 * is the one that re-establishes the session, with the request in hand.
 */
import {
  appendLedgerEvent,
  errorMessage,
  gatewayRequestSchema,
  PunkError,
  subjects,
  upstreamSessionKey,
  upstreamSessionOwnerSchema,
  type Bus,
  type GatewayRequest,
  type KvEntry,
  type KvStore,
  type Logger,
  type McpServer,
  type RequestHandler,
  type UpstreamSessionOwner,
} from '@punk/lib';
import type { ClientSessions, LocalSession } from './client-sessions.js';
import { callEvent } from './events.js';

/** How many times a request re-reads ownership after losing a race (a concurrent claim or a move). */
const MAX_ROUTE_ATTEMPTS = 4;

/** Dependencies of {@link createSessionRouting}. */
export interface SessionRoutingDeps {
  bus: Bus;
  log: Logger;
  /** This replica's `instanceId`; it serves `subjects.gatewayInstanceCall(instanceId)`. */
  instanceId: string;
  /** Bucket `PUNK_UPSTREAM_SESSIONS`. */
  owners: KvStore;
  /** Time to live of an ownership entry, in milliseconds; the owner renews it at most once per quarter of it. */
  ttlMs: number;
  sessions: ClientSessions;
  /** The manifest of a tenant's server, or undefined when it is not registered. */
  serverOf(tenant: string, server: string): McpServer | undefined;
  /** Deadline of a request forwarded to the owner of a session of `server`, in milliseconds. */
  forwardTimeoutMs(server: McpServer): number;
}

/** The two handlers of a gateway replica that routes `per-client` sessions. */
export interface SessionRouting {
  /** For `punk.gateway.call` (queue group `gateway`): serves here, or forwards to the owner. */
  shared: RequestHandler;
  /** For `punk.gateway.instance.<instanceId>.call`: serves a forwarded request; `UpstreamSessionMoved` when another replica owns it now. */
  owned: RequestHandler;
  /** Forgets this replica's ownership entry of `key` (the session closed here). */
  release(key: string): Promise<void>;
}

type SessionRequest = Exclude<GatewayRequest, { method: 'catalog/list' | 'resources/subscribe' }> & { sessionId: string };

/**
 * Wraps the relay so that a request for a `per-client` server carrying a client `sessionId` runs on the
 * replica owning that session's upstream session; every other request goes to `relay` unchanged.
 */
export function createSessionRouting(deps: SessionRoutingDeps, relay: RequestHandler): SessionRouting {
  const { bus, log, instanceId, owners, sessions } = deps;

  const ownerValue = (request: SessionRequest): UpstreamSessionOwner => ({
    instance: instanceId,
    tenant: request.tenant,
    server: request.server,
    sessionId: request.sessionId,
    since: new Date().toISOString(),
  });

  /** The request when it belongs to a per-client upstream session, with its server's manifest. */
  const sessionTarget = (data: unknown): { request: SessionRequest; server: McpServer } | undefined => {
    // Most requests are for shared servers: told from the raw fields, so that only a per-client one is parsed here
    // (the relay parses every request it serves, and would parse it a second time).
    const raw = (typeof data === 'object' && data !== null ? data : {}) as Record<string, unknown>;
    if (typeof raw['tenant'] !== 'string' || typeof raw['server'] !== 'string' || raw['sessionId'] === undefined) return undefined;
    if (deps.serverOf(raw['tenant'], raw['server'])?.spec.sessionMode !== 'per-client') return undefined;
    const parsed = gatewayRequestSchema.safeParse(data);
    if (!parsed.success) return undefined;
    const request = parsed.data;
    if (request.method === 'catalog/list' || request.method === 'resources/subscribe' || request.sessionId === undefined) return undefined;
    const server = deps.serverOf(request.tenant, request.server);
    if (!server || server.spec.sessionMode !== 'per-client') return undefined;
    return { request: request as SessionRequest, server };
  };

  /** Serves the request on this replica's upstream session (opening it when needed) and renews ownership. */
  const serveHere = async (
    data: unknown,
    info: Parameters<RequestHandler>[1],
    target: { request: SessionRequest; server: McpServer },
    key: string,
    revision: number,
    takeover: { from: string } | undefined,
  ): Promise<unknown> => {
    const { request, server } = target;
    if (takeover) {
      log.warn({ session: key, previousOwner: takeover.from, owner: instanceId }, 'upstream session re-established');
    }
    const [session] = await Promise.all([
      sessions.open(key, server, request.sessionId, request.channel?.clientCapabilities ?? {}),
      takeover &&
        appendLedgerEvent(
          bus,
          callEvent('upstream.session_reestablished', request, {
            previousOwner: takeover.from,
            owner: instanceId,
            reason: 'the owning gateway replica did not answer',
          }),
        ),
    ]);
    await renew(session, key, revision, request);
    return sessions.using(session, () => relay(data, info));
  };

  /** Rewrites the ownership entry (renewing its time to live) at most once per quarter of it. */
  const renew = async (session: LocalSession, key: string, revision: number, request: SessionRequest): Promise<void> => {
    if (Date.now() - session.renewedAt < deps.ttlMs / 4) return;
    session.renewedAt = Date.now();
    await owners.update(key, ownerValue(request), revision).catch((error: unknown) => {
      // Another replica wrote the entry since it was read: the next request re-reads it and moves.
      log.warn({ session: key, err: errorMessage(error) }, 'could not renew upstream session ownership');
    });
  };

  const route = async (data: unknown, info: Parameters<RequestHandler>[1], mayForward: boolean): Promise<unknown> => {
    const target = sessionTarget(data);
    if (!target) return relay(data, info);
    const { request } = target;
    const key = upstreamSessionKey(request.tenant, request.server, request.sessionId);
    for (let attempt = 0; attempt < MAX_ROUTE_ATTEMPTS; attempt++) {
      const entry = await owners.get(key);
      if (!entry) {
        const revision = await claim(() => owners.create(key, ownerValue(request)));
        if (revision !== undefined) return serveHere(data, info, target, key, revision, undefined);
        continue;
      }
      const owner = ownerOf(entry);
      if (owner === instanceId) return serveHere(data, info, target, key, entry.revision, undefined);
      if (sessions.get(key)) await sessions.close(key, 'moved');
      if (!mayForward)
        throw new PunkError(
          'UpstreamSessionMoved',
          `upstream session ${key} is owned by gateway replica ${owner ?? '(unreadable entry)'}, not ${instanceId}`,
          { owner },
        );
      if (owner !== undefined) {
        try {
          log.debug({ session: key, owner }, 'forwarding to the owner of the upstream session');
          return await bus.request(subjects.gatewayInstanceCall(owner), data, {
            timeoutMs: deps.forwardTimeoutMs(target.server),
            headers: info.headers,
          });
        } catch (error) {
          if (error instanceof PunkError && error.code === 'UpstreamSessionMoved') continue;
          // Anything else (BusTimeout included: the owner may have run the call) is the caller's answer.
          if (!(error instanceof PunkError && error.code === 'BusNoResponders')) throw error;
        }
      }
      // The owner is gone (or its entry unreadable): take the session over if nobody else did first.
      const revision = await claim(() => owners.update(key, ownerValue(request), entry.revision));
      if (revision !== undefined) return serveHere(data, info, target, key, revision, { from: owner ?? '(unknown)' });
    }
    throw new PunkError('UpstreamSessionUnavailable', `upstream session ${key} kept changing owner; try again`, { session: key });
  };

  return {
    shared: (data, info) => route(data, info, true),
    owned: (data, info) => route(data, info, false),
    release: async (key) => {
      try {
        const entry = await owners.get(key);
        if (entry && ownerOf(entry) === instanceId) await owners.delete(key);
      } catch (error) {
        log.warn(
          { session: key, err: errorMessage(error) },
          'could not release upstream session ownership; it expires with its time to live',
        );
      }
    },
  };
}

/** The owner named by an entry, or undefined when the entry is unreadable. */
function ownerOf(entry: KvEntry): string | undefined {
  const parsed = upstreamSessionOwnerSchema.safeParse(entry.value);
  return parsed.success ? parsed.data.instance : undefined;
}

/** Runs a KV create or compare-and-set; undefined when another write came first (`KvConflict`). */
async function claim(write: () => Promise<number>): Promise<number | undefined> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof PunkError && error.code === 'KvConflict') return undefined;
    throw error;
  }
}
