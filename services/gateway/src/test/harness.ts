/** Test harness: a real MemoryBus with the ledger stream, governance, and a gateway over real servers. */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';
import type { TestContext } from 'node:test';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startGovernance } from '@punk/governance';
import {
  anonymousPrincipal,
  API_VERSION,
  createLogger,
  MemoryBus,
  mcpServerSchema,
  requestGateway,
  streams,
  subjects,
  type GatewayRequest,
  type LedgerEvent,
  type McpServer,
  type RegistryChanged,
} from '@punk/lib';
import {
  destinationPolicyOf,
  startGateway,
  type DestinationPolicy,
  type Gateway,
  type GatewayOptions,
  type Keyring,
  type UpstreamPoolOptions,
} from '../index.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';

/** Absolute path of a fixture server script. */
export function fixture(name: string): string {
  return resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures', name);
}

/** Absolute path of an installed package's file. */
export function installed(path: string): string {
  return resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../../node_modules', path);
}

/** A validated McpServer manifest. */
export function manifest(namespace: string, name: string, spec: Record<string, unknown>): McpServer {
  return mcpServerSchema.parse({ apiVersion: API_VERSION, kind: 'McpServer', metadata: { name, namespace }, spec });
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

const everythingBin = installed('@modelcontextprotocol/server-everything/dist/index.js');

/** Starts server-everything in `mode` on a free port (stopped after `t`); resolves with the port once it accepts connections. */
export async function startEverything(t: TestContext, mode: 'streamableHttp' | 'sse'): Promise<number> {
  const port = await freePort();
  const child = spawn(process.execPath, [everythingBin, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    child.kill();
    await exited;
  });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server-everything ${mode} exited: ${stderr}`);
    const listening = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (listening) return port;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Pids of every live descendant of this process (from /proc), but the server processes' watchdog (watchdog.ts). */
export async function descendantPids(root = process.pid): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue; // zombie: already exited
      if ((await readFile(`/proc/${entry}/cmdline`, 'utf8')).includes('watchdog-main.js')) continue;
      parents.set(Number(entry), Number(fields[1]));
    } catch {
      /* gone */
    }
  }
  const found: number[] = [];
  const walk = (pid: number) => {
    for (const [child, parent] of parents)
      if (parent === pid) {
        found.push(child);
        walk(child);
      }
  };
  walk(root);
  return found;
}

/** Polls until `condition` holds. */
export async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > until) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A running system under test. */
export interface Harness {
  tenant: string;
  bus: MemoryBus;
  gateway: Gateway;
  /** The gateway's scratch database. */
  database: ScratchDb;
  /** Every ledger event appended so far. */
  events: LedgerEvent[];
  /** Every registry change broadcast so far. */
  changes: RegistryChanged[];
  workDir: string;
  /** Sends a request on `punk.gateway.call` as the anonymous principal of the tenant. */
  call(request: Record<string, unknown>, timeoutMs?: number): Promise<unknown>;
  close(): Promise<void>;
}

/** Starts bus, ledger stream, governance and gateway for the given servers of a fresh tenant. */
export async function startHarness(
  makeServers: (tenant: string) => McpServer[],
  options: {
    startTimeoutMs?: number;
    callTimeoutMs?: number;
    upstream?: UpstreamPoolOptions;
    egress?: DestinationPolicy;
    allowStdioRegistrations?: boolean;
    keyring?: Keyring;
    /** `PUNK_MAX_RESULT_BYTES` of the bus and the gateway (default 32 MiB). */
    maxResultBytes?: number;
    /** Bounds of workflow runs (the gateway's defaults otherwise). */
    workflowLimits?: GatewayOptions['workflowLimits'];
  } = {},
): Promise<Harness> {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const log = createLogger('gateway-test', process.env.TEST_LOG_LEVEL ?? 'silent');
  const bus = new MemoryBus(log, options.maxResultBytes !== undefined ? { maxPayloadBytes: options.maxResultBytes } : {});
  await bus.ensureStream(streams.ledger);
  const events: LedgerEvent[] = [];
  const changes: RegistryChanged[] = [];
  const consumer = await bus.consume(streams.ledger.name, 'test-reader', async (batch) => {
    for (const m of batch) events.push(m.data as LedgerEvent);
  });
  await bus.subscribe(subjects.registryChanged, (data) => void changes.push(data as RegistryChanged));
  const database = await openScratchDb(log);
  const governance = await startGovernance({ bus, log, db: database.db });
  const workDir = await mkdtemp(join(tmpdir(), 'punk-gateway-'));
  const gateway = await startGateway({
    egress: options.egress ?? destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
    bus,
    log,
    db: database.db,
    servers: makeServers(tenant),
    workDir,
    startTimeoutMs: options.startTimeoutMs ?? 20_000,
    callTimeoutMs: options.callTimeoutMs ?? 30_000,
    env: { FIXTURES: fixture('') },
    ...(options.upstream && { upstream: options.upstream }),
    ...(options.allowStdioRegistrations !== undefined && { allowStdioRegistrations: options.allowStdioRegistrations }),
    ...(options.keyring && { keyring: options.keyring }),
    ...(options.maxResultBytes !== undefined && { maxResultBytes: options.maxResultBytes }),
    ...(options.workflowLimits && { workflowLimits: options.workflowLimits }),
  });
  return {
    tenant,
    bus,
    gateway,
    database,
    events,
    changes,
    workDir,
    call: (request, timeoutMs = 30_000) => {
      const full =
        request.method === 'catalog/list'
          ? { tenant, ...request }
          : { tenant, principal: anonymousPrincipal(tenant), runId: `run-${randomUUID()}`, ...request };
      return requestGateway(bus, full as GatewayRequest, timeoutMs);
    },
    close: async () => {
      await gateway.stop();
      await governance.stop();
      await consumer.stop();
      await bus.close();
      await database.close();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}
