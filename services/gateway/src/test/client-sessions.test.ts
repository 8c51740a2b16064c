/**
 * `sessionMode: per-client` servers across two gateway replicas on one in-process bus: each client
 * session gets its own upstream process, owned by one replica (found through bucket
 * `PUNK_UPSTREAM_SESSIONS`); the other replica forwards to the owner; a dead owner's session is
 * re-established by the replica that notices (log line and ledger event); a client session's end and
 * idleness close its upstream.
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGovernance } from '@punk/governance';
import {
  anonymousPrincipal,
  buckets,
  createLogger,
  DEFAULT_UPSTREAM_SESSION_TTL_MS,
  MemoryBus,
  requestGateway,
  streams,
  subjects,
  upstreamSessionKey,
  type KvStore,
  type LedgerEvent,
} from '@punk/lib';
import { destinationPolicyOf, startGateway, type Gateway } from '../index.js';
import { openScratchDb } from '../../../lib/dist/test/pgtest.js';
import { descendantPids, fixture, manifest, waitFor } from './harness.js';

const log = createLogger('client-sessions-test', process.env.TEST_LOG_LEVEL ?? 'silent');

interface Cluster {
  tenant: string;
  bus: MemoryBus;
  gateways: Gateway[];
  owners: KvStore;
  events: LedgerEvent[];
  /** Calls `count` of the per-client server (or `server`) as `sessionId`; answers `{ calls, pid }`. */
  count(sessionId: string | undefined, server?: string): Promise<{ calls: number; pid: number }>;
  close(): Promise<void>;
}

/** Governance and two gateway replicas (`gw-a`, `gw-b`) on one bus, serving `solo` (per-client) and `pooled` (shared). */
async function startCluster(options: { ttlMs?: number } = {}): Promise<Cluster> {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const bus = new MemoryBus(log);
  await bus.ensureStream(streams.ledger);
  const events: LedgerEvent[] = [];
  const consumer = await bus.consume(
    streams.ledger.name,
    'test-reader',
    async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)),
  );
  const governance = await startGovernance({ bus, log });
  const workDir = await mkdtemp(join(tmpdir(), 'punk-sessions-'));
  const servers = [
    manifest(tenant, 'solo', { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')], sessionMode: 'per-client' }),
    manifest(tenant, 'pooled', { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')] }),
  ];
  const database = await openScratchDb(log);
  const gateways: Gateway[] = [];
  for (const instanceId of ['gw-a', 'gw-b']) {
    gateways.push(
      await startGateway({
        egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
        bus,
        log,
        db: database.db,
        servers,
        workDir: join(workDir, instanceId),
        startTimeoutMs: 20_000,
        callTimeoutMs: 20_000,
        instanceId,
        ...(options.ttlMs && { upstreamSessionTtlMs: options.ttlMs }),
      }),
    );
  }
  await Promise.all(gateways.map((g) => g.ready()));
  const owners = await bus.keyValue(buckets.upstreamSessions(options.ttlMs ?? DEFAULT_UPSTREAM_SESSION_TTL_MS));
  return {
    tenant,
    bus,
    gateways,
    owners,
    events,
    count: async (sessionId, server = 'solo') => {
      const result = (await requestGateway(
        bus,
        {
          method: 'tools/call',
          tenant,
          server,
          principal: anonymousPrincipal(tenant),
          runId: `run-${randomUUID()}`,
          name: 'count',
          arguments: {},
          ...(sessionId !== undefined && { sessionId }),
        },
        30_000,
      )) as { content: { text: string }[] };
      const [, calls, pid] = /calls=(\d+) pid=(\d+)/.exec(result.content[0]!.text)!;
      return { calls: Number(calls), pid: Number(pid) };
    },
    close: async () => {
      await Promise.all(gateways.map((g) => g.stop()));
      await governance.stop();
      await consumer.stop();
      await bus.close();
      await database.close();
      await rm(workDir, { recursive: true, force: true });
    },
  };
}

const ownerOf = async (cluster: Cluster, sessionId: string) =>
  ((await cluster.owners.get(upstreamSessionKey(cluster.tenant, 'solo', sessionId)))?.value as { instance?: string } | undefined)?.instance;

describe('per-client upstream sessions across two gateway replicas', () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster.close();
  });

  it('gives each client session its own upstream process, reached by every call of the session whichever replica takes it', async () => {
    const [s1, s2] = [randomUUID(), randomUUID()];
    // The in-process queue group alternates between the two replicas, so these calls land on both.
    const first = [];
    for (let i = 0; i < 4; i++) first.push(await cluster.count(s1));
    const second = [];
    for (let i = 0; i < 3; i++) second.push(await cluster.count(s2));
    assert.deepEqual(
      first.map((r) => r.calls),
      [1, 2, 3, 4],
      'one upstream counted every call of session 1',
    );
    assert.equal(new Set(first.map((r) => r.pid)).size, 1);
    assert.deepEqual(
      second.map((r) => r.calls),
      [1, 2, 3],
      'session 2 has an upstream of its own',
    );
    assert.equal(new Set(second.map((r) => r.pid)).size, 1);
    assert.notEqual(first[0]!.pid, second[0]!.pid);
    const shared = await cluster.count(undefined);
    assert.ok(![first[0]!.pid, second[0]!.pid].includes(shared.pid), 'a request without a session uses the shared pool');
    assert.ok(['gw-a', 'gw-b'].includes((await ownerOf(cluster, s1))!), 'the owner is recorded in PUNK_UPSTREAM_SESSIONS');
    const pooled = [await cluster.count(s1, 'pooled'), await cluster.count(s2, 'pooled')];
    assert.notEqual(pooled[0]!.pid, first[0]!.pid, 'a shared server ignores the session');
  });

  it("opens one upstream when a session's first two calls reach both replicas at once", async () => {
    const session = randomUUID();
    const both = await Promise.all([cluster.count(session), cluster.count(session)]);
    assert.equal(both[0].pid, both[1].pid, 'both calls reached the same upstream process');
    assert.deepEqual(both.map((r) => r.calls).sort(), [1, 2]);
  });

  it('closes the upstream sessions of a client session that ended (DELETE), and forgets their owner', async () => {
    const session = randomUUID();
    const { pid } = await cluster.count(session);
    assert.ok((await descendantPids()).includes(pid));
    await cluster.bus.publish(subjects.sessionControl(session), { type: 'ended' });
    await waitFor(async () => !(await descendantPids()).includes(pid), 10_000, 'the upstream process stops');
    await waitFor(async () => (await ownerOf(cluster, session)) === undefined, 5_000, 'the owner entry is removed');
  });
});

