// Measures `punk up` on the examples: time from spawn to the ready line, and
// resident memory (VmRSS) of the Punk process and of its server processes
// once idle. Prints figures; asserts nothing (these machines are noisy).
// Three starts per run: a fresh data directory (first `npm start`), the same
// directory again (every later `npm start`), and --ephemeral.
// Usage: npm run build && node bench/startup.mjs [runs]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const runs = Number(process.argv[2] ?? 3);

async function rssKiB(pid) {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

async function descendants(pid) {
  const children = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry), ...(await descendants(Number(entry))));
    } catch {
      // not up yet
    }
  }
  return children;
}

async function measure(modeArgs) {
  const started = performance.now();
  const child = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), 'up', ...modeArgs, '--port', '0'], {
    cwd: root,
    env: { ...process.env, PUNK_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      out += chunk;
      if (/Punk is ready/.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`punk up exited with ${code}`)));
  });
  const readyMs = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const punkKiB = await rssKiB(child.pid);
  const kids = await descendants(child.pid);
  let serversKiB = 0;
  for (const pid of kids) serversKiB += await rssKiB(pid);
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  return { readyMs, punkKiB, serversKiB, serverProcesses: kids.length };
}

const modes = { 'fresh data dir': [], 'existing data dir': [], ephemeral: [] };
for (let i = 0; i < runs; i++) {
  const data = await mkdtemp(join(tmpdir(), 'punk-bench-'));
  modes['fresh data dir'].push(await measure(['--data', join(data, 'data')]));
  modes['existing data dir'].push(await measure(['--data', join(data, 'data')]));
  modes.ephemeral.push(await measure(['--ephemeral']));
  await rm(data, { recursive: true, force: true });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const mib = (kib) => (kib / 1024).toFixed(1);
for (const [mode, results] of Object.entries(modes)) {
  console.log(
    `${mode.padEnd(18)} median of ${runs}: ready ${median(results.map((r) => r.readyMs)).toFixed(0)} ms, ` +
      `punk RSS ${mib(median(results.map((r) => r.punkKiB)))} MiB, ${results[0].serverProcesses} server processes RSS ${mib(median(results.map((r) => r.serversKiB)))} MiB ` +
      `(ready ms per run: ${results.map((r) => r.readyMs.toFixed(0)).join(', ')})`,
  );
}
