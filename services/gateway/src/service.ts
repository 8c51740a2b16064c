/**
 * The gateway service: keeps one {@link Upstream} per McpServer (managed ones
 * from manifests, and the registry's), serves `punk.gateway.call` and the
 * registry API on `punk.gateway.admin`, and announces registry and state
 * changes on the bus and the ledger.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  appendLedgerEvent,
  buckets,
  DEFAULT_UPSTREAM_SESSION_TTL_MS,
  deadlines,
  errorMessage,
  queues,
  subjects,
  type Bus,
  type Database,
  type Logger,
  type McpServer,
  type RegistryChanged,
  type ResourceUpdated,
  type ServerCatalog,
  type ServerState,
} from '@punk/lib';
import { stateChangedEvent } from './events.js';
import { migrateGateway } from './migrations.js';
import { DEFAULT_PENDING_LIMITS, PendingRequests, type PendingLimits } from './client-channel.js';
import { ClientSessions } from './client-sessions.js';
import { createAdminHandler, type CredentialsAdmin, type PinsAdmin, type ProbeResult } from './registry/admin.js';
import { ORIGIN_HEADER, ServedSet } from './registry/served-set.js';
import { RegistrationStore } from './registry/store.js';
import { createRelay, type Registry } from './relay.js';
import { createSessionRouting } from './routing.js';
import { busSessionLink } from './session-link.js';
import { Upstream, type UpstreamPoolOptions } from './upstream.js';


/** Options of {@link startGateway}. */
export interface GatewayOptions {
  bus: Bus;
  log: Logger;
  /** The gateway's database (schema `gateway`, migrated at start): the registry's registrations. */
  db: Database;
  /** The managed McpServers to serve (valid manifests, e.g. from `loadManifestDirectory`); the registry's are added to them. */
  servers: McpServer[];
  /**
   * Whether the registry API accepts stdio registrations, which run a child process on the gateway host
   * (embedded mode, `punk up`). Default false: they are refused, and stored ones are not served here.
   */
  allowStdioRegistrations?: boolean;
  /** The credentials vault behind `credentials.*` of `punk.gateway.admin`; absent: those answer `NotConfigured`. */
  credentials?: CredentialsAdmin;
  /** The tool-definition pins behind `servers.acceptTool`; absent: it answers `NotConfigured`. */
  pins?: PinsAdmin;
  /** Root of the servers' working directories: each runs in `<workDir>/<namespace>/<name>`. */
  workDir: string;
  /** How long a server may take to start and complete its handshake, in milliseconds. */
  startTimeoutMs: number;
  /** Call deadline of servers whose manifest sets no `spec.timeout`, in milliseconds. */
  callTimeoutMs: number;
  /** Extra variables that `$(VAR)` in `env` and `args` may expand (e.g. `PUNK_MANIFEST_DIR`); not passed to servers. */
  env?: Record<string, string>;
  /** Bounds of server-to-client requests waiting for a client's answer (default {@link DEFAULT_PENDING_LIMITS}). */
  pendingLimits?: PendingLimits;
  /** This replica's name (`PUNK_INSTANCE_ID`): it owns `per-client` upstream sessions under it (default a random UUID). */
  instanceId?: string;
  /** Time to live of a `per-client` upstream session's ownership entry (default {@link DEFAULT_UPSTREAM_SESSION_TTL_MS}); the session closes after 3/4 of it idle. */
  upstreamSessionTtlMs?: number;
  /**
   * Pool settings and connection hooks of every upstream (upstream.ts): idle timeout, concurrent-call bound, the
   * fetch and credentials vault of url servers, the review of tools listings. `per-client` sessions get all but
   * `idleTimeoutMs` (they close on their own idle time).
   */
  upstream?: UpstreamPoolOptions;
}

/** A running gateway. */
export interface Gateway {
  /** Resolves when every current server has either connected or failed its first start. */
  ready(): Promise<void>;
  /**
   * Replaces the managed servers (manifests, custom resources); with the registry's registrations they make
   * the served set: added servers start, removed ones stop, changed ones restart.
   */
  setServers(servers: McpServer[]): Promise<void>;
  /** Catalog entries of every server of a tenant (namespace). */
  catalog(tenant: string): ServerCatalog[];
  /** Stops serving and stops every server process; resolves once none is left running. */
  stop(): Promise<void>;
}

