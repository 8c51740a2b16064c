/**
 * What the multi-replica tests of mcp-front share: a nats-server of the
 * test's own on a free port, front replicas with their own NATS connection
 * and HTTP port, the server-everything manifest, and a whole replica set
 * (nats-server, gateway, governance and two fronts of a fresh tenant) to
 * start in `before` and stop in `after`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startGovernance, type GovernanceService } from '@punk/governance';
import {
  buckets,
  kvKey,
  mcpPolicySchema,
  mcpServerSchema,
  mcpServerSpecSchema,
  NatsBus,
  streams,
  type Logger,
  type McpPolicySpec,
  type McpServer,
} from '@punk/lib';
import express from 'express';
import { createFront, type Front, type FrontOptions } from '../index.js';

const fixtures = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures');

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Starts a nats-server with JetStream on a free port and a temporary store; resolves once it accepts connections. */
export async function startNats(log: Logger): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'punk-nats-'));
  const child: ChildProcess = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], {
    stdio: 'ignore',
  });
  const url = `nats://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      await (await NatsBus.connect({ url, name: 'probe', log })).close();
      break;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** One front replica: its base URL, the front, its own NATS connection and HTTP server. */
export interface Replica {
  base: string;
  front: Front;
  bus: NatsBus;
  http: HttpServer;
}

/**
 * Starts a front on its own NATS connection and port (1 MiB bodies, 30 s calls,
 * `retry:` 200 ms); `options` adds to or replaces those.
 */
export async function startReplica(
  url: string,
  tenant: string,
  name: string,
  log: Logger,
  options: Partial<FrontOptions> = {},
): Promise<Replica> {
  const bus = await NatsBus.connect({ url, name, log });
  const front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000, sseRetryMs: 200, ...options });
  const app = express();
  app.use(front.router);
  const http = await new Promise<HttpServer>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
  return { base: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, front, bus, http };
}

/** Closes the front, its HTTP server and its NATS connection. */
export async function stopReplica(replica: Replica): Promise<void> {
  await replica.front.close();
  replica.http.closeAllConnections();
  await new Promise((resolve) => replica.http.close(resolve));
  await replica.bus.close();
}

/** The McpServer of @modelcontextprotocol/server-everything over stdio. */
export function everything(name: string, namespace: string): McpServer {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace },
    spec: mcpServerSpecSchema.parse({ package: { name: '@modelcontextprotocol/server-everything' }, args: ['stdio'] }),
  };
}

/**
 * The McpServer `name` of fixtures/file-tools.mjs over stdio: its tools are the JSON file `<dir>/<name>-tools.json`
 * (written by the test, read at every listing), each call appends the tool's name to `<dir>/<name>-calls.log`.
 * `spec` adds to the manifest's spec (`tools`, say).
 */
export function fileToolsServer(name: string, namespace: string, dir: string, spec: Record<string, unknown> = {}): McpServer {
  return mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace },
    spec: {
      image: 'local/file-tools',
      command: [process.execPath, join(fixtures, 'file-tools.mjs')],
      env: [
        { name: 'TOOLS_FILE', value: join(dir, `${name}-tools.json`) },
        { name: 'CALLS_FILE', value: join(dir, `${name}-calls.log`) },
      ],
      ...spec,
    },
  });
}

/** What {@link startReplicaSet} starts. */
export interface ReplicaSetOptions {
  /** Names the tenant, `<prefix>-<8 hex digits>`, and the temporary work directory, `punk-<prefix>-…`. */
  prefix: string;
  /** The McpServers the gateway runs for `tenant`; `workDir` is the gateway's (removed on stop). */
  servers: (tenant: string, workDir: string) => McpServer[];
  /** McpPolicy specs of the tenant by name, published in bucket `PUNK_MCP_POLICIES` before anything starts; none when absent. */
  policies?: Record<string, Partial<McpPolicySpec>>;
  /** What both fronts add to or replace in {@link startReplica}'s options. */
  frontOptions?: (tenant: string) => Partial<FrontOptions>;
  /** How long the gateway waits for an upstream to start, in ms; 60 000 when absent. */
  startTimeoutMs?: number;
}

/** A started replica set: see {@link startReplicaSet}. */
export interface ReplicaSet {
  nats: { url: string; stop(): Promise<void> };
  /** The NATS connection of the gateway and governance, with the ledger stream ensured. */
  core: NatsBus;
  tenant: string;
  workDir: string;
  governance: GovernanceService;
  gateway: Gateway;
  /** The scratch database of the gateway and governance. */
  database: ScratchDb;
  /** Front replica `front-a`. */
  a: Replica;
  /** Front replica `front-b`. */
  b: Replica;
  /** Stops the fronts, gateway (and drops its database), governance, NATS connection and nats-server, and removes the work directory. */
  stop(): Promise<void>;
}

/**
 * Starts a nats-server of the test's own, a fresh tenant, governance and the gateway
 * (30 s calls) on one NATS connection with the ledger stream, waits until the gateway
 * is ready, then starts fronts `front-a` and `front-b` (see {@link startReplica}).
 * If any step throws, what was started is stopped again and the error is rethrown.
 */
export async function startReplicaSet(log: Logger, options: ReplicaSetOptions): Promise<ReplicaSet> {
  const started: Partial<ReplicaSet> = {};
  const stop = async (): Promise<void> => {
    if (started.a) await stopReplica(started.a);
    if (started.b) await stopReplica(started.b);
    await started.gateway?.stop();
    await started.governance?.stop();
    await started.database?.close();
    await started.core?.close();
    await started.nats?.stop();
    if (started.workDir) await rm(started.workDir, { recursive: true, force: true });
  };
  try {
    const tenant = (started.tenant = `${options.prefix}-${randomBytes(4).toString('hex')}`);
    const nats = (started.nats = await startNats(log));
    const core = (started.core = await NatsBus.connect({ url: nats.url, name: 'gateway-and-governance', log }));
    await core.ensureStream(streams.ledger);
    const workDir = (started.workDir = await mkdtemp(join(tmpdir(), `punk-${options.prefix}-`)));
    const policies = await core.keyValue(buckets.mcpPolicies);
    for (const [name, spec] of Object.entries(options.policies ?? {})) {
      const policy = { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpPolicy', metadata: { name, namespace: tenant }, spec };
      await policies.put(kvKey(tenant, name), mcpPolicySchema.parse(policy));
    }
    const database = (started.database = await openScratchDb(log));
    started.governance = await startGovernance({ bus: core, log, db: database.db });
    const gateway = (started.gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus: core,
      log,
      db: database.db,
      servers: options.servers(tenant, workDir),
      workDir,
      startTimeoutMs: options.startTimeoutMs ?? 60_000,
      callTimeoutMs: 30_000,
    }));
    await gateway.ready();
    const frontOptions = options.frontOptions?.(tenant) ?? {};
    started.a = await startReplica(nats.url, tenant, 'front-a', log, frontOptions);
    started.b = await startReplica(nats.url, tenant, 'front-b', log, frontOptions);
    return { ...(started as Omit<ReplicaSet, 'stop'>), stop };
  } catch (error) {
    await stop().catch(() => undefined); // the error to report is the one that stopped the start
    throw error;
  }
}
