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
  DEFAULT_MAX_PAYLOAD_BYTES,
  appendLedgerEvent,
  buckets,
  credentialsChangedSchema,
  DEFAULT_UPSTREAM_SESSION_TTL_MS,
  deadlines,
  errorMessage,
  NameMap,
  ORIGIN_HEADER,
  queues,
  registryChangedSchema,
  subjects,
  transportOf,
  watchPolicies,
  watchTenantSettings,
  watchWorkflows,
  type Bus,
  type CredentialsChanged,
  type Database,
  type Logger,
  type McpServer,
  type NameConflict,
  type RegistryChanged,
  type ResourceUpdated,
  type ServerCatalog,
  type ServerState,
  WORKFLOW_SERVER,
} from '@punk/lib';
import { traceGatewayCalls } from '@punk/lib';
import { stateChangedEvent } from './events.js';
import { watchUpstreams } from './metrics.js';
import { migrateGateway } from './migrations.js';
import { acceptingCalls, CallCancellations, DEFAULT_PENDING_LIMITS, PendingRequests, type PendingLimits } from './client-channel.js';
import { startHeartbeat } from './heartbeat.js';
import { ClientSessions } from './client-sessions.js';
import { createAdminHandler, type ProbeResult } from './registry/admin.js';
import { watchManagedServers } from './registry/managed-servers.js';
import { isScaledToZero, scaledToZeroCatalog, scaledToZeroError } from './registry/scaled-to-zero.js';
import { ServedSet } from './registry/served-set.js';
import { RegistrationStore } from './registry/store.js';
import { CallDecider } from './decisions.js';
import { createRelay, type Registry, type RelayHandler } from './relay.js';
import { Connections } from './connections.js';
import { createSessionRouting } from './routing.js';
import { busSessionLink } from './session-link.js';
import { Upstream, type UpstreamPoolOptions } from './upstream.js';
import { asLocalUrlServer } from './launch.js';
import { CredentialVault, Keyring, referencesCredential } from './credentials/index.js';
import { guardedFetch, type DestinationPolicy, type GuardedFetch } from './egress/index.js';
import { ToolPinning, type PinningPolicy } from './pinning/tool-pinning.js';
import { withholdTools, type McpItem } from './catalog.js';
import type { Secrets } from './upstream-secrets.js';
import { DEFAULT_WORKFLOW_LIMITS, type WorkflowLimits } from './workflows/engine.js';
import { RunTable } from './workflows/run-table.js';
import { serveWorkflows, type ServedWorkflows } from './workflows/served.js';

