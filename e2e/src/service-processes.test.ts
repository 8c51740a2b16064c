/**
 * Each service entrypoint as its own OS process against a NATS server and
 * Postgres: it reports ready, reports not-ready while NATS is gone and ready
 * again once NATS is back (without a restart of its own), keeps serving, and
 * exits 0 on SIGTERM.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readyStatus, startService, waitForReady, type ServiceProcess } from './processes.js';
import { freePort } from './harness.js';
import { callTally, tallyWorld, testBus, type TallyWorld } from './distributed.js';

let world: TallyWorld;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
});

after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.stop();
});

test('a service without PUNK_NATS_URL, the ledger without PUNK_DATABASE_URL, or one whose metrics port is its port, stops at once naming the variable', async () => {
  const noNats = await startService('governance', { PUNK_NATS_URL: '' }, { waitReady: false });
  assert.equal(await noNats.exited, 2);
  assert.match(noNats.output(), /PUNK_NATS_URL is required/);
  const noDb = await startService('ledger', { PUNK_NATS_URL: world.nats.url, PUNK_DATABASE_URL: '' }, { waitReady: false });
  assert.equal(await noDb.exited, 2);
  assert.match(noDb.output(), /PUNK_DATABASE_URL is required/);
  const samePorts = await startService(
    'governance',
    { PUNK_NATS_URL: world.nats.url, PUNK_DATABASE_URL: world.env.PUNK_DATABASE_URL!, PUNK_PORT: '24999', PUNK_METRICS_PORT: '24999' },
    { waitReady: false },
  );
  assert.equal(await samePorts.exited, 2);
  assert.match(samePorts.output(), /PUNK_METRICS_PORT=24999: must differ from PUNK_PORT/);
});

test('every service is ready, is not ready while NATS is down, is ready again when it returns, and exits 0 on SIGTERM', async () => {
  const { env } = world;
  const services = [await startService('governance', env), await startService('ledger', env), await startService('gateway', env)];
  running.push(...services);
  for (const s of services) assert.equal(await readyStatus(s.url), 200, s.name);

  const bus = await testBus(world.nats.url);
  try {
    assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);

    await world.nats.kill();
    for (const s of services) await waitForReady(s.url, 503, 15_000, `${s.name} with NATS down`);
    const body = (await (await fetch(`${services[0]!.url}/readyz`)).json()) as { reason: string };
    assert.match(body.reason, /NATS .* is not connected/);

    await world.nats.start();
    for (const s of services) await waitForReady(s.url, 200, 30_000, `${s.name} after NATS returned`);
    for (const s of services) assert.equal(s.process.exitCode, null, `${s.name} kept running`);
    // The same processes serve again: a call goes through gateway, governance and the ledger stream.
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await bus.close();
  }

  for (const s of services) assert.equal(await s.stop('SIGTERM'), 0, `${s.name} exit code\n${s.output()}`);
  assert.equal((await world.setup.lines()).filter((l) => l.startsWith('count done')).length >= 2, true);
});

test('with PUNK_METRICS_PORT a service serves /metrics on that port alone, and not on PUNK_PORT', async () => {
  const metricsPort = await freePort();
  const governance = await startService('governance', { ...world.env, PUNK_METRICS_PORT: String(metricsPort) });
  running.push(governance);
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  assert.equal(metrics.status, 200);
  assert.match(await metrics.text(), /^# HELP punk_governance_decisions_total /m);
  assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status, 404, 'the metrics port serves nothing else');
  assert.equal((await fetch(`${governance.url}/metrics`)).status, 404, 'PUNK_PORT no longer serves /metrics');
  assert.equal(await readyStatus(governance.url), 200);
  assert.equal(await governance.stop('SIGTERM'), 0, governance.output());
});
