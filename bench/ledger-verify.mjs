#!/usr/bin/env node
// What verifying a long chain costs calls: a data directory seeded with EVENTS ledger events (default 100,000),
// then `punk up --data` on it: p50 / p99 of sequential everything/echo calls alone, and while a loop of
// GET /api/v1/ledger/verify requests runs (each bounded; the loop goes on until the chain is complete), with the
// number of requests and the time the verification took.
//   node bench/ledger-verify.mjs
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { everythingManifestDir, fmt, freePort, pct, root } from './common.mjs';

const EVENTS = Number(process.env.EVENTS ?? 100_000);
const { createLogger, migrate, openDatabase } = await import(join(root, 'services/lib/dist/index.js'));
const { LedgerStore, LEDGER_MIGRATIONS_DIR } = await import(join(root, 'services/ledger/dist/index.js'));

const dir = await everythingManifestDir('bench-verify');
const data = join(dir, 'data');
const log = createLogger('bench', 'silent');
const db = await openDatabase({ dataDir: data, log });
await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
const store = new LedgerStore(db);
const seeded = performance.now();
for (let i = 0; i < EVENTS; i += 1000) {
  await store.append(
    Array.from({ length: Math.min(1000, EVENTS - i) }, (_, j) => ({
      id: randomUUID(),
      type: j % 2 ? 'tool.completed' : 'tool.called',
      tenant: 'default',
      runId: `seed-${(i + j) >> 1}`,
      occurredAt: new Date().toISOString(),
      source: 'gateway',
      server: 'everything',
      data: { name: 'echo', arguments: { message: `seed ${i + j}` } },
    })),
  );
}
await db.close();
console.log(`seeded ${EVENTS} events in ${((performance.now() - seeded) / 1000).toFixed(1)} s (node ${process.version})`);

const port = await freePort();
const child = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), 'up', '--data', data, '--port', String(port)], {
  env: { ...process.env, PUNK_MANIFESTS: dir, PUNK_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
child.stdout.on('data', (c) => (output += c));
child.stderr.on('data', (c) => (output += c));
const exited = new Promise((done) => child.once('exit', done));
try {
  await new Promise((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`punk up not ready in 120 s:\n${output}`)), 120_000);
    child.stdout.on('data', () => output.includes('is ready') && (clearTimeout(timer), ready()));
    exited.then((code) => fail(new Error(`punk up exited ${code}:\n${output}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  const client = new Client({ name: 'bench-verify', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/everything/mcp`)));
  const calls = async (until) => {
    const times = [];
    while (!until(times.length)) {
      const started = performance.now();
      await client.callTool({ name: 'echo', arguments: { message: 'x' } });
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b);
  };
  const line = (name, times) => console.log(`  ${name}: ${times.length} calls  p50 ${fmt(pct(times, 50))}  p99 ${fmt(pct(times, 99))}`);
  line('calls alone', await calls((n) => n >= 300));

  let done = false;
  let requests = 0;
  const verifyStarted = performance.now();
  const verifying = (async () => {
    for (;;) {
      const answer = await (await fetch(`${base}/api/v1/ledger/verify`)).json();
      requests++;
      if (!answer.ok || answer.complete) return answer;
    }
  })().finally(() => (done = true));
  line('calls during verification', await calls(() => done));
  const answer = await verifying;
  console.log(
    `  verification: ok ${answer.ok}, ${answer.events} events in ${requests} requests, ${((performance.now() - verifyStarted) / 1000).toFixed(1)} s`,
  );
  await client.close();
} finally {
  child.kill('SIGTERM');
  await exited;
  await rm(dir, { recursive: true, force: true });
}
