/**
 * The ledger stops while 1,000 tools/call requests run through the gateway
 * (over NATS, as mcp-front drives it) and starts again: every event lands
 * exactly once and the hash chain verifies; the same with two ledger
 * processes consuming at once. Each scenario has a NATS server of its own
 * (the ledger stream and consumer names are fixed by the contracts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { startService, type ServiceProcess } from './processes.js';
import { callTally, tallyWorld, testBus } from './distributed.js';
import { verifyLedger } from './harness.js';

const CALLS = 1000;
const CONCURRENCY = 20;

async function scenario(ledgerCount: number): Promise<void> {
  const world = await tallyWorld();
  const { nats, setup, env } = world;
  const db = world.db;
  const running: ServiceProcess[] = [];
  const start = async (name: 'gateway' | 'governance' | 'ledger') => {
    const s = await startService(name, env);
    running.push(s);
    return s;
  };
  const bus = await testBus(nats.url);
  try {
    await start('governance');
    await start('gateway');
    const ledgers: ServiceProcess[] = [];
    for (let i = 0; i < ledgerCount; i++) ledgers.push(await start('ledger'));

    // Given 1,000 calls in flight, 20 at a time,
    let done = 0;
    let restarted: Promise<ServiceProcess> | undefined;
    let stopped: Promise<number | null> | undefined;
    const worker = async (first: number) => {
      for (let n = first; n < CALLS; n += CONCURRENCY) {
        const result = await callTally(bus, setup.tenant, 'count', { n });
        assert.match(JSON.stringify(result), /counted/);
        done++;
        // when the first ledger is stopped at 200 and started again at 700,
        if (done === 200) stopped = ledgers[0]!.stop('SIGTERM');
        if (done === 700) restarted = stopped!.then(() => start('ledger'));
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => worker(i)));
    assert.equal(await stopped, 0, `the stopped ledger exits 0:\n${ledgers[0]!.output()}`);
    const again = await restarted!;

    // then every event lands exactly once,
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const counts = async () =>
        (
          await client.query<{ type: string; n: number; ids: number }>(
            'SELECT type, count(*)::int AS n, count(DISTINCT id)::int AS ids FROM ledger.events WHERE tenant = $1 GROUP BY type',
            [setup.tenant],
          )
        ).rows;
      const deadline = Date.now() + 60_000;
      let rows = await counts();
      const of = (type: string) => rows.find((r) => r.type === type);
      while ((of('tool.completed')?.n ?? 0) < CALLS && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        rows = await counts();
      }
      await new Promise((r) => setTimeout(r, 1000));
      rows = await counts();
      // Each allowed call's decision travels in its tool.called (no governance.decision of its own).
      assert.equal(of('governance.decision'), undefined, `no decision events: ${JSON.stringify(rows)}`);
      for (const type of ['tool.called', 'tool.completed']) {
        assert.equal(of(type)?.n, CALLS, `${type} events: ${JSON.stringify(rows)}`);
        assert.equal(of(type)?.ids, CALLS, `${type} distinct ids`);
      }
      const numbered = await client.query<{ n: number }>(
        `SELECT count(DISTINCT (data->'arguments'->>'n'))::int AS n FROM ledger.events WHERE tenant = $1 AND type = 'tool.called'`,
        [setup.tenant],
      );
      assert.equal(numbered.rows[0]!.n, CALLS, 'one tool.called per call number');
      const rejected = await client.query('SELECT count(*)::int AS n FROM ledger.rejected_messages');
      assert.equal(rejected.rows[0].n, 0);
    } finally {
      await client.end();
    }
    assert.equal((await setup.lines()).filter((l) => l.startsWith('count done')).length, CALLS, 'the upstream ran each call once');

    // and the ledger (any replica) accepts the chain.
    for (const ledger of [again, ...ledgers.slice(1)]) {
      const verify = await verifyLedger(ledger.url, `?tenant=${setup.tenant}`);
      assert.equal(verify.ok, true, JSON.stringify(verify));
      assert.ok(verify.events >= 2 * CALLS, JSON.stringify(verify));
    }
    for (const s of running)
      if (s.process.exitCode === null) assert.equal(await s.stop('SIGTERM'), 0, `${s.name} exits 0\n${s.output().slice(-2000)}`);
  } finally {
    await bus.close();
    await Promise.all(running.map((s) => s.stop('SIGKILL')));
    await world.stop();
  }
}

test('one ledger stopped during 1,000 calls and started again: every event lands once and the chain verifies', () => scenario(1));

test('two ledgers at once, one stopped during 1,000 calls and started again: every event lands once and the chain verifies', () =>
  scenario(2));

test('in the distributed topology, a tail deleted from Postgres is reported by verify, naming the missing events', async () => {
  const world = await tallyWorld();
  const running: ServiceProcess[] = [];
  const bus = await testBus(world.nats.url);
  const client = new pg.Client({ connectionString: world.db.url });
  try {
    for (const name of ['governance', 'gateway', 'ledger'] as const) running.push(await startService(name, world.env));
    const ledger = running[2]!;
    const { tenant } = world.setup;
    // Given ten calls on the ledger,
    for (let n = 0; n < 10; n++) await callTally(bus, tenant, 'count', { n });
    await client.connect();
    const completed = async () =>
      (
        await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM ledger.events WHERE tenant = $1 AND type = 'tool.completed'`, [
          tenant,
        ])
      ).rows[0]!.n;
    for (const deadline = Date.now() + 60_000; (await completed()) < 10 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 200));
    const verify = async () =>
      (await (await fetch(`${ledger.url}/api/v1/ledger/verify?tenant=${tenant}`)).json()) as {
        ok: boolean;
        chainHead: { tenantSeq: number };
        firstBroken?: { reason: string; tenantSeq: number; message: string };
      };
    const before = await verify();
    assert.equal(before.ok, true, JSON.stringify(before));
    // when the last two rows are deleted straight from Postgres,
    const last = before.chainHead.tenantSeq;
    const deleted = await client.query('DELETE FROM ledger.events WHERE tenant = $1 AND tenant_seq > $2', [tenant, last - 2]);
    assert.equal(deleted.rowCount, 2);
    // then verify says where the chain ends and what its head record says.
    const after = await verify();
    assert.equal(after.ok, false, JSON.stringify(after));
    assert.equal(after.firstBroken?.reason, 'TruncatedTail');
    assert.equal(after.firstBroken?.tenantSeq, last - 1);
    assert.match(after.firstBroken?.message ?? '', new RegExp(`ends at tenant_seq ${last - 2} but its head record is tenant_seq ${last}`));
  } finally {
    await client.end().catch(() => {});
    await bus.close();
    await Promise.all(running.map((s) => s.stop('SIGKILL')));
    await world.stop();
  }
});
