/**
 * Kill a gateway replica (SIGKILL) in the middle of a call: the caller gets
 * a clear error (BusTimeout) instead of a hang, a read-only call retried lands
 * on the other replica, and a non-idempotent call is never executed twice
 * (the tally fixture counts every execution, across processes).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PunkError } from '@punk/lib';
import { removeDir } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';
import { startService, type ServiceProcess } from './processes.js';
import { callTally, tallySetup, testBus, type TallySetup } from './distributed.js';

let nats: OwnNats;
let setup: TallySetup;
const running: ServiceProcess[] = [];
const env = () => ({ PUNK_NATS_URL: nats.url, PUNK_MANIFESTS: setup.manifestDir, PUNK_TENANT: setup.tenant });

before(async () => {
  nats = await startOwnNats();
  setup = await tallySetup();
  running.push(await startService('governance', env()));
  running.push(await startService('gateway', env()), await startService('gateway', env()));
});

after(async () => {
  await Promise.all(running.map(s => s.stop('SIGKILL')));
  await setup.killServers();
  await nats.stop();
  await removeDir(setup.manifestDir);
});

/** Waits until the tally shows `<tool> start`, then SIGKILLs the gateway whose child runs it; returns that gateway's pid. */
async function killGatewayRunning(tool: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const line = (await setup.lines()).find(l => l.startsWith(`${tool} start`));
    if (line) {
      const ppid = Number(line.split(' ')[3]);
      const gateway = running.find(s => s.name === 'gateway' && s.process.pid === ppid);
      assert.ok(gateway, `the ${tool} call runs in a child of a gateway (ppid ${ppid})`);
      await gateway.stop('SIGKILL');
      return ppid;
    }
    if (Date.now() > deadline) throw new Error(`${tool} never started`);
    await new Promise(r => setTimeout(r, 25));
  }
}

async function expectBusTimeout(call: Promise<unknown>, withinMs: number): Promise<void> {
  const started = Date.now();
  await assert.rejects(call, (error: unknown) => error instanceof PunkError && error.code === 'BusTimeout');
  assert.ok(Date.now() - started <= withinMs + 1_000, 'the error came at the deadline, not later');
}

test('a read-only call whose gateway dies gets BusTimeout, and its retry is served by the other replica', async () => {
  const bus = await testBus(nats.url);
  try {
    const call = callTally(bus, setup.tenant, 'read_slowly', { ms: 3_000 }, 5_000);
    const killed = await killGatewayRunning('read_slowly');
    await expectBusTimeout(call, 5_000);
    const retried = JSON.stringify(await callTally(bus, setup.tenant, 'read_slowly', { ms: 10 }, 5_000));
    assert.match(retried, /read_slowly took 10 ms/);
    const second = (await setup.lines()).filter(l => l.startsWith('read_slowly start')).at(-1)!;
    assert.notEqual(Number(second.split(' ')[3]), killed, 'the retry ran under the surviving gateway');
  } finally {
    await bus.close();
  }
});

test('a non-idempotent call whose gateway dies gets BusTimeout and is executed once, never twice', async () => {
  running.push(await startService('gateway', env()));
  const bus = await testBus(nats.url);
  try {
    const call = callTally(bus, setup.tenant, 'charge', { ms: 2_000 }, 4_000);
    await killGatewayRunning('charge');
    await expectBusTimeout(call, 4_000);
    // Longer than the call itself: nothing re-ran it anywhere.
    await new Promise(r => setTimeout(r, 3_000));
    const starts = (await setup.lines()).filter(l => l.startsWith('charge start'));
    assert.equal(starts.length, 1, `charge ran ${starts.length} times`);
    // The surviving replicas still serve.
    assert.match(JSON.stringify(await callTally(bus, setup.tenant, 'count', {})), /counted/);
  } finally {
    await bus.close();
  }
});
