/**
 * Kill a gateway replica (SIGKILL) in the middle of a call: the caller gets
 * a clear error (BusTimeout) instead of a hang, a read-only call retried lands
 * on the other replica, and a non-idempotent call is never executed twice
 * (the tally fixture counts every execution, across processes).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PunkError } from '@punk/lib';
import { startService, type ServiceProcess } from './processes.js';
import { callTally, tallyWorld, testBus, type TallyWorld } from './distributed.js';

let world: TallyWorld;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  running.push(await startService('governance', world.env));
  running.push(await startService('gateway', world.env), await startService('gateway', world.env));
});

after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

/** Waits until the tally shows `<tool> start`, then SIGKILLs the gateway whose child runs it; returns that gateway's pid. */
async function killGatewayRunning(tool: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const line = (await world.setup.lines()).find((l) => l.startsWith(`${tool} start`));
    if (line) {
      const ppid = Number(line.split(' ')[3]);
      const gateway = running.find((s) => s.name === 'gateway' && s.process.pid === ppid);
      assert.ok(gateway, `the ${tool} call runs in a child of a gateway (ppid ${ppid})`);
      await gateway.stop('SIGKILL');
      return ppid;
    }
    if (Date.now() > deadline) throw new Error(`${tool} never started`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function expectBusTimeout(call: Promise<unknown>, withinMs: number): Promise<void> {
  const started = Date.now();
  await assert.rejects(call, (error: unknown) => error instanceof PunkError && error.code === 'BusTimeout');
  assert.ok(Date.now() - started <= withinMs + 1_000, 'the error came at the deadline, not later');
}

test('a read-only call whose gateway dies gets BusTimeout, and its retry is served by the other replica', async () => {
  const bus = await testBus(world.nats.url);
  try {
    const call = callTally(bus, world.setup.tenant, 'read_slowly', { ms: 3_000 }, 5_000);
    const killed = await killGatewayRunning('read_slowly');
    await expectBusTimeout(call, 5_000);
    const retried = JSON.stringify(await callTally(bus, world.setup.tenant, 'read_slowly', { ms: 10 }, 5_000));
    assert.match(retried, /read_slowly took 10 ms/);
    const second = (await world.setup.lines()).filter((l) => l.startsWith('read_slowly start')).at(-1)!;
    assert.notEqual(Number(second.split(' ')[3]), killed, 'the retry ran under the surviving gateway');
  } finally {
    await bus.close();
  }
});

test('a non-idempotent call whose gateway dies gets BusTimeout and is executed once, never twice', async () => {
  running.push(await startService('gateway', world.env));
  const bus = await testBus(world.nats.url);
  try {
    const call = callTally(bus, world.setup.tenant, 'charge', { ms: 2_000 }, 4_000);
    await killGatewayRunning('charge');
    await expectBusTimeout(call, 4_000);
    // Longer than the call itself: nothing re-ran it anywhere.
    await new Promise((r) => setTimeout(r, 3_000));
    const starts = (await world.setup.lines()).filter((l) => l.startsWith('charge start'));
    assert.equal(starts.length, 1, `charge ran ${starts.length} times`);
    // The surviving replicas still serve.
    assert.match(JSON.stringify(await callTally(bus, world.setup.tenant, 'count', {})), /counted/);
  } finally {
    await bus.close();
  }
});
