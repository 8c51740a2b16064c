/**
 * The operator's servers, as every gateway replica serves them: a private NATS (bucket PUNK_MCP_SERVERS seen by
 * no other test run), a scratch Postgres database, two gateway replicas and governance. The operator's side is
 * played by writing bucket entries: a put is served (tools listed and called through the gateway), an update
 * restarts the server, a delete stops it, a bad entry is logged with the field and skipped; the manifests' server
 * stays served throughout, and the bucket's servers are read-only in the registry API.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startGovernance, type GovernanceService } from '@punk/governance';
import {
  anonymousPrincipal,
  buckets,
  kvKey,
  NatsBus,
  PunkError,
  requestGateway,
  streams,
  subjects,
  type KvStore,
  type Principal,
} from '@punk/lib';
import { destinationPolicyOf, startGateway, type Gateway } from '../index.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';
import { fixture, manifest, waitFor } from './harness.js';

const counter = (tenant: string, name: string, env: Record<string, string> = {}) =>
  manifest(tenant, name, {
    image: 'local/counter',
    command: [process.execPath, fixture('counter.mjs')],
    env: Object.entries(env).map(([n, value]) => ({ name: n, value })),
  });

describe('servers from bucket PUNK_MCP_SERVERS', () => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const admin: Principal = { subject: 'admin-alice', tenant, groups: [], scopes: ['punk:admin'] };
  const logs: string[] = [];
  const log = pino({ level: 'info' }, new Writable({ write: (chunk, _encoding, done) => (logs.push(String(chunk)), done()) }));
  let nats: PrivateNats;
  const buses: NatsBus[] = [];
  let database: ScratchDb;
  let governance: GovernanceService;
  const gateways: Gateway[] = [];
  let workDir: string;
  let kv: KvStore;

  const startReplica = async (instanceId: string) => {
    const bus = await NatsBus.connect({ url: nats.url, name: instanceId, log });
    buses.push(bus);
    const gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [counter(tenant, 'from-manifest')],
      workDir: join(workDir, instanceId),
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
      instanceId,
    });
    gateways.push(gateway);
    return gateway;
  };
  const put = (name: string, server: unknown, generation: number) => kv.put(kvKey(tenant, name), { server, generation });
  const call = (server: string, name: string) =>
    requestGateway(
      buses[0]!,
      {
        method: 'tools/call',
        tenant,
        server,
        principal: anonymousPrincipal(tenant),
        runId: `run-${randomUUID()}`,
        name,
        arguments: {},
      },
      30_000,
    ) as Promise<{
      content: { text: string }[];
    }>;
  const served = (gateway: Gateway, name: string) => gateway.catalog(tenant).some((c) => c.name === name && c.state === 'ready');
  const admin$ = (request: Record<string, unknown>) =>
    buses[0]!.request(subjects.gatewayAdmin, { tenant, principal: admin, ...request }, { timeoutMs: 30_000 }) as Promise<any>;

  before(async () => {
    nats = await startPrivateNats();
    workDir = await mkdtemp(join(tmpdir(), 'punk-managed-'));
    database = await openScratchDb(log);
    const bus = await NatsBus.connect({ url: nats.url, name: 'test-operator', log });
    buses.push(bus);
    await bus.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log });
    kv = await bus.keyValue(buckets.mcpServers);
    // Written before the first replica starts: it serves what the bucket holds when it comes up.
    await put('early', counter(tenant, 'early'), 1);
    await startReplica('gw-a');
  });

  after(async () => {
    if (process.env.DUMP_LOGS) for (const l of logs) process.stdout.write(l);
    for (const gateway of gateways) await gateway.stop();
    await governance?.stop();
    for (const bus of buses) await bus.close();
    await database?.close();
    await nats?.stop();
    await rm(workDir, { recursive: true, force: true });
  });

  it('serves what the bucket held at start, beside the manifest servers', async () => {
    const [gateway] = gateways;
    await gateway!.ready();
    assert.ok(served(gateway!, 'early'), 'the entry present at start is served');
    assert.ok(served(gateway!, 'from-manifest'), 'the manifest server is served too');
    assert.match((await call('early', 'count')).content[0]!.text, /^calls=1 /);
  });

  it('serves a put entry: its tools are listed and called through the gateway, read-only in the registry API', async () => {
    await put('counter', counter(tenant, 'counter'), 1);
    await waitFor(() => served(gateways[0]!, 'counter'), 20_000, 'counter served');
    const listing = (await requestGateway(buses[0]!, { method: 'catalog/list', tenant }, 10_000)) as {
      servers: { name: string; tools: { name: string }[] }[];
    };
    const tools = listing.servers.find((s) => s.name === 'counter')?.tools.map((t) => t.name);
    assert.ok(tools?.includes('count'), `tools of counter: ${String(tools)}`);
    assert.match((await call('counter', 'count')).content[0]!.text, /^calls=1 /);
    const { servers } = await admin$({ op: 'servers.list' });
    assert.equal(servers.find((s: { name: string }) => s.name === 'counter')?.managed, true);
    assert.deepEqual(
      servers.filter((s: { managed: boolean }) => s.managed).map((s: { name: string }) => s.name),
      ['counter', 'early', 'from-manifest'],
    );
    await assert.rejects(admin$({ op: 'servers.delete', id: 'counter' }), (e: PunkError) => e.code === 'ServerManaged');
  });

  it('a second replica started now serves the same servers', async () => {
    const second = await startReplica('gw-b');
    await second.ready();
    for (const name of ['early', 'counter', 'from-manifest']) assert.ok(served(second, name), `${name} served by gw-b`);
  });

  it('an update restarts the server with the new spec, on every replica', async () => {
    const replyOf = async (tool: string) => (await call('counter', tool)).content[0]!.text;
    const pidOf = async () => Number(/pid=(\d+)/.exec(await replyOf('count'))![1]);
    // A call that meets the restart is answered `unavailable`: count it as not yet settled.
    const generationOf = async () => {
      const text = await replyOf('env').catch(() => '');
      return text.startsWith('{')
        ? ((JSON.parse(text) as { env: Record<string, string> }).env.GENERATION ?? 'none')
        : `restarting: ${text}`;
    };
    assert.equal(await generationOf(), 'none');
    const before = await pidOf();
    await put('counter', counter(tenant, 'counter', { GENERATION: '2' }), 2);
    // Each replica restarts it: once settled, every call, whichever replica takes it, reaches a server of generation 2.
    const settled = async () => (await Promise.all([1, 2, 3, 4, 5, 6].map(generationOf))).every((g) => g === '2');
    await waitFor(settled, 20_000, 'generation 2 served');
    assert.notEqual(await pidOf(), before);
    for (const gateway of gateways) assert.ok(served(gateway, 'counter'));
  });

  it('a bad entry is logged with its key and field and skipped; the others are still served', async () => {
    const bad = { ...counter(tenant, 'broken'), spec: { image: 'x', transport: 'websocket' } };
    await put('broken', bad, 1);
    await put('misnamed', counter(tenant, 'other-name'), 1);
    await kv.put(kvKey(tenant, 'not-an-entry'), { server: 'nope' });
    await waitFor(() => logs.filter((l) => /is not served/.test(l)).length >= 2 * 3, 10_000, 'each replica logs each bad entry');
    const refusals = logs.filter((l) => /is not served/.test(l)).map((l) => JSON.parse(l) as { key: string; field: string; msg: string });
    assert.ok(
      refusals.some((r) => r.key === kvKey(tenant, 'broken') && r.field === 'server.spec.transport'),
      JSON.stringify(refusals),
    );
    assert.ok(
      refusals.some((r) => r.key === kvKey(tenant, 'misnamed') && r.field === 'server.metadata'),
      JSON.stringify(refusals),
    );
    assert.ok(
      refusals.some((r) => r.key === kvKey(tenant, 'not-an-entry') && r.field === 'server'),
      JSON.stringify(refusals),
    );
    for (const gateway of gateways) {
      assert.ok(!gateway.catalog(tenant).some((c) => ['broken', 'other-name'].includes(c.name)));
      assert.ok(served(gateway, 'counter') && served(gateway, 'early'));
    }
    assert.match((await call('counter', 'count')).content[0]!.text, /^calls=\d+ /);
  });

  it('an entry scaled to zero stops the server, stays listed with nothing, and its calls are refused at once naming the McpServer', async () => {
    const early = counter(tenant, 'early');
    await put('early', { ...early, spec: { ...early.spec, replicas: 0 } }, 2);
    const stopped = (gateway: Gateway) => gateway.catalog(tenant).find((c) => c.name === 'early' && c.state === 'stopped');
    for (const gateway of gateways) await waitFor(() => stopped(gateway) !== undefined, 20_000, 'early scaled to zero');
    const entry = stopped(gateways[0]!)!;
    assert.deepEqual(entry.tools, [], 'nothing is listed');
    const message = `server early is scaled to zero (McpServer ${tenant}/early spec.replicas=0); scale it up to call it`;
    assert.equal(entry.lastError, message);
    for (let i = 0; i < 4; i++)
      await assert.rejects(call('early', 'count'), (e: PunkError) => e.code === 'ServerScaledToZero' && e.message === message);
    const listing = (await requestGateway(buses[0]!, { method: 'catalog/list', tenant, server: 'early' }, 10_000)) as {
      servers: { name: string; state: string }[];
    };
    assert.deepEqual(
      listing.servers.map((s) => `${s.name} ${s.state}`),
      ['early stopped'],
      'the one-server endpoint still finds it',
    );

    await put('early', early, 3);
    for (const gateway of gateways) await waitFor(() => served(gateway, 'early'), 20_000, 'early served again');
    assert.match((await call('early', 'count')).content[0]!.text, /^calls=1 /, 'a new connection');
  });

  it('a deleted entry stops the server; the manifest server stays', async () => {
    await kv.delete(kvKey(tenant, 'counter'));
    for (const gateway of gateways)
      await waitFor(() => !gateway.catalog(tenant).some((c) => c.name === 'counter'), 20_000, 'counter stopped');
    await assert.rejects(call('counter', 'count'), (e: PunkError) => e.code === 'ServerNotFound');
    await assert.rejects(admin$({ op: 'servers.get', id: 'counter' }), (e: PunkError) => e.code === 'ServerNotFound');
    assert.match((await call('from-manifest', 'count')).content[0]!.text, /^calls=\d+ /);
  });
});