describe('a per-client upstream session whose owner dies', () => {
  it('is re-established on the replica that takes the next call, with a ledger event', async () => {
    const cluster = await startCluster();
    try {
      const session = randomUUID();
      const before = [await cluster.count(session), await cluster.count(session)];
      const owner = (await ownerOf(cluster, session))!;
      const dying = cluster.gateways[owner === 'gw-a' ? 0 : 1]!;
      const entry = (await cluster.owners.get(upstreamSessionKey(cluster.tenant, 'solo', session)))!;
      // The owner vanishes without handing anything over (as a killed process would): its entry stays.
      await dying.stop();
      await cluster.owners.put(upstreamSessionKey(cluster.tenant, 'solo', session), entry.value);
      const after = await cluster.count(session);
      assert.equal(after.calls, 1, 'a new upstream session counts from one');
      assert.notEqual(after.pid, before[0]!.pid, 'on a new process');
      const survivor = owner === 'gw-a' ? 'gw-b' : 'gw-a';
      assert.equal(await ownerOf(cluster, session), survivor);
      await waitFor(
        () => cluster.events.some((e) => e.type === 'upstream.session_reestablished' && e.sessionId === session),
        5_000,
        'the ledger event',
      );
      const event = cluster.events.find((e) => e.type === 'upstream.session_reestablished')!;
      assert.equal(event.server, 'solo');
      assert.deepEqual(
        { previousOwner: event.data['previousOwner'], owner: event.data['owner'] },
        { previousOwner: owner, owner: survivor },
      );
      assert.equal((await cluster.count(session)).calls, 2, 'later calls stay on the re-established session');
    } finally {
      await cluster.close();
    }
  });

  it('closes an idle upstream session after its time to live, and the next call opens a new one', async () => {
    const cluster = await startCluster({ ttlMs: 400 });
    try {
      const session = randomUUID();
      const first = await cluster.count(session);
      await waitFor(async () => !(await descendantPids()).includes(first.pid), 10_000, 'the idle upstream process stops');
      assert.equal(await ownerOf(cluster, session), undefined);
      const next = await cluster.count(session);
      assert.equal(next.calls, 1);
      assert.notEqual(next.pid, first.pid);
    } finally {
      await cluster.close();
    }
  });
});
