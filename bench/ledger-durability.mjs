#!/usr/bin/env node
// What a durable ledger costs `punk up`: calls/s of everything/echo through `punk up --data <dir>` (PGlite),
// one session calling sequentially, then SESSIONS sessions calling at once for SECONDS seconds, and how many
// events the ledger had not committed when the clients had their answers (punk_ledger_events_appended_total
// against the calls made). Needs only Node (embedded defaults).
//   node bench/ledger-durability.mjs            (CALLS=500 sequential, SESSIONS=8, SECONDS=20)
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { everythingManifestDir, fmt, freePort, pct, root } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 500);
const SESSIONS = Number(process.env.SESSIONS ?? 8);
const SECONDS = Number(process.env.SECONDS ?? 20);

async function startPunk(dir, data) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), 'up', '--data', data, '--port', String(port)], {
    env: { ...process.env, PUNK_MANIFESTS: dir, PUNK_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const exited = new Promise((done) => child.once('exit', done));
  await new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`punk up not ready in 120 s:\n${output}`)), 120_000);
    child.stdout.on('data', () => output.includes('is ready') && (clearTimeout(timer), ready()));
    exited.then((code) => fail(new Error(`punk up exited ${code}:\n${output}`)));
  });
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function connect(url) {
  const client = new Client({ name: 'bench-ledger', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** Committed ledger events of types tool.called and tool.completed, from /metrics. */
async function committed(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^punk_ledger_events_appended_total\{type="tool\.(called|completed)"\} (\d+)/.exec(line);
    if (m) sum += Number(m[2]);
  }
  return sum;
}

const dir = await everythingManifestDir('bench-ledger');
const punk = await startPunk(dir, join(dir, 'data'));
try {
  const url = `${punk.base}/servers/everything/mcp`;
  const echo = (client) => client.callTool({ name: 'echo', arguments: { message: 'x' } });
  console.log(`punk up --data (PGlite), everything/echo (node ${process.version})`);

  const one = await connect(url);
  for (let i = 0; i < 30; i++) await echo(one);
  const times = [];
  const seqStart = performance.now();
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    await echo(one);
    times.push(performance.now() - started);
  }
  const seqSeconds = (performance.now() - seqStart) / 1000;
  times.sort((a, b) => a - b);
  console.log(
    `  sequential, ${CALLS} calls: ${(CALLS / seqSeconds).toFixed(0)} calls/s  p50 ${fmt(pct(times, 50))}  p99 ${fmt(pct(times, 99))}`,
  );
  await one.close();

  const clients = await Promise.all(Array.from({ length: SESSIONS }, () => connect(url)));
  const before = await committed(punk.base);
  let calls = 0;
  const end = Date.now() + SECONDS * 1000;
  const burstStart = performance.now();
  await Promise.all(
    clients.map(async (client) => {
      while (Date.now() < end) {
        await echo(client);
        calls++;
      }
    }),
  );
  const burstSeconds = (performance.now() - burstStart) / 1000;
  const lagging = 2 * calls - ((await committed(punk.base)) - before);
  console.log(
    `  ${SESSIONS} sessions, ${SECONDS} s: ${calls} calls, ${(calls / burstSeconds).toFixed(0)} calls/s; ` +
      `tool events not yet committed when the last answer came: ${lagging}`,
  );
  await Promise.all(clients.map((c) => c.close()));
} finally {
  await punk.stop();
  await rm(dir, { recursive: true, force: true });
}
