import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import express from 'express';
import {
  MemoryBus,
  PunkError,
  TrackedBus,
  createLogger,
  errorMessage,
  listenOptionsOf,
  listenHealth,
  formatManifestError,
  loadManifestDirectory,
  openDatabase,
  streams,
  validateWorkflowCatalog,
  workflowCatalogOf,
  OWNER_ONLY_DIRECTORY_MODE,
  type Database,
  type LoadedWorkflow,
  type ManifestError,
  type McpServer,
  type PunkConfig,
  type ServerCatalog,
} from '@punk/lib';
import { startTracing } from '@punk/lib';
import { destinationPolicyOf, startGateway } from '@punk/gateway';
import { embeddedKeyring } from './encryption-key.js';
import { localGovernance } from './local-governance.js';
import { startGovernance } from '@punk/governance';
import { startLedger } from '@punk/ledger';
import { ApiKeyStore, confinedTenant, createFront, frontOptionsOf } from '@punk/mcp-front';

/**
 * The servers' working directories of data directory `dataDir`, beside it and its own: `servers` for the default
 * `.punk/data` (`.punk/servers`), else `<name>-servers` (`--data run/a` and `--data run/b` get `run/a-servers` and
 * `run/b-servers`, so two `punk up` in one parent share no server files).
 */
export function serversDirOf(dataDir: string): string {
  const full = resolve(dataDir);
  const name = basename(full);
  return join(dirname(full), name === 'data' ? 'servers' : `${name}-servers`);
}

/** Options of the all-in-one process, beyond the shared configuration. */
export interface EmbeddedOptions {
  config: PunkConfig;
  /** PGlite directory; `null` keeps the database and the servers' working directories in temporary directories removed at stop (`--ephemeral`). Ignored with `config.databaseUrl`. */
  dataDir: string | null;
}

/** A running all-in-one Punk. */
export interface EmbeddedPunk {
  /** Base URL of the HTTP listener, such as `http://127.0.0.1:4100`. */
  baseUrl: string;
  /** Servers loaded from the manifests at start (a reload of the directory serves its changes live). */
  servers: McpServer[];
  /** Problems found in the manifests (those documents are not served). */
  manifestErrors: ManifestError[];
  /** The valid McpWorkflows of the manifests directory (published to bucket `PUNK_MCP_WORKFLOWS`, served by the gateway). */
  workflows: LoadedWorkflow[];
  /** What the gateway knows of each server now (state, last error): `starting` while its first start runs. */
  catalog(): ServerCatalog[];
  /** Resolves once every server has either connected or failed its first start (each within its start timeout). */
  serversStarted(): Promise<void>;
  /** Stops everything, in the order that loses nothing: HTTP, front, gateway (and its children), governance, ledger (after it drained), database, bus. */
  close(): Promise<void>;
}

