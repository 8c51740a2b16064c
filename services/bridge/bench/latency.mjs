#!/usr/bin/env node
// What the bridge adds to a call: p50 / p99 of CALLS (default 300) sequential `echo` calls of server-everything
// (1) over stdio directly, (2) over Streamable HTTP through `punk-bridge serve` (the built dist/main.js) with the
// server over stdio behind it, and (3) over the server's own Streamable HTTP transport (`streamableHttp` mode).
//   npm run build && node services/bridge/bench/latency.mjs
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const CALLS = Number(process.env.CALLS ?? 300);
const pkg = fileURLToPath(new URL('..', import.meta.url));
const everything = join(pkg, '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js');

async function measure(label, transport) {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(transport);
  for (let i = 0; i < 20; i++) await client.callTool({ name: 'echo', arguments: { message: 'warm-up' } });
  const timings = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    await client.callTool({ name: 'echo', arguments: { message: 'bench' } });
    timings.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  await client.close();
  timings.sort((a, b) => a - b);
  const pct = (q) => timings[Math.floor(CALLS * q)].toFixed(2);
  console.log(`${label}: p50 ${pct(0.5)} ms, p99 ${pct(0.99)} ms`);
}

function freePort() {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

console.log(`server-everything echo, ${CALLS} sequential calls, Node ${process.versions.node}`);
await measure('stdio directly', new StdioClientTransport({ command: process.execPath, args: [everything, 'stdio'], stderr: 'ignore' }));

const bridge = spawn(
  process.execPath,
  [join(pkg, 'dist/main.js'), 'serve', '--host', '127.0.0.1', '--port', '0', '--', process.execPath, everything, 'stdio'],
  { stdio: ['ignore', 'ignore', 'pipe'] },
);
const bridgeUrl = await new Promise((resolve) =>
  createInterface({ input: bridge.stderr }).on('line', (line) => {
    const entry = JSON.parse(line);
    if (entry.msg === 'bridge listening') resolve(new URL(entry.url));
  }),
);
await measure('through punk-bridge serve', new StreamableHTTPClientTransport(bridgeUrl));
bridge.kill('SIGTERM');

const port = await freePort();
const own = spawn(process.execPath, [everything, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: 'ignore' });
for (;;) {
  const up = await new Promise((resolve) =>
    connect(port, '127.0.0.1', function () {
      this.destroy();
      resolve(true);
    }).once('error', () => resolve(false)),
  );
  if (up) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
await measure('its own Streamable HTTP', new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
own.kill('SIGTERM');
