/**
 * Shared set-up of the distributed tests: a tenant of their own, a manifest
 * directory holding the `tally` fixture server, a scratch Postgres database,
 * and a NATS client to drive the gateway as mcp-front does.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { NatsBus, createLogger, requestGateway, type Principal } from '@punk/lib';
import { removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

/** URL of the Postgres server the tests use (`PUNK_TEST_DATABASE_URL`). */
export const testServerUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A uniquely named database `punk_test_<random>`, dropped by `drop()`. */
export async function scratchDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `punk_test_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: testServerUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(testServerUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** A tenant, a manifest directory with the `tally` server in it, and the file the server tallies calls in. */
export interface TallySetup {
  tenant: string;
  manifestDir: string;
  tallyFile: string;
  /** Lines of the tally file (`<tool> <what> <pid> <ppid>`). */
  lines(): Promise<string[]>;
  /** SIGKILLs every tally server process still running (orphans of a killed gateway). */
  killServers(): Promise<void>;
}

/** `punk up` serving the tally fixture (its tenant as `PUNK_TENANT`), with `env` besides. */
export interface PunkOnTally {
  setup: TallySetup;
  punk: RunningPunk;
  /** Stops Punk, kills what is left of the tally servers and removes the manifest directory. */
  stop(): Promise<void>;
}

/** Starts {@link PunkOnTally}; when `punk up` does not start, the fixture is removed before the error is thrown. */
export async function punkOnTally(env: Record<string, string> = {}): Promise<PunkOnTally> {
  const setup = await tallySetup();
  const cleanUp = async () => {
    await setup.killServers();
    await removeDir(setup.manifestDir);
  };
  let punk: RunningPunk;
  try {
    punk = await startPunk({ manifestDir: setup.manifestDir, env: { PUNK_TENANT: setup.tenant, ...env } });
  } catch (error) {
    await cleanUp();
    throw error;
  }
  return {
    setup,
    punk,
    stop: async () => {
      await punk.stop();
      await cleanUp();
    },
  };
}

/** Writes an McpServer manifest `tally` (tenant `t-<random>`) running e2e/fixtures/tally.mjs, in `sessionMode` (default shared). */
export async function tallySetup(options: { sessionMode?: 'shared' | 'per-client' } = {}): Promise<TallySetup> {
  const tenant = `t-${randomBytes(4).toString('hex')}`;
  const manifestDir = await mkdtemp(join(tmpdir(), 'punk-dist-'));
  const tallyFile = join(manifestDir, 'tally.log');
  await writeFile(tallyFile, '');
  await writeFile(
    join(manifestDir, 'tally.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: tally, namespace: ${tenant} }
spec:
  image: local/tally
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/fixtures/tally.mjs'))}]
  env: [{ name: TALLY_FILE, value: ${JSON.stringify(tallyFile)} }]
  sessionMode: ${options.sessionMode ?? 'shared'}
  tools:
    overrides:
      - { name: read_slowly, sideEffectLevel: 1 }
      - { name: charge, sideEffectLevel: 3 }
      - { name: count, sideEffectLevel: 2 }
`,
  );
  const lines = async () => (await readFile(tallyFile, 'utf8')).split('\n').filter(Boolean);
  return {
    tenant,
    manifestDir,
    tallyFile,
    lines,
    killServers: async () => {
      for (const line of await lines()) {
        const [tool, what, pid] = line.split(' ');
        if (tool !== 'server' || what !== 'ready') continue;
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

/** Connects a test's own NATS client, as mcp-front would. */
export function testBus(url: string): Promise<NatsBus> {
  return NatsBus.connect({ url, name: `punk-test-${process.pid}`, log: createLogger('test-bus', 'silent') });
}

/** Calls a tool of the tally server through the gateway over the bus. */
export function callTally(
  bus: NatsBus,
  tenant: string,
  name: string,
  args: Record<string, unknown>,
  timeoutMs = 10_000,
  sessionId?: string,
): Promise<unknown> {
  const principal: Principal = { subject: 'test', tenant, groups: [] };
  return requestGateway(
    bus,
    {
      method: 'tools/call',
      tenant,
      server: 'tally',
      principal,
      runId: randomUUID(),
      name,
      arguments: args,
      ...(sessionId !== undefined && { sessionId }),
    },
    timeoutMs,
  );
}

/**
 * What the distributed tests run their service processes in: a nats-server of their own, a scratch Postgres
 * database (the gateway's registry and the ledger), and the `tally` manifest (tallySetup); `env` is what every
 * service process gets.
 */
export interface TallyWorld {
  nats: OwnNats;
  db: { url: string; drop(): Promise<void> };
  setup: TallySetup;
  /** `PUNK_NATS_URL`, `PUNK_DATABASE_URL`, `PUNK_MANIFESTS` and `PUNK_TENANT`. */
  env: Record<string, string>;
  /** Stops the nats-server, drops the database and removes the manifest directory (stop the services first). */
  stop(): Promise<void>;
}

/** Starts a {@link TallyWorld}. */
export async function tallyWorld(options: { sessionMode?: 'shared' | 'per-client' } = {}): Promise<TallyWorld> {
  const nats = await startOwnNats();
  const db = await scratchDatabase();
  const setup = await tallySetup(options.sessionMode ? { sessionMode: options.sessionMode } : {});
  return {
    nats,
    db,
    setup,
    env: { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url, PUNK_MANIFESTS: setup.manifestDir, PUNK_TENANT: setup.tenant },
    async stop() {
      await nats.stop();
      await db.drop();
      await removeDir(setup.manifestDir);
    },
  };
}
