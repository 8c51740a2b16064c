/**
 * The gateway service: keeps one {@link Upstream} per McpServer, serves
 * `punk.gateway.call`, and announces registry and state changes on the bus
 * and the ledger.
 */
import { appendLedgerEvent, errorMessage, queues, subjects, type Bus, type Logger, type McpServer, type RegistryChanged, type ResourceUpdated, type ServerCatalog, type ServerState } from '@punk/lib';
import { stateChangedEvent } from './events.js';
import { DEFAULT_PENDING_LIMITS, PendingRequests, type PendingLimits } from './client-channel.js';
import { createRelay, type Registry } from './relay.js';
import { Upstream } from './upstream.js';

/** Options of {@link startGateway}. */
export interface GatewayOptions {
  bus: Bus;
  log: Logger;
  /** The McpServers to serve (valid manifests, e.g. from `loadManifestDirectory`). */
  servers: McpServer[];
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
}

/** A running gateway. */
export interface Gateway {
  /** Resolves when every current server has either connected or failed its first start. */
  ready(): Promise<void>;
  /** Replaces the served set: starts added servers, stops removed ones, restarts changed ones. */
  setServers(servers: McpServer[]): Promise<void>;
  /** Catalog entries of every server of a tenant (namespace). */
  catalog(tenant: string): ServerCatalog[];
  /** Stops serving and stops every server process; resolves once none is left running. */
  stop(): Promise<void>;
}

const keyOf = (server: McpServer) => `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;

/**
 * Starts the gateway: launches or connects every server, and serves
 * `subjects.gatewayCall` in queue group `queues.gateway`.
 */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const { bus, log } = options;
  const upstreams = new Map<string, Upstream>();

  const announce = (server: McpServer, change: RegistryChanged['change'], state?: ServerState) => {
    const message: RegistryChanged = { tenant: server.metadata.namespace ?? 'default', server: server.metadata.name, change, ...(state && { state }) };
    bus.publish(subjects.registryChanged, message).catch(error => log.warn({ err: errorMessage(error) }, 'could not broadcast a registry change'));
  };

  const create = (server: McpServer): Upstream => {
    const upstream = new Upstream({
      server,
      log,
      workDir: options.workDir,
      ...(options.env && { extraEnv: options.env }),
      startTimeoutMs: options.startTimeoutMs,
      callTimeoutMs: options.callTimeoutMs,
      onState: (u, state, lastError) => {
        if (upstreams.get(u.key) !== u && state !== 'stopped') return;
        const level = state === 'failed' ? 'warn' : 'info';
        log[level]({ server: u.key, state, ...(lastError && { lastError }) }, `server ${u.key} is ${state}`);
        announce(u.server, 'state', state);
        const { namespace = 'default', name } = u.server.metadata;
        appendLedgerEvent(bus, stateChangedEvent(namespace, name, state, lastError)).catch(error =>
          log.warn({ server: u.key, err: errorMessage(error) }, 'could not record a server state change on the ledger'),
        );
      },
      onListChanged: u => announce(u.server, 'list_changed'),
      onResourceUpdated: (u, uri) => {
        const updated: ResourceUpdated = { tenant: u.server.metadata.namespace ?? 'default', server: u.server.metadata.name, uri };
        bus.publish(subjects.resourceUpdated, updated).catch(error => log.warn({ server: u.key, uri, err: errorMessage(error) }, 'could not broadcast a resource update'));
      },
    });
    upstreams.set(upstream.key, upstream);
    upstream.start();
    return upstream;
  };

  const registry: Registry = {
    find: (tenant, server) => upstreams.get(`${tenant}/${server}`),
    catalog: tenant => [...upstreams.values()].filter(u => (u.server.metadata.namespace ?? 'default') === tenant).map(u => u.catalog()),
  };

  const setServers = async (servers: McpServer[]): Promise<void> => {
    const wanted = new Map(servers.map(s => [keyOf(s), s]));
    const stops: Promise<void>[] = [];
    for (const [key, upstream] of upstreams) {
      const next = wanted.get(key);
      if (next && JSON.stringify(next) === JSON.stringify(upstream.server)) continue;
      upstreams.delete(key);
      stops.push(upstream.stop());
      if (next) {
        create(next);
        announce(next, 'updated');
      } else {
        announce(upstream.server, 'removed');
      }
    }
    for (const [key, server] of wanted) {
      if (upstreams.has(key)) continue;
      create(server);
      announce(server, 'added');
    }
    await Promise.all(stops);
  };

  await setServers(options.servers);
  const subscription = await bus.serve(subjects.gatewayCall, createRelay({ bus, log, registry, pending: new PendingRequests(options.pendingLimits ?? DEFAULT_PENDING_LIMITS) }), { queue: queues.gateway });
  let stopped: Promise<void> | undefined;

  return {
    ready: async () => {
      await Promise.all([...upstreams.values()].map(u => u.firstStart));
    },
    setServers,
    catalog: tenant => registry.catalog(tenant),
    stop: () =>
      (stopped ??= (async () => {
        await subscription.unsubscribe();
        const all = [...upstreams.values()];
        upstreams.clear();
        await Promise.all(all.map(u => u.stop()));
      })()),
  };
}
