#!/usr/bin/env node
// Cost of one request/reply on the in-process bus (`punk up`'s MemoryBus), with payloads shaped like a
// tools/call to the gateway and its result, small and large (a 64 KiB text result). What a call pays the
// bus itself: copying each payload so that sender and receiver share nothing, the deadline timer, the trace
// context. Prints CPU and wall microseconds per round trip (CPU time is the steadier figure on a loaded
// machine); asserts nothing.
//   npm run build && node bench/in-process-bus.mjs [round trips]
import { MemoryBus } from '@punk/lib';

const N = Number(process.argv[2] ?? 50_000);
const request = {
  method: 'tools/call',
  tenant: 'default',
  server: 'eh',
  principal: { subject: 'anonymous', tenant: 'default', groups: [] },
  runId: 'run-8c7a1f2e-1b2c-4d3e-9f00-aabbccddeeff',
  name: 'echo',
  arguments: { message: 'hi 12345' },
  session: { id: '0d9f0c2a-5b5e-4c1e-8b59-1a2b3c4d5e6f', protocolVersion: '2025-11-25', clientCapabilities: { elicitation: {} } },
};
const small = { content: [{ type: 'text', text: 'hi 12345' }] };
const large = {
  content: [{ type: 'text', text: 'x'.repeat(64 * 1024) }],
  structuredContent: { rows: Array.from({ length: 200 }, (_, i) => ({ i, name: `row ${i}` })) },
};

const bus = new MemoryBus();
for (const [name, result] of [
  ['small result', small],
  ['64 KiB result', large],
]) {
  const sub = await bus.serve('bench.call', async () => result);
  const rounds = name === 'small result' ? N : Math.ceil(N / 10);
  for (let i = 0; i < 1000; i++) await bus.request('bench.call', request, { timeoutMs: 5000 });
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < rounds; i++) await bus.request('bench.call', request, { timeoutMs: 5000 });
  const wallUs = ((performance.now() - started) * 1000) / rounds;
  const used = process.cpuUsage(cpu);
  const cpuUs = (used.user + used.system) / rounds;
  console.log(`${name.padEnd(14)} ${cpuUs.toFixed(1)} µs CPU, ${wallUs.toFixed(1)} µs wall per request/reply (${rounds} sequential)`);
  await sub.unsubscribe();
}
await bus.close();
