/**
 * `punk cluster`: the distributed topology on one machine, every service a
 * separate OS process against local NATS and Postgres, behind a round-robin
 * proxy (see docs/distributed.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  NatsBus,
  PunkError,
  createLogger,
  describeDatabaseUrl,
  errorMessage,
  formatManifestError,
  loadManifestDirectory,
  listenOptionsOf,
  openDatabase,
  catalogReplySchema,
  deadlines,
  parseMessage,
  requestGateway,
  subjects,
  type Logger,
  type ManifestError,
  type PunkConfig,
  type ServerCatalog,
} from '@punk/lib';
import { freePort } from '@punk/gateway';
import { startClusterIdle, type ClusterIdle } from './cluster-idle.js';
import { clusterServers } from './cluster-servers.js';
import { startProxy, type Proxy } from './proxy.js';
import { KEY_FILE, localEncryptionKey } from './encryption-key.js';
import { localGovernance, type LocalGovernance } from './local-governance.js';
import { NODE_FLAGS } from './node-flags.js';

/** Default `PUNK_NATS_URL` of the cluster. */
export const CLUSTER_NATS_URL = 'nats://127.0.0.1:4222';
/** Default `PUNK_DATABASE_URL` of the cluster (created when missing). */
export const CLUSTER_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/punk';

/** How many replicas of each service `punk cluster` runs. */
export const TOPOLOGY = { 'mcp-front': 2, gateway: 2, governance: 1, ledger: 2 } as const;
type ServiceName = keyof typeof TOPOLOGY;

const servicesDir = fileURLToPath(new URL('../../', import.meta.url));
/** Entrypoint of a service: `services/<name>/dist/main.js`. */
export const entrypointOf = (name: ServiceName) => join(servicesDir, name, 'dist', 'main.js');

/** A running cluster. */
export interface Cluster {
  /** The proxy's base URL (`http://127.0.0.1:4100`). */
  url: string;
  /** What is missing from the topology, in sentences (e.g. no mcp-front entrypoint yet). */
  gaps: string[];
  /** Each server as a gateway reported it once every service was ready (state, last error), as `punk up`'s banner lists them. */
  servers: ServerCatalog[];
  /** Problems found in the manifests (those documents are not served). */
  manifestErrors: ManifestError[];
  /** Stops the proxy, then every service (SIGTERM, SIGKILL after 15 s), then the servers. */
  stop(): Promise<void>;
}

/**
 * Creates the cluster's database when it does not exist.
 * @throws PunkError `DatabaseUnavailable` naming host, port and database when Postgres cannot be reached.
 */
export async function ensureDatabase(url: string, log: Logger): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
    throw new PunkError('InvalidConfig', `PUNK_DATABASE_URL names database "${name}"; use letters, digits and _`);
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const db = await openDatabase({ url: admin.toString(), log }).catch((error: unknown) => {
    throw new PunkError(
      'DatabaseUnavailable',
      `Postgres at ${describeDatabaseUrl(url)} is unreachable (${errorMessage(error)}); start it or set PUNK_DATABASE_URL`,
    );
  });
  try {
    const found = await db.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      await db.query(`CREATE DATABASE ${name}`);
      log.info({ database: name }, 'created the cluster database');
    }
  } finally {
    await db.close();
  }
}

/**
 * What a gateway replica reports of each server of `tenants` (`catalog/list` over the bus): the banner's list.
 * A gateway that does not answer is logged and leaves the list empty.
 */
async function serverStates(natsUrl: string, tenants: string[], log: Logger): Promise<ServerCatalog[]> {
  const bus = await NatsBus.connect({ url: natsUrl, name: 'punk-cluster-banner', log });
  try {
    const replies = await Promise.all(
      tenants.map(async (tenant) =>
        parseMessage(
          catalogReplySchema,
          subjects.gatewayCall,
          await requestGateway(bus, { method: 'catalog/list', tenant }, deadlines.catalogMs),
        ),
      ),
    );
    return replies.flatMap((reply) => reply.servers);
  } catch (error) {
    log.warn({ err: errorMessage(error) }, "could not ask a gateway for the servers' states");
    return [];
  } finally {
    await bus.close();
  }
}

/** Copies a child's output line by line to ours, each line prefixed with `[name] `. */
function prefixOutput(name: string, child: ChildProcess): void {
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    if (stream) createInterface({ input: stream }).on('line', (line) => out.write(`[${name}] ${line}\n`));
  }
}

