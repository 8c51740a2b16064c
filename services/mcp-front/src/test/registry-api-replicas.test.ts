/**
 * A registry change reaches every replica: two gateway replicas on one NATS (a nats-server of the test's own)
 * and one scratch Postgres database, a front, and a live 2025-era client session. When an admin replaces a
 * registration, the replica that did not handle the request reloads it from the database and restarts its
 * pooled connection (its server process is replaced), and the client hears
 * `notifications/tools/list_changed`; a deletion stops the server on both replicas.
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, readdir, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { buckets, createLogger, DEFAULT_SESSION_TTL_MS, NatsBus, streams, subjects, type RegistryChanged } from '@punk/lib';
import { startNats, startReplica, stopReplica, type Replica } from './replica-harness.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';

const log = createLogger('registry-replicas-test', 'silent');
const everythingBin = resolve(
  fileURLToPath(new URL('.', import.meta.url)),
  '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
);

/** Polls until `condition` holds, or fails naming `what`. */
async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

/** Pids of the live processes whose working directory is under `dir` (the server processes of one gateway replica). */
async function processesUnder(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cwd = await readlink(`/proc/${entry}/cwd`).catch(() => undefined);
    if (cwd?.startsWith(dir)) pids.push(Number(entry));
  }
  return pids;
}

interface GatewayReplica {
  instanceId: string;
  bus: NatsBus;
  gateway: Gateway;
  workDir: string;
}

describe('registry changes across replicas', () => {
  const tenant = `rep-${randomBytes(4).toString('hex')}`;
  let nats: { url: string; stop(): Promise<void> };
  let core: NatsBus;
  let database: ScratchDb;
  let governance: GovernanceService;
  let root: string;
  const gateways: GatewayReplica[] = [];
  let front: Replica;
  const changes: Array<{ change: RegistryChanged; origin: string | undefined }> = [];

  before(async () => {
    nats = await startNats(log);
    core = await NatsBus.connect({ url: nats.url, name: 'core', log });
    await core.ensureStream(streams.ledger);
    database = await openScratchDb(log);
    governance = await startGovernance({ bus: core, log });
    root = await mkdtemp(join(tmpdir(), 'punk-registry-replicas-'));
    for (const instanceId of ['gw-a', 'gw-b']) {
      const bus = await NatsBus.connect({ url: nats.url, name: instanceId, log });
      const workDir = join(root, instanceId);
      const gateway = await startGateway({
        egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
        bus,
        log,
        db: database.db,
        servers: [],
        workDir,
        startTimeoutMs: 60_000,
        callTimeoutMs: 30_000,
        instanceId,
        allowStdioRegistrations: true,
      });
      gateways.push({ instanceId, bus, gateway, workDir });
    }
    await core.subscribe(
      subjects.registryChanged,
      (data, info) => void changes.push({ change: data as RegistryChanged, origin: info.headers['Punk-Origin'] }),
    );
    front = await startReplica(nats.url, tenant, 'front', log);
  });

  after(async () => {
    if (front) await stopReplica(front);
    for (const g of gateways) {
      await g.gateway.stop();
      await g.bus.close();
    }
    await governance?.stop();
    await core?.close();
    await nats?.stop();
    await database?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${front.base}/api/v1${path}`, {
      method,
      ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
  const servedBy = (g: GatewayReplica) => g.gateway.catalog(tenant).find((s) => s.name === 'everything');

  it('a replacement on one replica restarts the pooled server on the other, and a live 2025 session hears list_changed', async () => {
    const body = { name: 'everything', type: 'stdio', command: process.execPath, args: [everythingBin, 'stdio'] };
    assert.equal((await api('POST', '/mcp/servers', body)).status, 201);
    await until('both replicas serve the registration', () => gateways.every((g) => servedBy(g)?.state === 'ready'));
    const before = new Map<string, number[]>();
    for (const g of gateways) {
      const pids = await processesUnder(g.workDir);
      assert.equal(pids.length, 1, `${g.instanceId} runs one server process`);
      before.set(g.instanceId, pids);
    }

    const client = new Client({ name: 'registry-replicas-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${front.base}/mcp`));
    await client.connect(transport);
    try {
      assert.ok((await client.listTools()).tools.some((t) => t.name === 'everything__echo'));
      const heard = new Promise<void>((done) => client.setNotificationHandler('notifications/tools/list_changed', () => done()));
      const sessions = await core.keyValue(buckets.sessions(DEFAULT_SESSION_TTL_MS));
      await until('the session GET stream is open', async () => {
        const entry = await sessions.get(transport.sessionId!);
        return typeof (entry?.value as { stream?: unknown } | undefined)?.stream === 'string';
      });

      const replaced = await api('PUT', '/mcp/servers/everything', { ...body, tools: { deny: ['echo'] } });
      assert.equal(replaced.status, 200);
      await until('the update is broadcast', () => changes.some((c) => c.change.server === 'everything' && c.change.change === 'updated'));
      const origin = changes.find((c) => c.change.server === 'everything' && c.change.change === 'updated')!.origin;
      const other = gateways.find((g) => g.instanceId !== origin)!;
      assert.ok(origin && other, `the update came from one replica (${origin})`);
      assert.equal(changes.filter((c) => c.change.change === 'updated').length, 1, 'the other replica does not broadcast the change again');

      await until('the other replica serves the replaced registration', () => {
        const served = servedBy(other);
        return served?.state === 'ready' && !served.tools.some((t) => t.name === 'echo');
      });
      const [oldPid] = before.get(other.instanceId)!;
      await until('the other replica replaced its server process', async () => {
        const now = await processesUnder(other.workDir);
        return now.length === 1 && now[0] !== oldPid;
      });

      await Promise.race([
        heard,
        new Promise((_, reject) => setTimeout(() => reject(new Error('no notifications/tools/list_changed within 15 s')), 15_000)),
      ]);
      const { tools } = await client.listTools(undefined, { cacheMode: 'refresh' });
      assert.ok(!tools.some((t) => t.name === 'everything__echo'), "the session lists the replaced server's tools");
    } finally {
      await client.close();
    }

    assert.equal((await api('DELETE', '/mcp/servers/everything')).status, 204);
    await until('neither replica serves the deleted registration', () => gateways.every((g) => servedBy(g) === undefined));
    for (const g of gateways)
      await until(`${g.instanceId} stopped its server process`, async () => (await processesUnder(g.workDir)).length === 0);
  });
});
