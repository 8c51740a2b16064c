/**
 * A `sessionMode: per-client` server behind two gateway processes on real NATS: each client session
 * gets its own upstream process, every call of a session reaches that process whichever gateway the
 * queue group picks, and when the owning gateway is SIGKILLed the session's next call succeeds on the
 * other gateway with a new upstream process, logged and recorded on the ledger stream.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { PunkError, streams, subjects, type LedgerEvent } from '@punk/lib';
import { startService, type ServiceProcess } from './processes.js';
import { callTally, tallyWorld, testBus, type TallyWorld } from './distributed.js';

let world: TallyWorld;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld({ sessionMode: 'per-client' });
  running.push(await startService('governance', world.env));
  running.push(
    await startService('gateway', { ...world.env, PUNK_INSTANCE_ID: 'gateway-1', PUNK_LOG_LEVEL: 'debug' }),
    await startService('gateway', { ...world.env, PUNK_INSTANCE_ID: 'gateway-2', PUNK_LOG_LEVEL: 'debug' }),
  );
});

after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

/** The `count done#<n>` line of the tally: `{ pid, ppid }` of the upstream process that ran call `n`. */
async function ranIn(n: number): Promise<{ pid: number; ppid: number }> {
  const line = (await world.setup.lines()).find((l) => l.startsWith(`count done#${n} `));
  assert.ok(line, `call ${n} was tallied`);
  const [, , pid, ppid] = line.split(' ');
  return { pid: Number(pid), ppid: Number(ppid) };
}

test("two client sessions get two upstream processes; each session's calls reach its own whichever gateway takes them; a killed owner's session is re-established", async () => {
  const bus = await testBus(world.nats.url);
  try {
    const [s1, s2] = [randomUUID(), randomUUID()];
    // Twelve calls: the queue group hands some to the gateway that does not own the session.
    for (let n = 1; n <= 12; n++) await callTally(bus, world.setup.tenant, 'count', { n }, 20_000, s1);
    for (let n = 101; n <= 103; n++) await callTally(bus, world.setup.tenant, 'count', { n }, 20_000, s2);
    const one = await Promise.all(Array.from({ length: 12 }, (_, i) => ranIn(i + 1)));
    const two = await Promise.all([101, 102, 103].map(ranIn));
    assert.equal(new Set(one.map((r) => r.pid)).size, 1, 'every call of session 1 ran in one upstream process');
    assert.equal(new Set(two.map((r) => r.pid)).size, 1, 'every call of session 2 ran in one upstream process');
    assert.notEqual(one[0]!.pid, two[0]!.pid, 'the two sessions have different upstream processes');
    const gateways = running.filter((s) => s.name === 'gateway');
    assert.ok(
      gateways.some((g) => g.output().includes('forwarding to the owner of the upstream session')),
      'a gateway that does not own the session forwarded calls to the owner',
    );

    const owner = gateways.find((g) => g.process.pid === one[0]!.ppid);
    assert.ok(owner, 'the upstream process of session 1 is a child of a gateway');
    const survivor = gateways.find((g) => g !== owner)!;
    await owner.stop('SIGKILL');
    // NATS drops the killed process's subscriptions once it sees the connection closed; until then a call forwarded
    // to the owner waits for its deadline instead of getting "no responders" (and the session being re-established).
    const ownerId = owner === gateways[0] ? 'gateway-1' : 'gateway-2';
    for (const deadline = Date.now() + 15_000; ; await new Promise((r) => setTimeout(r, 100))) {
      const gone = await bus.request(subjects.gatewayInstanceCall(ownerId), {}, { timeoutMs: 500 }).then(
        () => false,
        (error: unknown) => (error as PunkError).code === 'BusNoResponders',
      );
      if (gone) break;
      assert.ok(Date.now() < deadline, `NATS still routes to the killed gateway ${ownerId}`);
    }

    await callTally(bus, world.setup.tenant, 'count', { n: 999 }, 20_000, s1);
    const again = await ranIn(999);
    assert.notEqual(again.pid, one[0]!.pid, 'a new upstream process');
    assert.equal(again.ppid, survivor.process.pid, 'started by the surviving gateway');
    assert.match(survivor.output(), /upstream session re-established/);

    const stored = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 });
    const reestablished = stored.map((m) => m.data as LedgerEvent).filter((e) => e.type === 'upstream.session_reestablished');
    assert.equal(reestablished.length, 1, 'one re-established event on the ledger stream');
    assert.equal(reestablished[0]!.sessionId, s1);
    assert.equal(reestablished[0]!.tenant, world.setup.tenant);
    assert.equal(reestablished[0]!.data['owner'], survivor === gateways[0] ? 'gateway-1' : 'gateway-2');

    // Later calls of the session stay on the new upstream process.
    await callTally(bus, world.setup.tenant, 'count', { n: 1000 }, 20_000, s1);
    assert.equal((await ranIn(1000)).pid, again.pid);
  } finally {
    await bus.close();
  }
});
