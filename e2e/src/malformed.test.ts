/**
 * Malformed messages on every subject the services serve: each is answered
 * with an error (request subjects) or set aside with a logged error (the
 * ledger stream, broadcasts), and the service keeps serving the next good one.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { PunkError, subjects, type NatsBus } from '@punk/lib';
import { startService, type ServiceProcess } from './processes.js';
import { callTally, tallyWorld, testBus, type TallyWorld } from './distributed.js';

let world: TallyWorld;
let bus: NatsBus;
let raw: NatsConnection;
const running: ServiceProcess[] = [];
const byName = (name: string) => running.find((s) => s.name === name)!;

before(async () => {
  world = await tallyWorld();
  const { env } = world;
  running.push(await startService('governance', env), await startService('gateway', env), await startService('ledger', env));
  bus = await testBus(world.nats.url);
  raw = await connect({ servers: world.nats.url });
});

after(async () => {
  await raw?.close();
  await bus?.close();
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.stop();
});

/** Sends raw bytes as a request and decodes the reply envelope. */
async function rawRequest(subject: string, payload: string): Promise<{ ok: boolean; code?: string; message?: string }> {
  const reply = await raw.request(subject, new TextEncoder().encode(payload), { timeout: 5_000 });
  return JSON.parse(new TextDecoder().decode(reply.data));
}

for (const subject of [subjects.gatewayCall, subjects.governanceCheck]) {
  test(`${subject}: malformed requests get InvalidMessage and the next good call is served`, async () => {
    const notJson = await rawRequest(subject, '{not json');
    assert.equal(notJson.ok, false);
    assert.equal(notJson.code, 'InvalidMessage');
    for (const bad of [{}, { method: 'tools/call' }, [1, 2], 'text', { tenant: 5 }]) {
      await assert.rejects(
        bus.request(subject, bad, { timeoutMs: 5_000 }),
        (e: unknown) => e instanceof PunkError && e.code === 'InvalidMessage' && /malformed message/.test(e.message),
      );
    }
    assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);
  });
}

test(`${subjects.ledgerEvents}: malformed events are set aside in ledger.rejected_messages with a logged error, good ones still land`, async () => {
  const js = jetstream(raw);
  await js.publish(subjects.ledgerEvents, new TextEncoder().encode('{not json'), { msgID: `bad-${randomUUID()}` });
  const badId = `bad-${randomUUID()}`;
  await bus.append(subjects.ledgerEvents, { id: 'not-a-uuid', type: 'tool.called' }, { msgId: badId });
  assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);
  const client = new pg.Client({ connectionString: world.db.url });
  await client.connect();
  try {
    const deadline = Date.now() + 15_000;
    let rejected = 0;
    let completed = 0;
    while (Date.now() < deadline) {
      rejected = (await client.query('SELECT count(*)::int AS n FROM ledger.rejected_messages')).rows[0].n;
      completed = (
        await client.query(`SELECT count(*)::int AS n FROM ledger.events WHERE tenant = $1 AND type = 'tool.completed'`, [
          world.setup.tenant,
        ])
      ).rows[0].n;
      if (rejected >= 2 && completed >= 1) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(rejected, 2);
    assert.ok(completed >= 1);
  } finally {
    await client.end();
  }
  assert.match(byName('ledger').output(), /rejected malformed ledger message/);
  const verify = (await (await fetch(`${byName('ledger').url}/api/v1/ledger/verify?tenant=${world.setup.tenant}`)).json()) as {
    ok: boolean;
  };
  assert.equal(verify.ok, true);
});

test(`${subjects.registryChanged}: malformed broadcasts harm no service`, async () => {
  raw.publish(subjects.registryChanged, new TextEncoder().encode('{not json'));
  await bus.publish(subjects.registryChanged, { tenant: 5 });
  await raw.flush();
  assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);
  for (const s of running) assert.equal(s.process.exitCode, null, `${s.name} still runs`);
});
