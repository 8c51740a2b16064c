#!/usr/bin/env node
// What a bridge session costs: the RSS of `punk-bridge serve` (the built dist/main.js, or dist-sea/punk-bridge
// with BRIDGE=sea) before and after SESSIONS (default 8) sessions of server-memory, the RSS of each child, and
// p50 / p99 of one tools/call through the bridge over CALLS (default 300) sequential calls on one session, next to
// the same calls to a server-memory child spoken to over stdio directly (what the bridge adds).
//   npm run build && node services/bridge/bench/sessions.mjs
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const SESSIONS = Number(process.env.SESSIONS ?? 8);
const CALLS = Number(process.env.CALLS ?? 300);
const pkg = fileURLToPath(new URL('..', import.meta.url));
const root = join(pkg, '../..');
const program = process.env.BRIDGE === 'sea' ? [join(pkg, 'dist-sea/punk-bridge')] : [process.execPath, join(pkg, 'dist/main.js')];
const memory = [process.execPath, join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')];

/** Resident set size of a process, in MiB (Linux /proc). */
async function rssMiB(pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)[1]) / 1024;
}

const dir = await mkdtemp(join(tmpdir(), 'punk-bridge-bench-'));
const bridge = spawn(
  program[0],
  [...program.slice(1), 'serve', '--host', '127.0.0.1', '--port', '0', '--max-sessions', String(SESSIONS), '--', ...memory],
  {
    env: { ...process.env, MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
    stdio: ['ignore', 'ignore', 'pipe'],
  },
);
const pids = [];
const url = await new Promise((resolve, reject) => {
  bridge.once('exit', (code) => reject(new Error(`the bridge exited with ${code}`)));
  createInterface({ input: bridge.stderr }).on('line', (line) => {
    const entry = JSON.parse(line);
    if (entry.msg === 'bridge listening') resolve(new URL(entry.url));
    if (entry.msg === 'session started') pids.push(entry.pid);
  });
});
const before = await rssMiB(bridge.pid);
const clients = [];
for (let i = 0; i < SESSIONS; i++) {
  const client = new Client({ name: 'bench', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url));
  await client.listTools();
  clients.push(client);
}
/** Sorted durations of CALLS sequential read_graph calls of `client`, in milliseconds. */
async function time(client) {
  const timings = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    await client.callTool({ name: 'read_graph', arguments: {} });
    timings.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return timings.sort((a, b) => a - b);
}
const direct = new Client({ name: 'bench', version: '1.0.0' });
await direct.connect(
  new StdioClientTransport({
    command: memory[0],
    args: memory.slice(1),
    env: { ...process.env, MEMORY_FILE_PATH: join(dir, 'direct.jsonl') },
    stderr: 'ignore',
  }),
);
const directTimings = await time(direct);
await direct.close();
const timings = await time(clients[0]);
const pct = (sorted, q) => sorted[Math.floor(sorted.length * q)].toFixed(2);
const after = await rssMiB(bridge.pid);
const children = await Promise.all(pids.map(rssMiB));
const mean = children.reduce((a, b) => a + b, 0) / children.length;
console.log(
  `bridge (${process.env.BRIDGE === 'sea' ? 'single executable' : 'node dist/main.js'}), server-memory children, Node ${process.versions.node}`,
);
console.log(
  `bridge RSS: ${before.toFixed(1)} MiB idle, ${after.toFixed(1)} MiB with ${SESSIONS} sessions (+${((after - before) / SESSIONS).toFixed(2)} MiB per session)`,
);
console.log(`child RSS: ${mean.toFixed(1)} MiB mean over ${children.length} children`);
console.log(`tools/call read_graph through the bridge: p50 ${pct(timings, 0.5)} ms, p99 ${pct(timings, 0.99)} ms (${CALLS} calls)`);
console.log(
  `tools/call read_graph over stdio directly: p50 ${pct(directTimings, 0.5)} ms, p99 ${pct(directTimings, 0.99)} ms (${CALLS} calls)`,
);
for (const client of clients) await client.close();
bridge.kill('SIGTERM');
await new Promise((resolve) => bridge.once('exit', resolve));
await rm(dir, { recursive: true, force: true });
