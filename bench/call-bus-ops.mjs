#!/usr/bin/env node
// What one tools/call costs on the bus, per component: requests, publishes, subscriptions made
// and KV reads and writes of mcp-front and of the gateway (with governance), counted around a
// real NatsBus, for a 2025-11-25 session and for 2026-07-28 stateless requests, plus the
// sequential calls/s of each. One process: front, gateway and governance on their own NATS
// connections to a private nats-server, server-everything over stdio as the upstream.
// CALLS (default 300) per era.
//   node bench/call-bus-ops.mjs
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway } from '@punk/gateway';
import { startGovernance } from '@punk/governance';
import { createLogger, mcpServerSpecSchema, NatsBus, streams } from '@punk/lib';
import { createFront } from '@punk/mcp-front';
import express from 'express';
import { openScratchDb } from '../services/lib/dist/test/pgtest.js';
import { fmt, freePort, pct } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 300);
const log = createLogger('bench', 'silent');

/** Wraps a bus so that every operation, and every KV operation of its buckets, is counted in `counts`. */
function counted(bus, counts) {
  const add = (key) => (counts[key] = (counts[key] ?? 0) + 1);
  return new Proxy(bus, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      if (prop === 'keyValue')
        return async (config) => {
          const kv = await value.call(target, config);
          return new Proxy(kv, {
            get(kvTarget, kvProp) {
              const fn = Reflect.get(kvTarget, kvProp, kvTarget);
              if (typeof fn !== 'function') return fn;
              return (...args) => (add(`kv.${config.name}.${String(kvProp)}`), fn.apply(kvTarget, args));
            },
          });
        };
      return (...args) => {
        if (['request', 'publish', 'subscribe', 'serve', 'append'].includes(prop)) add(String(prop));
        return value.apply(target, args);
      };
    },
  });
}

const port = await freePort();
const natsDir = await mkdtemp(join(tmpdir(), 'punk-bench-nats-'));
const nats = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', natsDir], { stdio: 'ignore' });
const url = `nats://127.0.0.1:${port}`;
let raw;
for (let i = 0; i < 100 && !raw; i++)
  raw = await NatsBus.connect({ url, name: 'probe', log }).catch(() => new Promise((r) => setTimeout(r, 100)));
await raw.close();
const counts = { front: {}, gateway: {} };
const frontBus = counted(await NatsBus.connect({ url, name: 'front', log }), counts.front);
const coreBus = counted(await NatsBus.connect({ url, name: 'gateway', log }), counts.gateway);
await coreBus.ensureStream(streams.ledger);
const workDir = await mkdtemp(join(tmpdir(), 'punk-bench-ops-'));
const governance = await startGovernance({ bus: coreBus, log });
const database = await openScratchDb(log);
const gateway = await startGateway({
  egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
  bus: coreBus,
  log,
  db: database.db,
  servers: [
    {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'everything', namespace: 'default' },
      spec: mcpServerSpecSchema.parse({ package: { name: '@modelcontextprotocol/server-everything' }, args: ['stdio'] }),
    },
  ],
  workDir,
  startTimeoutMs: 60_000,
  callTimeoutMs: 30_000,
});
await gateway.ready();
const front = await createFront({ bus: frontBus, log, tenant: 'default', maxBodyBytes: 1 << 20, callTimeoutMs: 30_000 });
const app = express();
app.use(front.router);
const http = await new Promise((done) => {
  const server = app.listen(0, '127.0.0.1', () => done(server));
});
const endpoint = new URL(`http://127.0.0.1:${http.address().port}/servers/everything/mcp`);

/** Calls echo CALLS times after a warm-up; resolves with the per-call counts and the latencies. */
async function measure(client) {
  for (let i = 0; i < 30; i++) await client.callTool({ name: 'echo', arguments: { message: `warm ${i}` } });
  const before = structuredClone(counts);
  const samples = [];
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } });
    samples.push(performance.now() - t);
  }
  const seconds = (performance.now() - started) / 1000;
  const perCall = {};
  for (const side of ['front', 'gateway'])
    for (const [key, n] of Object.entries(counts[side])) {
      const delta = n - (before[side][key] ?? 0);
      if (delta > 0) perCall[`${side} ${key}`] = (delta / CALLS).toFixed(2);
    }
  samples.sort((a, b) => a - b);
  return { perCall, p50: pct(samples, 50), p99: pct(samples, 99), rate: CALLS / seconds };
}

const results = {};
const legacy = new Client({ name: 'bench-2025', version: '1' });
await legacy.connect(new StreamableHTTPClientTransport(endpoint));
results['2025-11-25 session'] = await measure(legacy);
await legacy.close();
const modern = new Client({ name: 'bench-2026', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
await modern.connect(new StreamableHTTPClientTransport(endpoint));
results['2026-07-28 stateless'] = await measure(modern);
await modern.close();

console.log(`tools/call everything.echo through mcp-front -> gateway (in one process, own NATS), ${CALLS} sequential calls per era`);
for (const [era, r] of Object.entries(results)) {
  console.log(`\n${era}: p50 ${fmt(r.p50)}  p99 ${fmt(r.p99)}  ${r.rate.toFixed(0)} calls/s`);
  for (const [key, n] of Object.entries(r.perCall).sort()) console.log(`  ${key.padEnd(48)} ${n} per call`);
}

await front.close();
http.closeAllConnections();
http.close();
await gateway.stop();
await database.close();
await governance.stop();
await frontBus.close();
await coreBus.close();
nats.kill('SIGTERM');
await new Promise((done) => nats.once('exit', done));
await rm(natsDir, { recursive: true, force: true });
await rm(workDir, { recursive: true, force: true });
