#!/usr/bin/env node
// Measures `punk up` on the examples: time from spawn to the ready line, and
// resident memory (VmRSS) of the Punk process and of its server processes
// once idle. Prints figures; asserts nothing (these machines are noisy).
// Three starts per run: a fresh data directory (first `npm start`), the same
// directory again (every later `npm start`), and --ephemeral. The examples are
// copied with their HTTP server on a free port (4101 may be taken).
// `npm run bench` uses measureStart and exampleManifests too.
// Usage: npm run build && node bench/startup.mjs [runs]
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchEnv, descendants, freePort, outputMatch, root, rssKiB, sleep, spawnOwned, stopOwned } from './common.mjs';

/** A copy of examples/ in a new directory, its HTTP example server on a free port instead of 4101. */
export async function exampleManifests() {
  const dir = await mkdtemp(join(tmpdir(), 'punk-bench-examples-'));
  await cp(join(root, 'examples'), dir, { recursive: true });
  const port = String(await freePort());
  for (const file of await readdir(dir)) {
    if (!file.endsWith('.yaml')) continue;
    const text = await readFile(join(dir, file), 'utf8');
    if (text.includes('4101')) await writeFile(join(dir, file), text.replaceAll('4101', port));
  }
  return dir;
}

/** Environment that keeps Node's compile cache of a start in `dir` (Punk's database template is `npm ci`'s). */
export const caches = (dir) => ({ NODE_COMPILE_CACHE: join(dir, 'node-compile-cache') });

/**
 * Starts `punk up <modeArgs> --manifests <manifests> --port 0` as `npm start` does (scripts/punk.mjs), times spawn
 * to the ready line (ms), waits `settleMs`, reads the RSS (KiB) of Punk and of its server processes, and stops it.
 * `env` is added to the environment: `caches(dir)` puts Node's compile cache in `dir`,
 * so an empty `dir` makes the first start on a fresh clone and a used one a later start.
 */
export async function measureStart(modeArgs, manifests, settleMs = 5000, env = {}) {
  const started = performance.now();
  const child = spawnOwned(process.execPath, [join(root, 'scripts/punk.mjs'), 'up', ...modeArgs, '--manifests', manifests, '--port', '0'], {
    cwd: root,
    env: { ...process.env, ...benchEnv, ...env },
  });
  try {
    await outputMatch(child, /Punk is ready/, 120_000, 'punk up');
    const readyMs = performance.now() - started;
    await sleep(settleMs);
    const punkKiB = await rssKiB(child.pid);
    const kids = await descendants(child.pid);
    let serversKiB = 0;
    for (const pid of kids) serversKiB += await rssKiB(pid);
    return { readyMs, punkKiB, serversKiB, serverProcesses: kids.length };
  } finally {
    await stopOwned(child);
  }
}

if (import.meta.main) {
  const runs = Number(process.argv[2] ?? 3);
  const manifests = await exampleManifests();
  const modes = { 'fresh data dir': [], 'existing data dir': [], ephemeral: [] };
  for (let i = 0; i < runs; i++) {
    const data = await mkdtemp(join(tmpdir(), 'punk-bench-'));
    modes['fresh data dir'].push(await measureStart(['--data', join(data, 'data')], manifests));
    modes['existing data dir'].push(await measureStart(['--data', join(data, 'data')], manifests));
    modes.ephemeral.push(await measureStart(['--ephemeral'], manifests));
    await rm(data, { recursive: true, force: true });
  }
  await rm(manifests, { recursive: true, force: true });

  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const mib = (kib) => (kib / 1024).toFixed(1);
  for (const [mode, results] of Object.entries(modes)) {
    console.log(
      `${mode.padEnd(18)} median of ${runs}: ready ${median(results.map((r) => r.readyMs)).toFixed(0)} ms, ` +
        `punk RSS ${mib(median(results.map((r) => r.punkKiB)))} MiB, ${results[0].serverProcesses} server processes RSS ${mib(median(results.map((r) => r.serversKiB)))} MiB ` +
        `(ready ms per run: ${results.map((r) => r.readyMs.toFixed(0)).join(', ')})`,
    );
  }
}
