#!/usr/bin/env node
// Resident memory of one mcp-front replica holding N idle 2025-era sessions
// (default 1000): a nats-server of its own, the front as its own process
// (`node services/mcp-front/dist/main.js`), N `initialize` handshakes over
// HTTP, then RSS after the sessions have been idle. Prints figures only.
//   npm run build && node bench/front-sessions.mjs [sessions]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, root } from './common.mjs';

const SESSIONS = Number(process.argv[2] ?? 1000);
const natsBin = process.env.PUNK_TEST_NATS_SERVER ?? '/usr/sbin/nats-server';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rssMiB = async (pid) => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

const store = await mkdtemp(join(tmpdir(), 'punk-bench-nats-'));
const natsPort = await freePort();
const nats = spawn(natsBin, ['-a', '127.0.0.1', '-p', String(natsPort), '-js', '-sd', store], { stdio: 'ignore' });
await sleep(500);
const port = await freePort();
const front = spawn(process.execPath, [join(root, 'services/mcp-front/dist/main.js')], {
  env: { ...process.env, PUNK_NATS_URL: `nats://127.0.0.1:${natsPort}`, PUNK_PORT: String(port), PUNK_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const base = `http://127.0.0.1:${port}`;
try {
  for (let i = 0; i < 100; i++) {
    if (
      (await fetch(`${base}/readyz`).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      break;
    await sleep(100);
  }
  await sleep(2000);
  const before = await rssMiB(front.pid);
  const started = performance.now();
  const ids = [];
  for (let i = 0; i < SESSIONS; i++) {
    const response = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: `bench-${i}`, version: '1' } },
      }),
    });
    await response.text();
    const id = response.headers.get('mcp-session-id');
    if (!id) throw new Error(`initialize ${i} answered ${response.status} without a session id`);
    ids.push(id);
  }
  const elapsed = performance.now() - started;
  await sleep(5000);
  const after = await rssMiB(front.pid);
  console.log(`${SESSIONS} idle 2025-era sessions on one mcp-front replica (state in NATS KV):`);
  console.log(
    `  RSS before ${before.toFixed(1)} MiB, after ${after.toFixed(1)} MiB (+${(after - before).toFixed(1)} MiB, ${(((after - before) * 1024) / SESSIONS).toFixed(1)} KiB per session)`,
  );
  console.log(`  ${SESSIONS} initialize handshakes in ${elapsed.toFixed(0)} ms (${(elapsed / SESSIONS).toFixed(2)} ms each, sequential)`);
} finally {
  front.kill('SIGTERM');
  await new Promise((r) => front.once('exit', r));
  nats.kill('SIGKILL');
  await rm(store, { recursive: true, force: true });
}