/** Options of {@link startGateway}. */
export interface GatewayOptions {
  bus: Bus;
  log: Logger;
  /** The gateway's database (schema `gateway`, migrated at start): the registry's registrations. */
  db: Database;
  /**
   * The McpServers of manifests to serve (valid ones, e.g. from `loadManifestDirectory`). The operator's, from
   * bucket `PUNK_MCP_SERVERS`, are added to them (a manifest wins a name clash), and the registry's to both.
   */
  servers: McpServer[];
  /**
   * Whether the registry API accepts stdio registrations, which run a child process on the gateway host
   * (embedded mode, `punk up`). Default false: they are refused, and stored ones are not served here.
   */
  allowStdioRegistrations?: boolean;
  /**
   * Where http servers may connect (the SSRF guard, egress/): checked when a registration is made and on every
   * request of every connection to a `url` server. Default: private, loopback and metadata destinations refused.
   * `destinationPolicyOf(config)` gives the configured one (open to private networks only with authentication off).
   */
  egress?: DestinationPolicy;
  /** The key ring of the credentials vault (`Keyring.fromConfig`); absent: the credentials API answers `CredentialsUnavailable` and `cred:` references do not resolve. */
  keyring?: Keyring | undefined;
  /** What a changed tool definition does when a server's `spec.tools.pinning` says nothing (`PUNK_TOOL_PINNING`, default `hide`). */
  toolPinning?: PinningPolicy;
  /** Root of the servers' working directories: each runs in `<workDir>/<namespace>/<name>`. */
  workDir: string;
  /** How long a server may take to start and complete its handshake when its manifest sets no `spec.startTimeout`, in milliseconds. */
  startTimeoutMs: number;
  /** Call deadline of servers whose manifest sets no `spec.timeout`, in milliseconds. */
  callTimeoutMs: number;
  /** Largest result relayed, as JSON in UTF-8 bytes (`PUNK_MAX_RESULT_BYTES`; default 32 MiB): a larger one is answered as an error. */
  maxResultBytes?: number;
  /** Extra variables that `$(VAR)` in `env` and `args` may expand (e.g. `PUNK_MANIFEST_DIR`); not passed to servers. */
  env?: Record<string, string>;
  /** Bounds of server-to-client requests waiting for a client's answer (default {@link DEFAULT_PENDING_LIMITS}). */
  pendingLimits?: PendingLimits;
  /** This replica's name (`PUNK_INSTANCE_ID`): it owns `per-client` upstream sessions under it (default a random UUID). */
  instanceId?: string;
  /** Time to live of a `per-client` upstream session's ownership entry (default {@link DEFAULT_UPSTREAM_SESSION_TTL_MS}); the session closes after 3/4 of it idle. */
  upstreamSessionTtlMs?: number;
  /**
   * Pool bounds of every upstream (upstream.ts): idle timeout (`PUNK_UPSTREAM_IDLE_TIMEOUT_MS`), concurrent-call
   * bound (`PUNK_UPSTREAM_MAX_CONCURRENT_CALLS`) and its queue (`PUNK_UPSTREAM_MAX_QUEUED_CALLS`, `PUNK_UPSTREAM_QUEUE_TIMEOUT_MS`, `PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL`), first backoff. `per-client` sessions get all but `idleTimeoutMs`
   * (they close on their own idle time). The connection hooks (guarded fetch, vault, pinning) are the gateway's own.
   */
  upstream?: Pick<
    UpstreamPoolOptions,
    'idleTimeoutMs' | 'maxConcurrentCalls' | 'maxQueuedCalls' | 'queueTimeoutMs' | 'maxCallsPerPrincipal' | 'initialBackoffMs'
  >;
  /** Bounds of workflow runs (default {@link DEFAULT_WORKFLOW_LIMITS}: 200 nodes, 5 minutes, 1 MiB results). */
  workflowLimits?: Partial<WorkflowLimits>;
  /** Age past which a run's row counts as interrupted, in milliseconds (default `STALE_MS`, 20 s); tests shorten it. */
  workflowStaleMs?: number;
}

/** A running gateway. */
export interface Gateway {
  /** Resolves when every current server has either connected or failed its first start. */
  ready(): Promise<void>;
  /**
   * Replaces the manifests' servers; with the operator's (bucket `PUNK_MCP_SERVERS`) and the registry's
   * registrations they make the served set: added servers start, removed ones stop, changed ones restart.
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
  // Before anything is appended: each ledger event is masked when its tenant's redaction setting is on.
  const tenantSettings = await watchTenantSettings(bus, log);
  const upstreams = new Map<string, Upstream>();
  const instanceId = options.instanceId ?? randomUUID();

  const announce = (server: McpServer, change: RegistryChanged['change'], state?: ServerState) => {
    const message: RegistryChanged = {
      tenant: server.metadata.namespace ?? 'default',
      server: server.metadata.name,
      change,
      ...(state && { state }),
    };
    bus
      .publish(subjects.registryChanged, message, { [ORIGIN_HEADER]: instanceId })
      .catch((error: unknown) => log.warn({ err: errorMessage(error) }, 'could not broadcast a registry change'));
  };

  // Managed servers: the manifests' and those of bucket `PUNK_MCP_SERVERS` (a manifest wins a clash: it was given to this replica).
  let manifests = options.servers;
  let operated: McpServer[] = [];
  const egress = options.egress ?? { allowPrivate: false, allowedNetworks: [] };
  // One guarded fetch for every url server: its keep-alive pools are keyed by origin and checked addresses.
  const egressFetch = guardedFetch(egress);
  /** The `spec.url` of each server of bucket `PUNK_MCP_SERVERS` whose entry says its writer launched that process (`punk cluster`). */
  const launchedUrls = new Map<string, string>();
  // A guarded fetch of its own for each such server, allowed its own origin only.
  const launchedFetches = new Map<string, GuardedFetch>();
  const fetchFor = (server: McpServer): GuardedFetch => {
    const key = keyOf(server);
    const url = launchedUrls.get(key);
    // A manifest of the same name wins the clash (see setManaged): it was not launched by the bucket's writer.
    if (url === undefined || server.spec.url !== url || manifests.some((s) => keyOf(s) === key)) return egressFetch;
    let launched = launchedFetches.get(`${key} ${url}`);
    if (!launched) {
      launched = guardedFetch({ ...egress, launchedOrigins: [new URL(url).origin] });
      launchedFetches.set(`${key} ${url}`, launched);
    }
    return launched;
  };
  const vault = new CredentialVault({ db: options.db, log, keyring: options.keyring, bus, instanceId, fetch: egressFetch });
  // A review that changes which tools wait for an admin (a test found a changed definition, say) reaches every replica and front at once.
  const pinning = new ToolPinning({
    db: options.db,
    log,
    bus,
    policy: options.toolPinning ?? 'hide',
    onWithheldChanged: (tenant, name) => {
      announceWithheld(tenant, name, 'tool_withheld');
    },
  });
  /** Broadcasts a pinning change of a server (its McpServer need not be served here: a test may run anywhere). */
  const announceWithheld = (tenant: string, name: string, change: 'tool_withheld' | 'list_changed') => {
    const message: RegistryChanged = { tenant, server: name, change };
    bus.publish(subjects.registryChanged, message, { [ORIGIN_HEADER]: instanceId }).catch((error: unknown) => {
      log.warn({ err: errorMessage(error) }, 'could not broadcast a pinning change');
    });
  };

