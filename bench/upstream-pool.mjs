#!/usr/bin/env node
// What the gateway's upstream pool costs: p50 / p95 of
//  - connect latency (openConnection: transport, MCP handshake; nothing listed) to server-everything over
//    Streamable HTTP, over HTTP+SSE reached by the fallback (POST refused with 404, then GET), over HTTP+SSE
//    declared (`transport: sse`), and over stdio (spawn included);
//  - one tools/call `echo` through a pooled Upstream (bound check, circuit accounting, progress/link
//    bookkeeping, 401 watch) next to the same call on a bare SDK client to the same server, interleaved,
//    over Streamable HTTP and stdio.
// Needs only Node and a build (`tsc -b`). CONNECTS (default 20) per transport, CALLS (default 400) per path.
//   node bench/upstream-pool.mjs
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { everything, fmt, freePort, pct, root, untilListening } from './common.mjs';

const { createLogger, mcpServerSchema } = await import(join(root, 'services/lib/dist/index.js'));
const { openConnection } = await import(join(root, 'services/gateway/dist/connect.js'));
const { Upstream } = await import(join(root, 'services/gateway/dist/upstream.js'));

const CONNECTS = Number(process.env.CONNECTS ?? 20);
const CALLS = Number(process.env.CALLS ?? 400);
const WARMUP = 30;
const log = createLogger('bench', 'silent');
const workDir = await mkdtemp(join(tmpdir(), 'punk-bench-pool-'));

const manifest = (name, spec) =>
  mcpServerSchema.parse({ apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name, namespace: 'bench' }, spec });

/** Runs server-everything in `mode` on a free port; resolves with its base URL once it listens. */
async function serve(mode) {
  const port = await freePort();
  const child = spawn(process.execPath, [everything, mode], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
  await untilListening(port);
  return { base: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

const hooks = {
  log,
  workDir,
  timeoutMs: 30_000,
  onListChanged: () => {},
  onServerRequest: async () => ({}),
  onProgress: () => {},
  onResourceUpdated: () => {},
  onLog: () => {},
};

function summary(label, samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  console.log(
    `${label.padEnd(44)} p50 ${fmt(pct(sorted, 50)).padStart(10)}   p95 ${fmt(pct(sorted, 95)).padStart(10)}   (n=${sorted.length})`,
  );
  return sorted;
}

async function connectLatency(label, server) {
  const samples = [];
  let transport;
  for (let i = 0; i < CONNECTS + 2; i++) {
    const started = performance.now();
    const connection = await openConnection(server, hooks);
    const took = performance.now() - started;
    transport = connection.transport;
    await connection.client.close();
    await connection.process?.stop();
    if (i >= 2) samples.push(took);
  }
  summary(`connect ${label} (${transport})`, samples);
}

async function upstreamOf(server) {
  const upstream = new Upstream({
    server,
    log,
    workDir,
    startTimeoutMs: 30_000,
    callTimeoutMs: 30_000,
    maxConcurrentCalls: 32,
    idleTimeoutMs: 300_000,
    onState: () => {},
    onListChanged: () => {},
    onResourceUpdated: () => {},
  });
  upstream.start();
  await upstream.firstStart;
  if (upstream.state !== 'ready') throw new Error(`${upstream.key}: ${upstream.error}`);
  return upstream;
}

/** Interleaved calls: through the pooled Upstream, and on a bare client. */
async function callOverhead(label, upstream, bare) {
  const pooled = [];
  const direct = [];
  const args = { message: 'bench' };
  for (let i = 0; i < WARMUP + CALLS; i++) {
    let started = performance.now();
    const outcome = await upstream.callTool('echo', args, undefined);
    if (!outcome.ok) throw new Error(outcome.message);
    const a = performance.now() - started;
    started = performance.now();
    await bare.callTool({ name: 'echo', arguments: args });
    const b = performance.now() - started;
    if (i >= WARMUP) (pooled.push(a), direct.push(b));
  }
  const p = summary(`call ${label}: through Upstream`, pooled);
  const d = summary(`call ${label}: bare SDK client`, direct);
  console.log(`${''.padEnd(44)} overhead p50 ${fmt(pct(p, 50) - pct(d, 50))}, p95 ${fmt(pct(p, 95) - pct(d, 95))}`);
}

const http = await serve('streamableHttp');
const sse = await serve('sse');
try {
  console.log(`Node ${process.versions.node}; server-everything; ${CONNECTS} connects per transport, ${CALLS} calls per path\n`);
  await connectLatency('streamable http', manifest('http', { url: `${http.base}/mcp` }));
  await connectLatency('sse by fallback', manifest('sse-fallback', { url: `${sse.base}/sse` }));
  await connectLatency('sse declared', manifest('sse', { url: `${sse.base}/sse`, transport: 'sse' }));
  await connectLatency('stdio', manifest('stdio', { image: 'local/everything', command: [process.execPath, everything], args: ['stdio'] }));
  console.log();

  const httpUpstream = await upstreamOf(manifest('http-pool', { url: `${http.base}/mcp` }));
  const httpBare = new Client({ name: 'bench', version: '1' });
  await httpBare.connect(new StreamableHTTPClientTransport(new URL(`${http.base}/mcp`)));
  await callOverhead('streamable http', httpUpstream, httpBare);
  await httpBare.close();
  await httpUpstream.stop();

  const stdioServer = manifest('stdio-pool', { image: 'local/everything', command: [process.execPath, everything], args: ['stdio'] });
  const stdioUpstream = await upstreamOf(stdioServer);
  const stdioBare = await openConnection(
    manifest('stdio-bare', { image: 'local/everything', command: [process.execPath, everything], args: ['stdio'] }),
    hooks,
  );
  await callOverhead('stdio', stdioUpstream, stdioBare.client);
  await stdioBare.client.close();
  await stdioBare.process?.stop();
  await stdioUpstream.stop();
} finally {
  http.stop();
  sse.stop();
  await rm(workDir, { recursive: true, force: true });
}
