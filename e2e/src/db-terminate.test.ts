/**
 * Postgres drops the services' connections under load (`pg_terminate_backend` on every backend of the test
 * database, repeatedly, while tools/call requests run through the gateway and the ledger writes their events),
 * then refuses connections for a while: no process dies, every event lands once, and `/readyz` says 503 while
 * the database is unreachable and 200 again once it is back (issue 14 item 1).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { readyStatus, startService, waitForReady, type ServiceProcess } from './processes.js';
import { callTally, tallyWorld, testBus, testServerUrl } from './distributed.js';

const LOAD_MS = 6_000;
const CONCURRENCY = 10;
const TERMINATE_EVERY_MS = 150;

test('backends terminated under load: gateway and ledger stay alive, every event lands once, readiness follows the database', async (t) => {
  const world = await tallyWorld();
  const { nats, setup, env, db } = world;
  const database = new URL(db.url).pathname.slice(1);
  const running: ServiceProcess[] = [];
  const admin = new pg.Client({ connectionString: testServerUrl });
  await admin.connect();
  admin.on('error', () => {});
  const terminate = () =>
    admin.query('SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [
      database,
    ]);
  const bus = await testBus(nats.url);
  try {
    running.push(await startService('governance', env));
    const gateway = await startService('gateway', env);
    const ledger = await startService('ledger', env);
    running.push(gateway, ledger);
    const alive = (what: string) => {
      for (const s of [gateway, ledger])
        assert.equal(s.process.exitCode ?? s.process.signalCode, null, `${s.name} died ${what}:\n${s.output().slice(-3000)}`);
    };

    // Given calls in flight while every backend of the database is terminated every 150 ms,
    let terminated = 0;
    let loading = true;
    const terminator = (async () => {
      while (loading) {
        terminated += (await terminate()).rows[0]!.n;
        await new Promise((r) => setTimeout(r, TERMINATE_EVERY_MS));
      }
    })();
    const answered: number[] = [];
    let sent = 0;
    const until = Date.now() + LOAD_MS;
    const worker = async () => {
      while (Date.now() < until) {
        const n = sent++;
        try {
          const result = await callTally(bus, setup.tenant, 'count', { n });
          if (/counted/.test(JSON.stringify(result))) answered.push(n);
        } catch {
          // A call the gateway could not serve while its database was away; checked below only for what was answered.
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, () => worker()));
    loading = false;
    await terminator;
    // then neither process died,
    alive('while its connections were terminated');
    assert.ok(terminated >= 5, `connections were terminated (${terminated})`);
    t.diagnostic(`${terminated} backends terminated; ${answered.length} of ${sent} calls answered`);
    assert.ok(answered.length > sent / 2, `most calls were answered (${answered.length} of ${sent})`);

    // and every answered call is on the ledger exactly once.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const called = async () =>
        (
          await client.query<{ n: string; events: number; ids: number }>(
            `SELECT data->'arguments'->>'n' AS n, count(*)::int AS events, count(DISTINCT id)::int AS ids
               FROM ledger.events WHERE tenant = $1 AND type = 'tool.called' GROUP BY 1`,
            [setup.tenant],
          )
        ).rows;
      const deadline = Date.now() + 60_000;
      let rows = await called();
      const missing = () => answered.filter((n) => !rows.some((r) => r.n === String(n)));
      while (missing().length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250));
        rows = await called();
      }
      assert.deepEqual(missing(), [], 'every answered call has its tool.called event');
      assert.deepEqual(
        rows.filter((r) => r.events !== 1 || r.ids !== 1),
        [],
        'no event written twice',
      );
      const duplicates = await client.query('SELECT id FROM ledger.events GROUP BY id HAVING count(*) > 1');
      assert.equal(duplicates.rowCount, 0, 'no event id twice');
    } finally {
      await client.end();
    }
    await waitForReady(ledger.url, 200, 20_000, 'ledger after the terminations');
    await waitForReady(gateway.url, 200, 20_000, 'gateway after the terminations');
    const verify = (await (await fetch(`${ledger.url}/api/v1/ledger/verify?tenant=${setup.tenant}`)).json()) as { ok: boolean };
    assert.equal(verify.ok, true, JSON.stringify(verify));

    // When the database refuses connections, both report not ready and stay alive,
    await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS false`);
    await terminate();
    try {
      await waitForReady(ledger.url, 503, 20_000, 'ledger while the database refuses connections');
      await waitForReady(gateway.url, 503, 20_000, 'gateway while the database refuses connections');
      await new Promise((r) => setTimeout(r, 1000));
      alive('while the database refused connections');
    } finally {
      await admin.query(`ALTER DATABASE ${database} ALLOW_CONNECTIONS true`);
    }
    // and ready again once it is back.
    await waitForReady(ledger.url, 200, 20_000, 'ledger once the database is back');
    await waitForReady(gateway.url, 200, 20_000, 'gateway once the database is back');
    assert.equal(await readyStatus(ledger.url), 200);
    alive('after the database came back');
    for (const s of running) assert.equal(await s.stop('SIGTERM'), 0, `${s.name} exits 0\n${s.output().slice(-2000)}`);
  } finally {
    await bus.close();
    await admin.end().catch(() => {});
    await Promise.all(running.map((s) => s.stop('SIGKILL')));
    await world.stop();
  }
});