  /** The credentials vault as the connections of one tenant's server see it: references resolve in that tenant only. */
  const secretsOf = (tenant: string): Secrets => ({
    resolve: (value) => vault.resolveValue(tenant, value),
    renewAfterUnauthorized: (credentialId, rejected) => vault.renewAfterUnauthorized(tenant, credentialId, rejected),
  });

  /**
   * The options every upstream of `server` gets, pooled or not: the pool bounds, the guarded fetch, the tenant's
   * credentials, and the pinning review (the registry's test connections too: a test that lists a changed tool
   * records the change and answers what clients would be served).
   */
  const upstreamBase = (server: McpServer, workDir: string) => ({
    ...options.upstream,
    server,
    log,
    workDir,
    ...(options.env && { extraEnv: options.env }),
    startTimeoutMs: options.startTimeoutMs,
    callTimeoutMs: options.callTimeoutMs,
    // Room for a result past the limit, which the relay then refuses by name; past this the line is dropped.
    maxMessageBytes: 2 * (options.maxResultBytes ?? DEFAULT_MAX_PAYLOAD_BYTES),
    fetch: fetchFor(server),
    secrets: secretsOf(server.metadata.namespace ?? 'default'),
    reviewTools: (u: Upstream, tools: McpItem[]) => pinning.review(u.server, tools),
    instanceId,
  });

  /** The name conflicts of a tenant's tools on `/mcp` (naming.ts), from this replica's catalog of it. */
  const nameConflicts = (tenant: string): NameConflict[] =>
    new NameMap(
      registry.catalog(tenant).flatMap((s) => s.tools.map((tool) => ({ server: s.name, name: tool.name }))),
      true,
    ).conflicts;

  /** Keeps the pooled connection's tool listing as the registry's cache (`servers.tools`); warns of tools no endpoint can expose. */
  const recordListing = (u: Upstream) => {
    const { namespace = 'default', name } = u.server.metadata;
    for (const conflict of nameConflicts(namespace).filter((c) => c.server === name))
      log.warn({ server: u.key, tool: conflict.name }, `a tool of server ${u.key} is not exposed: ${conflict.reason}`);
    served
      .recordListing(namespace, name, u.catalog().tools, new Date().toISOString())
      .catch((error: unknown) => log.warn({ server: u.key, err: errorMessage(error) }, 'could not store a tool listing'));
  };

