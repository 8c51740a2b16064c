#!/usr/bin/env node
// p50 / p99 of one tools/call through `punk cluster` (proxy -> mcp-front ->
// gateway -> upstream, a real SDK Client over Streamable HTTP) next to the same
// call made directly to the upstream server (SDK Client over stdio), measured
// interleaved in one run. Needs NATS (PUNK_NATS_URL, default
// nats://127.0.0.1:4222) and Postgres (PUNK_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/punk). CALLS (default 500) per path.
// With `up`, the same through `punk up --ephemeral` (mcp-front, gateway, governance and ledger in one process).
//   node bench/cluster-latency.mjs [up]
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { everything, everythingManifestDir, fmt, freePort, pct, root } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 500);
const WARMUP = 50;
const embedded = process.argv[2] === 'up';
const frontAvailable = embedded || existsSync(join(root, 'services/mcp-front/dist/main.js'));

const dir = await everythingManifestDir('bench');
const port = await freePort();
const cluster = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), ...(embedded ? ['up', '--ephemeral'] : ['cluster'])], {
  env: { ...process.env, PUNK_PORT: String(port), PUNK_MANIFESTS: dir, PUNK_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
cluster.stdout.on('data', (c) => (output += c));
cluster.stderr.on('data', (c) => (output += c));
const exited = new Promise((done) => cluster.once('exit', done));
try {
  await new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`cluster not ready in 120 s:\n${output}`)), 120_000);
    const banner = embedded ? 'Punk is ready' : 'cluster is ready';
    cluster.stdout.on('data', () => output.includes(banner) && (clearTimeout(timer), ready()));
    exited.then((code) => fail(new Error(`cluster exited ${code}:\n${output}`)));
  });

  const direct = new Client({ name: 'bench-direct', version: '1' });
  await direct.connect(new StdioClientTransport({ command: process.execPath, args: [everything, 'stdio'] }));
  let viaCluster;
  let clusterPath;
  if (frontAvailable) {
    clusterPath = embedded
      ? 'punk up: mcp-front -> gateway -> upstream in one process (SDK Client, Streamable HTTP, /servers/everything/mcp)'
      : 'proxy -> mcp-front -> gateway -> upstream (SDK Client, Streamable HTTP, /servers/everything/mcp)';
    const client = new Client({ name: 'bench-cluster', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/servers/everything/mcp`)));
    viaCluster = (args) => client.callTool({ name: 'echo', arguments: args });
    viaCluster.list = () => client.listTools();
    viaCluster.close = () => client.close();
  } else {
    clusterPath = 'gateway over the bus (requestGateway from a NatsBus): services/mcp-front/dist/main.js is not available';
    const { NatsBus, createLogger, requestGateway } = await import('@punk/lib');
    const bus = await NatsBus.connect({
      url: process.env.PUNK_NATS_URL ?? 'nats://127.0.0.1:4222',
      name: 'bench',
      log: createLogger('bench', 'silent'),
    });
    const principal = { subject: 'bench', tenant: 'default', groups: [] };
    let run = 0;
    viaCluster = (args) =>
      requestGateway(
        bus,
        {
          method: 'tools/call',
          tenant: 'default',
          server: 'everything',
          principal,
          runId: `bench-${run++}`,
          name: 'echo',
          arguments: args,
        },
        10_000,
      );
    viaCluster.close = () => bus.close();
  }
  const viaDirect = (args) => direct.callTool({ name: 'echo', arguments: args });

  const samples = { cluster: [], direct: [] };
  for (let i = 0; i < WARMUP + CALLS; i++) {
    for (const [name, call] of i % 2 === 0
      ? [
          ['cluster', viaCluster],
          ['direct', viaDirect],
        ]
      : [
          ['direct', viaDirect],
          ['cluster', viaCluster],
        ]) {
      const t0 = process.hrtime.bigint();
      const result = await call({ message: `m${i}` });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (result.isError) throw new Error(`${name} call failed: ${JSON.stringify(result)}`);
      if (i >= WARMUP) samples[name].push(ms);
    }
  }
  // tools/list through the front: its list filtering (what the principal may use) included.
  const lists = [];
  for (let i = 0; viaCluster.list && i < WARMUP + CALLS / 5; i++) {
    const t0 = process.hrtime.bigint();
    await viaCluster.list();
    if (i >= WARMUP) lists.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  await viaCluster.close();
  await direct.close();

  console.log(
    `tools/call everything.echo, ${CALLS} calls per path after ${WARMUP} warm-up, interleaved, sequential (Node ${process.versions.node})`,
  );
  console.log(`cluster path: ${clusterPath}`);
  for (const name of ['direct', 'cluster']) {
    const sorted = samples[name].sort((a, b) => a - b);
    console.log(
      `${name.padEnd(8)} p50 ${fmt(pct(sorted, 50)).padStart(10)}   p99 ${fmt(pct(sorted, 99)).padStart(10)}   max ${fmt(sorted.at(-1)).padStart(10)}` +
        `   ${(1000 / (sorted.reduce((a, b) => a + b, 0) / sorted.length)).toFixed(0).padStart(6)} calls/s (sequential)`,
    );
  }
  if (lists.length > 0) {
    const sorted = lists.sort((a, b) => a - b);
    console.log(
      `tools/list p50 ${fmt(pct(sorted, 50)).padStart(10)}   p99 ${fmt(pct(sorted, 99)).padStart(10)}   (${sorted.length} lists)`,
    );
  }
  const d = samples.direct,
    c = samples.cluster;
  console.log(`overhead p50 ${fmt(pct(c, 50) - pct(d, 50))}, p99 ${fmt(pct(c, 99) - pct(d, 99))}`);
} finally {
  if (cluster.exitCode === null) cluster.kill('SIGINT');
  await exited;
  await rm(dir, { recursive: true, force: true });
}