/**
 * Starts Punk in one process on embedded defaults: the in-process bus, PGlite
 * (or Postgres with `PUNK_DATABASE_URL`), and the McpServer manifests'
 * servers as local child processes. The same service code runs distributed
 * over NATS. The HTTP port is bound first, so a busy port fails before
 * anything else starts; `/readyz` answers 503 until the database, bus,
 * gateway and front are up. It resolves without waiting for the servers'
 * first starts: what is ready is served at once, and a slow server reports
 * `starting` until it is ready or has failed (see `serversStarted`).
 *
 * @throws Error when the port cannot be bound, the manifest directory cannot be
 *   read, or the database cannot be opened (PunkError `DatabaseLocked` when another
 *   process holds the data directory); PunkError `InvalidConfig` at once when the `PUNK_AUTH_*` settings do not fit together.
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedPunk> {
  const { config } = options;
  // Endpoint and auth options fit together or start-up stops here, before anything runs.
  const frontOptions = frontOptionsOf(config);
  const logFor = (component: string) => createLogger(component, config.logLevel);
  const log = logFor('punk');
  const stops: Array<() => Promise<void>> = [];
  const tracing = await startTracing('up');
  stops.push(() => tracing.shutdown());
  const stopAll = async () => {
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        log.error({ err: error }, 'error while stopping');
      }
    }
    stops.length = 0;
  };

  let ready: (() => Promise<void>) | undefined;
  const http = await listenHealth(
    config.host,
    config.port,
    async () => {
      if (!ready) throw new Error('starting');
      await ready();
    },
    'pass --port',
    listenOptionsOf(config),
  );
  stops.push(() => http.close());

  try {
    const manifestDir = resolve(config.manifests);
    const loaded = await loadManifestDirectory(manifestDir, config.tenant).catch((error: unknown) => {
      throw new PunkError(
        'InvalidConfig',
        `PUNK_MANIFESTS / --manifests: cannot read the manifest directory ${manifestDir}: ${errorMessage(error)}`,
      );
    });
    for (const error of loaded.errors) log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
    const servers = loaded.servers.map((entry) => entry.server);
    /** The servers served now: those of the start, then those of the last reload that changed them. */
    let current = servers;

    const dataDir = config.databaseUrl ? null : options.dataDir === null ? null : resolve(options.dataDir);
    const ephemeral = !config.databaseUrl && options.dataDir === null;
    // Ephemeral: the database in a temporary directory removed at stop, not in PGlite's in-memory file system, which
    // keeps each file as one typed array regrown by copying as the ledger grows (more CPU per call and more garbage
    // collection than the files of --data: docs/benchmarks.md). Removed after the database closed (stops run reversed).
    const pgliteDir = ephemeral ? await mkdtemp(join(tmpdir(), 'punk-db-')) : dataDir;
    if (ephemeral) stops.push(() => rm(pgliteDir!, { recursive: true, force: true }));
    const db: Database = await openDatabase({
      ...(config.databaseUrl && { url: config.databaseUrl }),
      dataDir: pgliteDir,
      log: logFor('db'),
    });
    stops.push(() => db.close());
    // Tracked as in a service process: bus metrics (lib metrics/bus.ts) are recorded here too. With a data directory
    // (opened and locked above) an event is in its journal before the append that carries it resolves, and committed
    // by the ledger in batches after; without one, the append waits for the commit. At most ledgerMaxPending wait.
    // Ephemeral: nothing outlives the process, so appends do not wait for the ledger's commit either, and the
    // ledger's API waits for what was appended before each read instead.
    const memoryBus = new MemoryBus(logFor('bus'), {
      maxPayloadBytes: config.maxResultBytes,
      maxPending: config.ledgerMaxPending,
      journalDir: dataDir ?? undefined,
      ephemeral,
    });
    const bus = new TrackedBus(memoryBus);
    await bus.ensureStream(streams.ledger);
    stops.push(() => bus.close());
    if (ephemeral) {
      log.warn(
        'ephemeral run: the database is in a temporary directory removed at exit, so the ledger, runs, API keys, registrations and credentials are lost when this process ends; pass --data <dir> to keep them',
      );
    }

    // A tenant admin reads its own tenant's runs (the front's guard, mounted before the router, resolves it); group
    // commit: every event waiting when a transaction starts goes into it.
    const ledger = await startLedger({
      bus,
      db,
      log: logFor('ledger'),
      confinedTenant,
      maxBatch: config.ledgerMaxPending,
      caughtUp: () => memoryBus.caughtUp(streams.ledger.name),
    });
    stops.push(() => ledger.stop());
    // Policies first, so every deciding service starts with them; credentials once the gateway serves its vault.
    const local = localGovernance({
      bus,
      manifestDir,
      tenant: config.tenant,
      log: logFor('manifests'),
      // Called on a reload only, once the gateway below serves.
      checkWorkflow: (workflow) => {
        const namespace = workflow.metadata.namespace ?? config.tenant;
        return validateWorkflowCatalog(workflow, workflowCatalogOf(gateway.catalog(namespace), namespace));
      },
      // McpServer documents reload live, as the others: added ones start, changed ones restart, removed ones stop.
      applyServers: async (next) => {
        current = next;
        await gateway.setServers(next);
        await gateway.ready();
      },
    });
    await local.publishPolicies(loaded);
    const governance = await startGovernance({
      bus,
      log: logFor('governance'),
      db,
      adminScopes: [config.authAdminScope, config.authPlatformAdminScope],
    });
    stops.push(() => governance.stop());
    let workDir: string;
    if (options.dataDir === null) {
      workDir = await mkdtemp(join(tmpdir(), 'punk-servers-'));
      stops.push(() => rm(workDir, { recursive: true, force: true }));
    } else {
      workDir = serversDirOf(options.dataDir);
      // The servers' own files are in there: owner-only, as the data directory is.
      await mkdir(workDir, { recursive: true, mode: OWNER_ONLY_DIRECTORY_MODE });
      await chmod(workDir, OWNER_ONLY_DIRECTORY_MODE);
    }
    const gateway = await startGateway({
      bus,
      log: logFor('gateway'),
      db,
      servers,
      // One machine, one user: a registered stdio server runs as a child of this process, as the manifests' do.
      allowStdioRegistrations: true,
      workDir,
      startTimeoutMs: config.serverStartTimeoutMs,
      callTimeoutMs: config.callTimeoutMs,
      maxResultBytes: config.maxResultBytes,
      env: { PUNK_MANIFEST_DIR: manifestDir },
      upstream: {
        idleTimeoutMs: config.upstreamIdleTimeoutMs,
        maxConcurrentCalls: config.upstreamMaxConcurrentCalls,
        maxQueuedCalls: config.upstreamMaxQueuedCalls,
        queueTimeoutMs: config.upstreamQueueTimeoutMs,
        maxCallsPerPrincipal: config.upstreamMaxCallsPerPrincipal,
      },
      egress: destinationPolicyOf(config),
      keyring: await embeddedKeyring(config, options.dataDir === null ? null : resolve(options.dataDir)),
      toolPinning: config.toolPinning,
      workflowLimits: {
        maxNodes: config.workflowMaxNodes,
        maxRunMs: config.workflowMaxRunMs,
        maxResultBytes: config.workflowMaxResultBytes,
      },
    });
    stops.push(() => gateway.stop());
    // The credentials' errors are manifest errors too: the banner counts every line logged.
    const credentialErrors = await local.start(loaded);
    stops.push(() => local.stop());
    const front = await createFront({
      bus,
      log: logFor('mcp-front'),
      tenant: config.tenant,
      ...frontOptions,
      // The in-process bus keeps nothing across a restart; the database keeps the API keys.
      ...(frontOptions.auth && { apiKeys: await ApiKeyStore.inDatabase(db, logFor('mcp-front')) }),
      // One process serves every retry, so a random key needs no sharing.
      sessionSigningKey: config.sessionSigningKey ?? randomBytes(32).toString('base64url'),
    });
    stops.push(() => front.close());

    const app = express();
    app.disable('x-powered-by');
    app.use(front.router);
    // With PUNK_AUTH_MODE=on the ledger API is for admins, as the front's own APIs are.
    app.use('/api/v1', front.adminOnly, ledger.router);
    app.use((req, res) => {
      res
        .status(404)
        .set('Cache-Control', 'no-store')
        .json({ error: { code: 'NotFound', message: `no route for ${req.method} ${req.path}` } });
    });
    http.setHandler(app);
    ready = async () => {
      await db.ping();
      if (!bus.isConnected()) throw new Error('the bus is closed');
    };
    return {
      baseUrl: http.url,
      servers,
      manifestErrors: [...loaded.errors, ...credentialErrors],
      workflows: loaded.workflows,
      catalog: () => [...new Set(current.map((s) => s.metadata.namespace ?? config.tenant))].flatMap((tenant) => gateway.catalog(tenant)),
      serversStarted: () => gateway.ready(),
      close: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