  const create = (server: McpServer): Upstream => {
    // Closing an idle connection and reconnecting it on the next call change nothing clients or auditors see (the
    // tools stay listed): those transitions are neither broadcast nor recorded; a failed reconnect is.
    let waking = false;
    // A server that keeps failing for one reason is broadcast and recorded once, not at every retry or probe.
    let failedWith: string | undefined;
    const upstream = new Upstream({
      ...upstreamBase(server, options.workDir),
      onState: (u, state, lastError) => {
        if (upstreams.get(u.key) !== u && state !== 'stopped') return;
        const retrying = failedWith !== undefined && (state === 'starting' || (state === 'failed' && u.failureCause === failedWith));
        if (state === 'idle' || (waking && (state === 'starting' || state === 'ready')) || retrying) {
          waking = state === 'idle' || (waking && state === 'starting');
          log.debug({ server: u.key, state, ...(lastError && { lastError }) }, `server ${u.key} is ${state}`);
          return;
        }
        waking = false;
        failedWith = state === 'failed' ? u.failureCause : undefined;
        if (state === 'ready') recordListing(u);
        const level = state === 'failed' ? 'warn' : 'info';
        log[level]({ server: u.key, state, ...(lastError && { lastError }) }, `server ${u.key} is ${state}`);
        announce(u.server, 'state', state);
        const { namespace = 'default', name } = u.server.metadata;
        appendLedgerEvent(bus, stateChangedEvent(namespace, name, state, lastError)).catch((error: unknown) =>
          log.warn({ server: u.key, err: errorMessage(error) }, 'could not record a server state change on the ledger'),
        );
      },
      onListChanged: (u) => {
        recordListing(u);
        announce(u.server, 'list_changed');
      },
      onResourceUpdated: (u, uri) => {
        const updated: ResourceUpdated = { tenant: u.server.metadata.namespace ?? 'default', server: u.server.metadata.name, uri };
        bus
          .publish(subjects.resourceUpdated, updated)
          .catch((error: unknown) => log.warn({ server: u.key, uri, err: errorMessage(error) }, 'could not broadcast a resource update'));
      },
    });
    upstreams.set(upstream.key, upstream);
    upstream.start();
    return upstream;
  };

  // `per-client` servers: one upstream per client session, owned by one replica (client-sessions.ts, routing.ts).
  const pending = new PendingRequests(options.pendingLimits ?? DEFAULT_PENDING_LIMITS);
  const cancellations = await CallCancellations.start(bus, log);
  const sessionTtlMs = options.upstreamSessionTtlMs ?? DEFAULT_UPSTREAM_SESSION_TTL_MS;
  const sessions = new ClientSessions({
    bus,
    log,
    // The owner rewrites its entry at most once per TTL/4 of use, so closing after 3/4 TTL idle comes before the entry can expire.
    idleMs: (sessionTtlMs * 3) / 4,
    createUpstream: (server, key, sessionId, clientCapabilities) => {
      // A session closes on its own idle time (client-sessions.ts), not the pool's.
      const { idleTimeoutMs: _poolsOnly, ...base } = upstreamBase(server, join(options.workDir, 'sessions', key));
      return new Upstream({
        ...base,
        onState: (u, state, lastError) =>
          log.debug({ session: key, state, ...(lastError && { lastError }) }, `upstream session of ${u.key} is ${state}`),
        // Listings and resource updates are the shared connection's to announce.
        onListChanged: () => undefined,
        onResourceUpdated: () => undefined,
        // Log messages and roots/list have one recipient here: the client session (session-link.ts).
        session: busSessionLink({ bus, log, pending }, server.metadata.namespace ?? 'default', sessionId, clientCapabilities),
      });
    },
    onClosed: async (key, reason) => {
      if (reason !== 'moved') await routing.release(key);
    },
  });

  // Servers scaled to zero (spec.replicas 0): no connection; listed with nothing, and a call is refused at once.
  const scaled = new Map<string, McpServer>();
  const registry: Registry = {
    find: (tenant, server, sessionId) => {
      const found =
        (sessionId !== undefined ? sessions.find(tenant, server, sessionId) : undefined) ?? upstreams.get(`${tenant}/${server}`);
      const zero = found ? undefined : scaled.get(`${tenant}/${server}`);
      if (zero) throw scaledToZeroError(zero);
      return found;
    },
    // Tools hidden by a review on any connection (a test's too) are left out at once, whatever the pooled connection listed.
    catalog: (tenant) => [
      ...[...upstreams.values()]
        .filter((u) => (u.server.metadata.namespace ?? 'default') === tenant)
        .map((u) => withholdTools(u.catalog(), pinning.hiddenTools(tenant, u.server.metadata.name))),
      ...[...scaled.values()].filter((s) => (s.metadata.namespace ?? 'default') === tenant).map(scaledToZeroCatalog),
    ],
  };

