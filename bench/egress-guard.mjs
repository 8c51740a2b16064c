#!/usr/bin/env node
// What the SSRF guard costs a request: p50 / p99 / mean of one GET to a loopback HTTP server through
// plain fetch (Node's global dispatcher, keep-alive) next to guardedFetch (URL shape, destination check,
// connection pinned to the checked address, keep-alive pool), interleaved in one run; once with an IP
// literal (no resolution) and once with a host name (one dns.lookup per request through the system
// resolver: `localhost`). Then the same for an MCP tools/call (SDK client, Streamable HTTP) against
// server-everything. Needs a build (`npm run build`). REQUESTS (default 2000) per path, CALLS (default 300).
//   node bench/egress-guard.mjs
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { checkDestination, guardedFetch } from '../services/gateway/dist/index.js';
import { everything, fmt, freePort, pct, untilListening } from './common.mjs';

const REQUESTS = Number(process.env.REQUESTS ?? 2000);
const CALLS = Number(process.env.CALLS ?? 300);
const WARMUP = 50;
const policy = { allowPrivate: false, allowedNetworks: ['127.0.0.1/32'] };

/** p50 / p99 / mean of `samples` (milliseconds). */
function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = samples.reduce((sum, value) => sum + value, 0) / samples.length;
  return { p50: pct(sorted, 50), p99: pct(sorted, 99), mean };
}

/** Runs each of `paths` (name -> async function) `rounds` times, interleaved; returns samples per name. */
async function interleaved(paths, rounds) {
  const samples = Object.fromEntries(Object.keys(paths).map((name) => [name, []]));
  for (let round = 0; round < WARMUP + rounds; round++) {
    for (const [name, run] of Object.entries(paths)) {
      const start = performance.now();
      await run();
      if (round >= WARMUP) samples[name].push(performance.now() - start);
    }
  }
  return samples;
}

function report(title, samples, baseline) {
  console.log(`\n${title}`);
  const base = summary(samples[baseline]);
  for (const [name, values] of Object.entries(samples)) {
    const { p50, p99, mean } = summary(values);
    const extra = name === baseline ? '' : `  (+${fmt(p50 - base.p50)} p50, +${fmt(mean - base.mean)} mean)`;
    console.log(`  ${name.padEnd(34)} p50 ${fmt(p50)}  p99 ${fmt(p99)}  mean ${fmt(mean)}${extra}`);
  }
}

// 1. Plain HTTP GET on loopback.
const server = createServer((_request, response) => response.end('ok'));
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const guarded = guardedFetch(policy);
const get = async (fetchFn, url) => {
  const response = await fetchFn(url);
  await response.text();
};
const http = await interleaved(
  {
    'fetch http://127.0.0.1': () => get(fetch, `http://127.0.0.1:${port}/`),
    'guardedFetch http://127.0.0.1': () => get(guarded, `http://127.0.0.1:${port}/`),
    'fetch http://localhost': () => get(fetch, `http://localhost:${port}/`),
    'guardedFetch http://localhost': () => get(guarded, `http://localhost:${port}/`),
  },
  REQUESTS,
);
report(`HTTP GET on loopback, ${REQUESTS} requests per path`, http, 'fetch http://127.0.0.1');

const checks = await interleaved(
  {
    'checkDestination IP literal': () => checkDestination(`http://127.0.0.1:${port}/`, policy),
    'checkDestination localhost (DNS)': () => checkDestination(`http://localhost:${port}/`, policy),
  },
  REQUESTS,
);
report('the check alone', checks, 'checkDestination IP literal');
await guarded.close();
server.close();

// 2. MCP tools/call against server-everything over Streamable HTTP.
const mcpPort = await freePort();
const child = spawn(process.execPath, [everything, 'streamableHttp'], { env: { ...process.env, PORT: String(mcpPort) }, stdio: 'ignore' });
const exited = new Promise((resolve) => child.once('exit', resolve));
await untilListening(mcpPort);
const mcpGuarded = guardedFetch(policy);
const clients = {};
for (const [name, fetchFn] of [
  ['SDK client, plain fetch', fetch],
  ['SDK client, guardedFetch', mcpGuarded],
]) {
  const client = new Client({ name: 'bench-egress', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${mcpPort}/mcp`), { fetch: fetchFn }));
  clients[name] = client;
}
const mcp = await interleaved(
  Object.fromEntries(
    Object.entries(clients).map(([name, client]) => [name, () => client.callTool({ name: 'echo', arguments: { message: 'bench' } })]),
  ),
  CALLS,
);
report(`MCP tools/call (echo) to server-everything, ${CALLS} calls per path`, mcp, 'SDK client, plain fetch');
for (const client of Object.values(clients)) await client.close();
await mcpGuarded.close();
child.kill();
await exited;