const keyOf = (server: McpServer) => `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;

/**
 * Starts the gateway: applies its migrations, launches or connects every managed and registered server,
 * and serves `subjects.gatewayCall` and `subjects.gatewayAdmin` in queue group `queues.gateway`.
 * @throws PunkError `MigrationFailed` or `DatabaseUnavailable` from the database; bus errors.
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { bus, log } = options;
  await migrateGateway(options.db, log);
  const upstreams = new Map<string, Upstream>();
  const instanceId = options.instanceId ?? randomUUID();

  const announce = (server: McpServer, change: RegistryChanged['change'], state?: ServerState) => {
    const message: RegistryChanged = { tenant: server.metadata.namespace ?? 'default', server: server.metadata.name, change, ...(state && { state }) };
    bus.publish(subjects.registryChanged, message, { [ORIGIN_HEADER]: instanceId }).catch(error => log.warn({ err: errorMessage(error) }, 'could not broadcast a registry change'));
  };

  /** The options every upstream of `server` gets, pooled or not. */
  const upstreamBase = (server: McpServer, workDir: string) => ({
    server,
    log,
    workDir,
    ...(options.env && { extraEnv: options.env }),
    startTimeoutMs: options.startTimeoutMs,
    callTimeoutMs: options.callTimeoutMs,
  });

  /** Keeps the pooled connection's tool listing as the registry's cache (`servers.tools`). */
  const recordListing = (u: Upstream) => {
    const { namespace = 'default', name } = u.server.metadata;
    served.recordListing(namespace, name, u.catalog().tools, new Date().toISOString()).catch(error => log.warn({ server: u.key, err: errorMessage(error) }, 'could not store a tool listing'));
  };

  const create = (server: McpServer): Upstream => {
    const upstream = new Upstream({
      ...upstreamBase(server, options.workDir),
      onState: (u, state, lastError) => {
        if (upstreams.get(u.key) !== u && state !== 'stopped') return;
        if (state === 'ready') recordListing(u);
        const level = state === 'failed' ? 'warn' : 'info';
        log[level]({ server: u.key, state, ...(lastError && { lastError }) }, `server ${u.key} is ${state}`);
        announce(u.server, 'state', state);
        const { namespace = 'default', name } = u.server.metadata;
        appendLedgerEvent(bus, stateChangedEvent(namespace, name, state, lastError)).catch(error =>
          log.warn({ server: u.key, err: errorMessage(error) }, 'could not record a server state change on the ledger'),
        );
      },
      onListChanged: u => {
        recordListing(u);
        announce(u.server, 'list_changed');
      },
      onResourceUpdated: (u, uri) => {
        const updated: ResourceUpdated = { tenant: u.server.metadata.namespace ?? 'default', server: u.server.metadata.name, uri };
        bus.publish(subjects.resourceUpdated, updated).catch(error => log.warn({ server: u.key, uri, err: errorMessage(error) }, 'could not broadcast a resource update'));
      },
    });
    upstreams.set(upstream.key, upstream);
    upstream.start();
    return upstream;
  };

  // `per-client` servers: one upstream per client session, owned by one replica (client-sessions.ts, routing.ts).
  const pending = new PendingRequests(options.pendingLimits ?? DEFAULT_PENDING_LIMITS);
  const sessionTtlMs = options.upstreamSessionTtlMs ?? DEFAULT_UPSTREAM_SESSION_TTL_MS;
  const { idleTimeoutMs: _sessionsCloseWhenIdle, ...perClient } = options.upstream ?? {};
  const sessions = new ClientSessions({
    bus,
    log,
    // The owner rewrites its entry at most once per TTL/4 of use, so closing after 3/4 TTL idle comes before the entry can expire.
    idleMs: (sessionTtlMs * 3) / 4,
    createUpstream: (server, key, sessionId, clientCapabilities) =>
      new Upstream({
        ...perClient,
        server,
        log,
        workDir: join(options.workDir, 'sessions', key),
        ...(options.env && { extraEnv: options.env }),
        startTimeoutMs: options.startTimeoutMs,
        callTimeoutMs: options.callTimeoutMs,
        onState: (u, state, lastError) => log.debug({ session: key, state, ...(lastError && { lastError }) }, `upstream session of ${u.key} is ${state}`),
        // Listings and resource updates are the shared connection's to announce.
        onListChanged: () => undefined,
        onResourceUpdated: () => undefined,
        // Log messages and roots/list have one recipient here: the client session (session-link.ts).
        session: busSessionLink({ bus, log, pending }, server.metadata.namespace ?? 'default', sessionId, clientCapabilities),
      }),
    onClosed: async (key, reason) => {
      if (reason !== 'moved') await routing.release(key);
    },
  });

  const registry: Registry = {
    find: (tenant, server, sessionId) => (sessionId !== undefined ? sessions.find(tenant, server, sessionId) : undefined) ?? upstreams.get(`${tenant}/${server}`),
    catalog: tenant => [...upstreams.values()].filter(u => (u.server.metadata.namespace ?? 'default') === tenant).map(u => u.catalog()),
  };

  /** Serves exactly `servers` (the served set's host): restarts changed ones, evicting their pooled connections. */
  const serve = async (servers: McpServer[], announceChanges: boolean): Promise<void> => {
    const wanted = new Map(servers.map(s => [keyOf(s), s]));
    const stops: Promise<void>[] = [];
    for (const [key, upstream] of upstreams) {
      const next = wanted.get(key);
      if (next && JSON.stringify(next) === JSON.stringify(upstream.server)) continue;
      upstreams.delete(key);
      stops.push(upstream.stop(), sessions.closeServer(key));
      if (next) {
        create(next);
        if (announceChanges) announce(next, 'updated');
      } else if (announceChanges) {
        announce(upstream.server, 'removed');
      }
    }
    for (const [key, server] of wanted) {
      if (upstreams.has(key)) continue;
      create(server);
      if (announceChanges) announce(server, 'added');
    }
    await Promise.all(stops);
  };

  /** Connects to `server` on a short-lived upstream of its own (independent of the pool), lists its tools, and stops it. */
  const probe = async (server: McpServer): Promise<ProbeResult> => {
    await mkdir(options.workDir, { recursive: true });
    const workDir = await mkdtemp(join(options.workDir, 'probe-'));
    const upstream = new Upstream({ ...upstreamBase(server, workDir), onState: () => undefined, onListChanged: () => undefined, onResourceUpdated: () => undefined });
    const started = performance.now();
    try {
      upstream.start();
      await upstream.firstStart;
      const latencyMs = Math.round(performance.now() - started);
      if (upstream.state !== 'ready') return { ok: false, tools: [], latencyMs, error: upstream.error ?? `server ${upstream.key} did not start` };
      return { ok: true, tools: upstream.catalog().tools, latencyMs };
    } finally {
      await upstream.stop();
      await rm(workDir, { recursive: true, force: true });
    }
  };

  const allowStdioRegistrations = options.allowStdioRegistrations ?? false;
  const store = new RegistrationStore(options.db);
  const served = new ServedSet({ store, bus, log, instanceId, allowStdioRegistrations, host: { serve } });
  await served.start(options.servers);
  const owners = await bus.keyValue(buckets.upstreamSessions(sessionTtlMs));
  const routing = createSessionRouting(
    {
      bus,
      log,
      instanceId,
      owners,
      ttlMs: sessionTtlMs,
      sessions,
      serverOf: (tenant, server) => upstreams.get(`${tenant}/${server}`)?.server,
      // The owner may have to start the session's server and ask governance before the call itself.
      forwardTimeoutMs: server => options.startTimeoutMs + deadlines.governanceCheckMs + (upstreams.get(keyOf(server))?.callTimeoutMs ?? options.callTimeoutMs),
    },
    createRelay({ bus, log, registry, pending }),
  );
  const admin = createAdminHandler({
    bus,
    log,
    store,
    served,
    allowStdioRegistrations,
    catalogOf: (tenant, name) => upstreams.get(`${tenant}/${name}`)?.catalog(),
    probe,
    ...(options.credentials && { credentials: options.credentials }),
    ...(options.pins && { pins: options.pins }),
  });
  const subscriptions = [
    await bus.serve(subjects.gatewayCall, routing.shared, { queue: queues.gateway }),
    await bus.serve(subjects.gatewayInstanceCall(instanceId), routing.owned),
    await bus.serve(subjects.gatewayAdmin, admin, { queue: queues.gateway }),
  ];
  let stopped: Promise<void> | undefined;

  return {
    ready: async () => {
      await Promise.all([...upstreams.values()].map(u => u.firstStart));
    },
    setServers: servers => served.setManaged(servers),
    catalog: tenant => registry.catalog(tenant),
    stop: () =>
      (stopped ??= (async () => {
        await served.stop();
        await Promise.all(subscriptions.map(s => s.unsubscribe()));
        await sessions.stop();
        const all = [...upstreams.values()];
        upstreams.clear();
        await Promise.all(all.map(u => u.stop()));
      })()),
  };
}