  /** Lists a server again on its pooled connection and on this replica's `per-client` sessions of it. */
  const relist = async (tenant: string, name: string): Promise<void> => {
    const key = `${tenant}/${name}`;
    const listed = [upstreams.get(key), ...sessions.ofServer(key)].filter((u) => u !== undefined);
    await Promise.all(
      listed.map((u) =>
        u.relist().catch((error: unknown) => log.warn({ server: key, err: errorMessage(error) }, 'could not list a server again')),
      ),
    );
  };

  /**
   * Stops `upstream` (its pooled connection and this replica's `per-client` sessions of it) and, with `next`,
   * creates the server again from that manifest; resolves once everything of the old one stopped.
   */
  const replace = (upstream: Upstream, next: McpServer | undefined): Promise<unknown> => {
    upstreams.delete(upstream.key);
    const stopped = Promise.all([upstream.stop(), sessions.closeServer(upstream.key)]);
    if (next) create(next);
    return stopped;
  };

  /** Serves exactly `servers` (the served set's host): restarts changed ones, evicting their pooled connections. */
  const serve = async (servers: McpServer[], announceChanges: boolean): Promise<void> => {
    const wanted = new Map(servers.filter((s) => !isScaledToZero(s)).map((s) => [keyOf(s), s]));
    const zero = new Map(servers.filter(isScaledToZero).map((s) => [keyOf(s), s]));
    // What was listed before, scaled to zero or not: going to or from zero is an update (still listed), not a removal.
    const before = new Map([...[...upstreams].map(([key, u]) => [key, u.server] as const), ...scaled]);
    const stops: Promise<unknown>[] = [];
    for (const [key, upstream] of upstreams) {
      const next = wanted.get(key);
      if (next && JSON.stringify(next) === JSON.stringify(upstream.server)) continue;
      stops.push(replace(upstream, next));
    }
    for (const [key, server] of wanted) if (!upstreams.has(key)) create(server);
    scaled.clear();
    for (const [key, server] of zero) scaled.set(key, server);
    if (announceChanges) {
      for (const [key, server] of [...wanted, ...zero]) {
        const previous = before.get(key);
        if (!previous) announce(server, 'added');
        else if (JSON.stringify(previous) !== JSON.stringify(server)) announce(server, 'updated');
      }
      for (const [key, server] of before) if (!wanted.has(key) && !zero.has(key)) announce(server, 'removed');
    }
    await Promise.all(stops);
  };

  /**
   * Restarts this replica's servers of `tenant` whose headers or env reference credential `id` (from the same
   * manifests, so their next connect resolves the credential anew); announces each as `updated`.
   */
  const restartReferencing = async (tenant: string, id: string): Promise<void> => {
    const affected = [...upstreams.values()].filter(
      (u) => (u.server.metadata.namespace ?? 'default') === tenant && referencesCredential(u.server, id),
    );
    if (affected.length > 0)
      log.info(
        { tenant, credential: id, servers: affected.map((u) => u.key) },
        'a credential changed: reconnecting the servers that reference it',
      );
    await Promise.all(
      affected.map((upstream) => {
        const stopped = replace(upstream, upstream.server);
        announce(upstream.server, 'updated');
        return stopped;
      }),
    );
  };

  /**
   * Connects to `server` on a short-lived upstream of its own (independent of the pool), lists its tools, and stops
   * it. A local HTTP server whose pooled process runs holds its port (a second process could not listen there, and
   * Punk connects only to its own): the test reaches that process of Punk's over HTTP.
   */
  const probe = async (server: McpServer): Promise<ProbeResult> => {
    await mkdir(options.workDir, { recursive: true });
    const workDir = await mkdtemp(join(options.workDir, 'probe-'));
    const pooled = upstreams.get(keyOf(server));
    const poolPort =
      server.spec.url === undefined && transportOf(server.spec) !== 'stdio' && pooled?.pid !== undefined ? pooled.port : undefined;
    const viaPool = poolPort !== undefined;
    // Punk's own child on loopback, not a remote destination: the egress guard's fetch is not for it.
    const { fetch: guarded, ...base } = upstreamBase(viaPool ? asLocalUrlServer(server, poolPort) : server, workDir);
    const upstream = new Upstream({
      ...base,
      ...(!viaPool && { fetch: guarded }),
      onState: () => undefined,
      onListChanged: () => undefined,
      onResourceUpdated: () => undefined,
    });
    const started = performance.now();
    try {
      upstream.start();
      await upstream.firstStart;
      const latencyMs = Math.round(performance.now() - started);
      if (upstream.state !== 'ready')
        return { ok: false, tools: [], latencyMs, error: upstream.error ?? `server ${upstream.key} did not start` };
      const { tools, warnings } = upstream.catalog();
      return { ok: true, tools, latencyMs, ...(warnings && { warnings }) };
    } finally {
      await upstream.stop();
      await rm(workDir, { recursive: true, force: true });
    }
  };