async function waitReady(url: string, name: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new PunkError(
        'ClusterStartFailed',
        `${name} exited (${child.exitCode ?? child.signalCode}) before it was ready; see its lines above`,
      );
    const ok = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) throw new PunkError('ClusterStartFailed', `${name} was not ready within ${timeoutMs} ms (${url}/readyz)`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Starts the cluster: checks NATS and Postgres (creating the database), starts
 * the local HTTP example servers once, then the services (2 mcp-front, 2
 * gateway, 1 governance, 2 ledger) on free ports, waits for each `/readyz`,
 * and listens with the proxy on `config.host:config.port`.
 *
 * @throws PunkError `BusUnavailable` / `DatabaseUnavailable` naming what is unreachable;
 *   `ClusterStartFailed` naming the process that did not become ready (everything started is stopped first).
 */
export async function startCluster(config: PunkConfig, natsUrl: string, databaseUrl: string): Promise<Cluster> {
  const log = createLogger('cluster', config.logLevel);
  const probe = await NatsBus.connect({ url: natsUrl, name: 'punk-cluster-probe', log });
  await probe.close();
  await ensureDatabase(databaseUrl, log);

  const children: Array<{ name: string; child: ChildProcess; service: boolean }> = [];
  const tempDir = await mkdtemp(join(tmpdir(), 'punk-cluster-'));
  let proxy: Proxy | undefined;
  // The manifests' documents reach the services over NATS: the servers through bucket PUNK_MCP_SERVERS, the rest as under punk up.
  const manifestsBus = await NatsBus.connect({ url: natsUrl, name: 'punk-cluster-manifests', log });
  let local: LocalGovernance | undefined;
  let idle: ClusterIdle | undefined;
  let stopping = false;
  /** Server processes stopped by a reload of the manifests directory: their exit is expected. */
  const retired = new Set<ChildProcess>();
  const launch = (
    name: string,
    command: string,
    args: string[],
    env: Record<string, string>,
    service: boolean,
    cwd?: string,
  ): ChildProcess => {
    // Own process group: a terminal's Ctrl-C reaches only `punk cluster`, which then sends each
    // service one SIGTERM (a second signal would make a service exit without draining).
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true, ...(cwd && { cwd }) });
    prefixOutput(name, child);
    child.on('exit', (code, signal) => {
      if (!stopping && !retired.has(child)) log.error({ process: name, code, signal }, `${name} exited unexpectedly`);
    });
    children.push({ name, child, service });
    return child;
  };
  /** Sends `child` SIGTERM (SIGKILL after 15 s); resolves once it exited. */
  const terminate = async (child: ChildProcess): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited.finally(() => clearTimeout(timer));
  };
  const stop = async () => {
    stopping = true;
    await proxy?.close();
    await local?.stop();
    await idle?.stop();
    await manifestsBus.close();
    // Services first (they drain), then the servers they called.
    for (const group of [true, false]) await Promise.all(children.filter((c) => c.service === group).map(({ child }) => terminate(child)));
    await rm(tempDir, { recursive: true, force: true });
  };

  try {
    const manifestDir = resolve(config.manifests);
    const loaded = await loadManifestDirectory(manifestDir, config.tenant);
    for (const error of loaded.errors) log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
    const servers = clusterServers({
      bus: manifestsBus,
      log,
      manifestDir,
      workDir: join(tempDir, 'servers'),
      startTimeoutMs: config.serverStartTimeoutMs,
      start: (name, command, args, env, cwd) => launch(name, command, args, env, false, cwd),
      stop: (child) => {
        retired.add(child);
        return terminate(child);
      },
    });
    // Before the gateways start: each serves the bucket's servers once they have started (or failed) a first time.
    await servers.apply(loaded.servers.map((s) => s.server));
    // The gateways read no manifests (their servers are the bucket's): an empty directory.
    const gatewayManifests = join(tempDir, 'manifests');
    await mkdir(gatewayManifests);

    const gaps: string[] = [];
    // Every front replica signs requestState with the same key, so a 2026-07-28 retry may reach either.
    const signingKey = config.sessionSigningKey ?? randomBytes(32).toString('base64url');
    // Every gateway replica decrypts the credentials the others stored, run after run (the database stays).
    const encryptionKey = config.encryptionKey ?? (await localEncryptionKey(join(resolve(config.dataDir), KEY_FILE)));
    const common = {
      ...process.env,
      PUNK_NATS_URL: natsUrl,
      PUNK_HOST: '127.0.0.1',
      PUNK_TENANT: config.tenant,
      PUNK_LOG_LEVEL: config.logLevel,
      PUNK_SESSION_SIGNING_KEY: signingKey,
      PUNK_ENCRYPTION_KEY: encryptionKey,
      // Every client connection reaches the replicas from the proxy's one address: the proxy bounds them per client.
      PUNK_MAX_CONNECTIONS_PER_ADDRESS: String(config.maxConnections),
    };
    const started: Array<{ name: string; url: string; child: ChildProcess; service: ServiceName }> = [];
    // Ports first: with authentication on each front passes the ledger API on to a ledger replica (PUNK_LEDGER_URL).
    const ports = new Map<string, number>();
    for (const [service, replicas] of Object.entries(TOPOLOGY) as Array<[ServiceName, number]>)
      for (let i = 1; i <= replicas; i++) ports.set(`${service}-${i}`, await freePort());
    const ledgerOf = (i: number) => `http://127.0.0.1:${String(ports.get(`ledger-${String(((i - 1) % TOPOLOGY.ledger) + 1)}`))}`;
    for (const [service, replicas] of Object.entries(TOPOLOGY) as Array<[ServiceName, number]>) {
      const entrypoint = entrypointOf(service);
      if (!existsSync(entrypoint)) {
        gaps.push(`${service}: ${entrypoint} does not exist yet, so no ${service} replica runs (the proxy answers 503 on its paths)`);
        continue;
      }
      for (let i = 1; i <= replicas; i++) {
        const name = `${service}-${i}`;
        const port = ports.get(name)!;
        const env = {
          ...common,
          ...(service === 'mcp-front' && config.authMode === 'on' && { PUNK_LEDGER_URL: ledgerOf(i) }),
          PUNK_PORT: String(port),
          PUNK_INSTANCE_ID: name,
          PUNK_DATABASE_URL: databaseUrl,
          PUNK_MANIFESTS: gatewayManifests,
        };
        started.push({
          name,
          url: `http://127.0.0.1:${port}`,
          child: launch(name, process.execPath, [...NODE_FLAGS, entrypoint], env, true),
          service,
        });
      }
    }
    await Promise.all(started.map((s) => waitReady(s.url, s.name, s.child, 120_000)));
    // spec.idle: the operator's part, played here once the services run (the ledger records each sleep and wake):
    // servers unused for their scaleToZeroAfter stop, and a call wakes them.
    idle = await startClusterIdle({ bus: manifestsBus, log, servers });
    // The manifests' documents, as under punk up: published and applied over NATS, reloaded on change (servers too).
    local = localGovernance({
      bus: manifestsBus,
      manifestDir,
      tenant: config.tenant,
      log,
      applyServers: (next) => servers.apply(next),
    });
    await local.publishPolicies(loaded);
    const credentialErrors = started.some((s) => s.service === 'gateway') ? await local.start(loaded) : [];
    const backends = {
      ledgers: started.filter((s) => s.service === 'ledger').map((s) => s.url),
      fronts: started.filter((s) => s.service === 'mcp-front').map((s) => s.url),
    };
    // A replica that dies leaves the rotation, so the proxy stops sending it requests.
    for (const s of started) {
      s.child.once('exit', () => {
        for (const list of [backends.ledgers, backends.fronts]) {
          const index = list.indexOf(s.url);
          if (index !== -1) list.splice(index, 1);
        }
      });
    }
    const { connections } = listenOptionsOf(config);
    proxy = await startProxy({
      host: config.host,
      port: config.port,
      backends,
      log,
      ledgerApi: config.authMode === 'on' ? 'fronts' : 'ledgers',
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      ...(connections && { connections }),
    });
    const states = started.some((s) => s.service === 'gateway')
      ? await serverStates(natsUrl, [...new Set(loaded.servers.map((s) => s.server.metadata.namespace ?? config.tenant))], log)
      : [];
    return { url: proxy.url, gaps, servers: states, manifestErrors: [...loaded.errors, ...credentialErrors], stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
