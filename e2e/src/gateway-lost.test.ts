/**
 * A gateway replica SIGKILLed under load, behind a real mcp-front process (issue 14 item 3): clients of both eras
 * keep calling through the front while two gateway replicas serve; one is killed while it runs slow calls. No caller
 * waits anywhere near the 60 s deadline, a call that may have run on the dead replica is answered with an error
 * naming the gateway replica (not the upstream), a read-only call is run again on the survivor, and no call runs
 * twice (the tally fixture records every execution of `count` by its unique argument).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { startService, type ServiceProcess } from './processes.js';
import { tallyWorld, type TallyWorld } from './distributed.js';

/** Far below the 60 s deadline a dead gateway used to cost, and generous for a loaded machine. */
const BOUND_MS = 10_000;

let world: TallyWorld;
let front: ServiceProcess;
const gateways: ServiceProcess[] = [];
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  running.push(await startService('governance', world.env));
  for (let i = 0; i < 2; i++) gateways.push(await startService('gateway', { ...world.env, PUNK_INSTANCE_ID: `gateway-${i}` }));
  running.push(...gateways);
  front = await startService('mcp-front', { ...world.env, PUNK_CALL_TIMEOUT_MS: '60000' });
  running.push(front);
});

after(async () => {
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

/** One outcome of a call: its text or error message, and how long the caller waited. */
interface Outcome {
  ok: boolean;
  text: string;
  ms: number;
}

async function timed(call: () => Promise<unknown>): Promise<Outcome> {
  const started = Date.now();
  try {
    const result = (await call()) as { content?: { text?: string }[]; isError?: boolean };
    return { ok: result.isError !== true, text: result.content?.[0]?.text ?? JSON.stringify(result), ms: Date.now() - started };
  } catch (error) {
    return { ok: false, text: (error as Error).message, ms: Date.now() - started };
  }
}

async function client(era: '2025' | '2026'): Promise<Client> {
  const c = new Client(
    { name: `gateway-lost-${era}`, version: '1.0.0' },
    era === '2026' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
  );
  await c.connect(new StreamableHTTPClientTransport(new URL(`${front.url}/servers/tally/mcp`)));
  return c;
}

test('a gateway replica SIGKILLed under load: nobody waits the deadline, errors name the replica, nothing runs twice', async (t) => {
  const clients = await Promise.all([client('2025'), client('2025'), client('2026'), client('2026')]);
  // Both replicas take calls before the kill (the queue group spreads them).
  for (let n = 0; n < 20; n++) assert.ok((await timed(() => clients[n % 4]!.callTool({ name: 'count', arguments: { n } }))).ok);
  let next = 1000;
  let stop = false;
  const counts: Promise<Outcome & { n: number }>[] = [];
  const load = clients.map(async (c) => {
    while (!stop) {
      const n = next++;
      const outcome = timed(() => c.callTool({ name: 'count', arguments: { n } })).then((o) => ({ ...o, n }));
      counts.push(outcome);
      await outcome;
    }
  });
  // Slow calls on both replicas when one dies: writes that may have run, and reads that may run again.
  const slow = clients.flatMap((c) => [
    timed(() => c.callTool({ name: 'charge', arguments: { ms: 3_000 } })),
    timed(() => c.callTool({ name: 'read_slowly', arguments: { ms: 3_000 } })),
  ]);
  // The victim: a replica running a charge, and a read too when one does (every slow call has started by then).
  const deadline = Date.now() + 20_000;
  let victim: ServiceProcess | undefined;
  while (!victim) {
    const starts = (await world.setup.lines()).filter((l) => / start /.test(l) && !l.startsWith('server'));
    const parentsOf = (tool: string) => starts.filter((l) => l.startsWith(`${tool} start`)).map((l) => Number(l.split(' ')[3]));
    const charging = gateways.filter((g) => parentsOf('charge').includes(g.process.pid!));
    if (starts.length >= slow.length || Date.now() > deadline)
      victim = charging.find((g) => parentsOf('read_slowly').includes(g.process.pid!)) ?? charging[0];
    assert.ok(victim || Date.now() < deadline, 'no charge call started');
    if (!victim) await new Promise((r) => setTimeout(r, 25));
  }
  const victimRanRead = (await world.setup.lines()).some(
    (l) => l.startsWith('read_slowly start') && Number(l.split(' ')[3]) === victim.process.pid,
  );
  await victim.stop('SIGKILL');
  const slowOutcomes = await Promise.all(slow);
  // Load goes on a while on the survivor.
  await new Promise((r) => setTimeout(r, 2_000));
  stop = true;
  await Promise.all(load);
  const countOutcomes = await Promise.all(counts);
  await Promise.all(clients.map((c) => c.close()));

  const all = [...slowOutcomes, ...countOutcomes];
  const longest = Math.max(...all.map((o) => o.ms));
  t.diagnostic(
    `${all.length} calls, ${all.filter((o) => !o.ok).length} failed, longest wait ${longest} ms; slow calls: ${JSON.stringify(slowOutcomes)}`,
  );
  assert.ok(longest < BOUND_MS, `a caller waited ${longest} ms: ${JSON.stringify(all.find((o) => o.ms === longest))}`);
  for (const failed of all.filter((o) => !o.ok)) {
    assert.match(failed.text, /gateway replica gateway-\d/, `an error names the gateway replica: ${failed.text}`);
    assert.doesNotMatch(failed.text, /did not answer/, 'no error blames the upstream');
  }
  const killedName = `gateway-${gateways.indexOf(victim)}`;
  const charges = slowOutcomes.filter((_, i) => i % 2 === 0);
  assert.ok(
    charges.some((o) => !o.ok && o.text.includes(killedName)),
    `a charge running on ${killedName} is answered with its loss: ${JSON.stringify(charges)}`,
  );
  const reads = slowOutcomes.filter((_, i) => i % 2 === 1);
  assert.ok(
    reads.every((o) => o.ok),
    `read-only calls succeed, those on the dead replica run again on the survivor: ${JSON.stringify(reads)}`,
  );
  if (victimRanRead) {
    const survivor = gateways.find((g) => g !== victim)!.process.pid;
    const readsOnSurvivor = (await world.setup.lines()).filter(
      (l) => l.startsWith('read_slowly done') && Number(l.split(' ')[3]) === survivor,
    ).length;
    assert.equal(readsOnSurvivor, reads.length, "every read, the killed replica's too, completed on the survivor");
  }
  t.diagnostic(`the killed replica ran a read: ${victimRanRead}`);

  const lines = await world.setup.lines();
  const runs = new Map<number, number>();
  for (const line of lines) {
    const match = /^count done#(\d+) /.exec(line);
    if (match) runs.set(Number(match[1]), (runs.get(Number(match[1])) ?? 0) + 1);
  }
  for (const o of countOutcomes) {
    const times = runs.get(o.n) ?? 0;
    assert.ok(times <= 1, `count ${o.n} ran ${times} times`);
    if (o.ok) assert.equal(times, 1, `count ${o.n} answered without running`);
  }
  const chargeStarts = lines.filter((l) => l.startsWith('charge start')).length;
  assert.ok(chargeStarts <= charges.length, `charge ran ${chargeStarts} times for ${charges.length} calls`);
  assert.ok(countOutcomes.filter((o) => o.ok).length > 20, 'calls went on through the surviving replica');
});