  const allowStdioRegistrations = options.allowStdioRegistrations ?? false;
  const store = new RegistrationStore(options.db);
  const served = new ServedSet({ store, bus, log, instanceId, allowStdioRegistrations, host: { serve } });
  await served.start(options.servers);
  const setManaged = () => {
    const merged = new Map(operated.map((s) => [keyOf(s), s]));
    for (const server of manifests) {
      if (merged.has(keyOf(server)))
        log.warn(
          { server: keyOf(server) },
          `server ${keyOf(server)} is both in a manifest and an McpServer custom resource: the manifest's is served`,
        );
      merged.set(keyOf(server), server);
    }
    return served.setManaged([...merged.values()]);
  };
  const operatorServers = await watchManagedServers({
    bus,
    log,
    onChange: async (entries) => {
      operated = entries.map((entry) => entry.server);
      launchedUrls.clear();
      for (const { server, launched } of entries)
        if (launched && server.spec.url !== undefined) launchedUrls.set(keyOf(server), server.spec.url);
      await setManaged();
    },
  });
  const owners = await bus.keyValue(buckets.upstreamSessions(sessionTtlMs));
  // Calls are decided in process from the compiled McpPolicy objects (decisions.ts); governance only for shared state.
  const policies = await watchPolicies(bus, log);
  const decider = new CallDecider(bus, log, policies);
  // Workflows: served from bucket PUNK_MCP_WORKFLOWS; each node's call goes through the relay below, as a client's.
  const workflowWatch = await watchWorkflows(bus, log);
  const runTable = new RunTable({
    db: options.db,
    bus,
    log,
    instanceId,
    ...(options.workflowStaleMs !== undefined && { staleMs: options.workflowStaleMs }),
  });
  const workflows: ServedWorkflows = serveWorkflows({
    bus,
    log,
    workflows: workflowWatch,
    catalog: (tenant) => registry.catalog(tenant),
    runs: runTable,
    decider,
    cancellations,
    limits: { ...DEFAULT_WORKFLOW_LIMITS, ...options.workflowLimits },
    // Called by runs only, after `relay` below is made.
    callTool: async (request, signal) =>
      (await relay(request, { subject: subjects.gatewayCall, headers: {} }, signal)) as Record<string, unknown>,
    declaredLevel: (tenant, server, tool) => registry.catalog(tenant).find((s) => s.name === server)?.sideEffectLevels[tool],
  });
  // The fronts list the workflow tools again (and tell their clients) when a tenant's workflows change.
  const stopWorkflowAnnounces = workflowWatch.onChange((tenant) => {
    const message: RegistryChanged = { tenant, server: WORKFLOW_SERVER, change: 'list_changed' };
    bus
      .publish(subjects.registryChanged, message, { [ORIGIN_HEADER]: instanceId })
      .catch((error: unknown) => log.warn({ err: errorMessage(error) }, 'could not broadcast a workflow change'));
  });
  await runTable.start();
  const connections = new Connections({
    db: options.db,
    log,
    bus,
    vault,
    serverOf: (tenant, name) => upstreams.get(`${tenant}/${name}`)?.server,
    serversOf: (tenant) =>
      [...upstreams.values()].map((u) => u.server).filter((server) => (server.metadata.namespace ?? 'default') === tenant),
    fetch: egressFetch,
  });
  const relay: RelayHandler = createRelay({
    bus,
    log,
    registry,
    pending,
    decider,
    pinning,
    cancellations,
    maxResultBytes: options.maxResultBytes,
    workflows,
    connections,
  });
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
      forwardTimeoutMs: (server) =>
        (upstreams.get(keyOf(server))?.startTimeoutMs ?? options.startTimeoutMs) +
        deadlines.governanceCheckMs +
        (upstreams.get(keyOf(server))?.callTimeoutMs ?? options.callTimeoutMs),
    },
    relay,
  );
  const admin = createAdminHandler({
    bus,
    log,
    store,
    served,
    allowStdioRegistrations,
    catalogOf: (tenant, name) => registry.catalog(tenant).find((s) => s.name === name),
    nameConflictsOf: (tenant, name) => nameConflicts(tenant).flatMap((c) => (c.server === name ? [c.reason] : [])),
    probe,
    workflows: (request) => workflows.admin(request),
    connections: (request) => connections.admin(request),
    egress,
    credentials: vault,
    pins: pinning,
    // The pooled connection lists again what the test listed (a changed definition the server did not announce).
    onTested: (tenant, name) => relist(tenant, name),
    onToolAccepted: async (tenant, name) => {
      await relist(tenant, name);
      const upstream = upstreams.get(`${tenant}/${name}`);
      if (upstream) announce(upstream.server, 'tool_accepted');
    },
    onCredentialChanged: async (tenant, id) => {
      // Here first (the admin answers once this replica sends the new value, or none), then everywhere else.
      await restartReferencing(tenant, id);
      const change: CredentialsChanged = { tenant, id };
      await bus
        .publish(subjects.credentialsChanged, change, { [ORIGIN_HEADER]: instanceId })
        .catch((error: unknown) =>
          log.error(
            { tenant, credential: id, err: errorMessage(error) },
            'could not tell the other gateway replicas that a credential changed; their connections resolve it again when they reconnect',
          ),
        );
    },
  });
  // Another replica's admin accepted a tool definition: list again here, so the tool is served (or callable) here too.
  // Another replica's review changed which tools wait for an admin: read them again, so this replica withholds the same.
  const accepted = await bus.subscribe(subjects.registryChanged, async (data, info) => {
    if (info.headers[ORIGIN_HEADER] === instanceId) return;
    const change = registryChangedSchema.safeParse(data);
    if (!change.success || (change.data.change !== 'tool_accepted' && change.data.change !== 'tool_withheld')) return;
    const { tenant, server } = change.data;
    try {
      // The fronts may have read this replica's catalog before the refresh: tell them it changed.
      if (await pinning.refresh(tenant, server)) announceWithheld(tenant, server, 'list_changed');
    } catch (error) {
      log.warn({ server: `${tenant}/${server}`, err: errorMessage(error) }, 'could not read the pins of a server again');
    }
    if (change.data.change === 'tool_accepted') await relist(tenant, server);
  });
  // Another replica's admin created or deleted a credential: reconnect the servers here that reference it.
  const credentialChanges = await bus.subscribe(subjects.credentialsChanged, async (data, info) => {
    if (info.headers[ORIGIN_HEADER] === instanceId) return;
    const change = credentialsChangedSchema.safeParse(data);
    if (change.success) await restartReferencing(change.data.tenant, change.data.id);
  });
  const subscriptions = [
    accepted,
    credentialChanges,
    await bus.serve(subjects.gatewayCall, acceptingCalls(bus, log, instanceId, traceGatewayCalls(routing.shared)), {
      queue: queues.gateway,
    }),
    await bus.serve(subjects.gatewayInstanceCall(instanceId), acceptingCalls(bus, log, instanceId, traceGatewayCalls(routing.owned))),
    await bus.serve(subjects.gatewayAdmin, admin, { queue: queues.gateway }),
  ];
  const heartbeat = startHeartbeat(bus, log, instanceId);
  let stopped: Promise<void> | undefined;

  const unwatchUpstreams = watchUpstreams(
    () => upstreams.values(),
    () => [...upstreams.keys()].flatMap((key) => sessions.ofServer(key)),
  );
  return {
    ready: async () => {
      await Promise.all([...upstreams.values()].map((u) => u.firstStart));
    },
    setServers: (servers) => {
      manifests = servers;
      return setManaged();
    },
    catalog: (tenant) => registry.catalog(tenant),
    stop: () =>
      (stopped ??= (async () => {
        unwatchUpstreams();
        await operatorServers.unsubscribe();
        await served.stop();
        await Promise.all(subscriptions.map((s) => s.unsubscribe()));
        await policies.stop();
        stopWorkflowAnnounces();
        await workflowWatch.stop();
        await runTable.stop();
        await sessions.stop();
        await cancellations.stop();
        await heartbeat.stop();
        const all = [...upstreams.values()];
        upstreams.clear();
        await Promise.all(all.map((u) => u.stop()));
        await Promise.all([egressFetch, ...launchedFetches.values()].map((f) => f.close()));
        await tenantSettings.stop();
      })()),
  };
}
