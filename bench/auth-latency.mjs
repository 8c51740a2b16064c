#!/usr/bin/env node
// What authentication costs a call: p50 / p99 of one tools/call through `punk up`
// with PUNK_AUTH_MODE=off next to the same call through a second `punk up` with
// PUNK_AUTH_MODE=on and an API key (one NATS KV read per request in punk up's
// in-process bus), measured interleaved in one run, for SDK clients of both
// protocol eras. Needs only Node (embedded defaults). CALLS (default 300) per path.
//   node bench/auth-latency.mjs
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { everythingManifestDir, fmt, freePort, pct, root } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 300);
const WARMUP = 30;
const BOOTSTRAP = randomBytes(24).toString('base64url');

/** Starts `punk up --ephemeral` on a free port with `env`; resolves with its base URL and a stop function. */
async function startPunk(dir, env) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), 'up', '--ephemeral', '--port', String(port)], {
    env: { ...process.env, PUNK_MANIFESTS: dir, PUNK_LOG_LEVEL: 'warn', ...env },
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
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function connect(url, era, headers) {
  const client = new Client(
    { name: `bench-${era}`, version: '1' },
    era === '2026' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {},
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

const dir = await everythingManifestDir('bench-auth');
const open = await startPunk(dir, { PUNK_AUTH_MODE: 'off' });
const closed = await startPunk(dir, {
  PUNK_AUTH_MODE: 'on',
  PUNK_PUBLIC_URL: 'http://127.0.0.1',
  PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
});
try {
  const created = await fetch(`${closed.base}/api/v1/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench' }),
  });
  const { key } = await created.json();
  console.log(`tools/call everything/echo, ${CALLS} calls per path after ${WARMUP} warm-up calls, interleaved (node ${process.version})`);
  for (const era of ['2025', '2026']) {
    const paths = [
      { name: 'auth off', client: await connect(`${open.base}/servers/everything/mcp`, era, {}), times: [] },
      {
        name: 'API key ',
        client: await connect(`${closed.base}/servers/everything/mcp`, era, { authorization: `Bearer ${key}` }),
        times: [],
      },
    ];
    for (let i = 0; i < WARMUP + CALLS; i++) {
      for (const path of paths) {
        const started = performance.now();
        await path.client.callTool({ name: 'echo', arguments: { message: 'x' } });
        if (i >= WARMUP) path.times.push(performance.now() - started);
      }
    }
    for (const path of paths) {
      const sorted = path.times.sort((a, b) => a - b);
      console.log(
        `  ${era === '2025' ? '2025-11-25' : '2026-07-28'} ${path.name}: p50 ${fmt(pct(sorted, 50))}  p99 ${fmt(pct(sorted, 99))}`,
      );
      await path.client.close();
    }
  }
} finally {
  await open.stop();
  await closed.stop();
  await rm(dir, { recursive: true, force: true });
}
