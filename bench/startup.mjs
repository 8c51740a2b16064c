// Measures `punk up` on the examples: time from spawn to the ready line, and
// resident memory (VmRSS) of the Punk process and of its server processes
// once idle. Prints figures; asserts nothing (these machines are noisy).
// Usage: npm run build && node bench/startup.mjs [runs]
import { spawn } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
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
    } catch {}
  }
  return children;
}

const results = [];
for (let i = 0; i < runs; i++) {
  const started = performance.now();
  const child = spawn(process.execPath, [join(root, 'services/cli/dist/main.js'), 'up', '--ephemeral', '--port', '0'], {
    cwd: root,
    env: { ...process.env, PUNK_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  await new Promise((resolve, reject) => {
    child.stdout.on('data', chunk => {
      out += chunk;
      if (/Punk is ready/.test(out)) resolve();
    });
    child.once('exit', code => reject(new Error(`punk up exited with ${code}`)));
  });
  const readyMs = performance.now() - started;
  await new Promise(resolve => setTimeout(resolve, 5000));
  const punkKiB = await rssKiB(child.pid);
  const kids = await descendants(child.pid);
  let serversKiB = 0;
  for (const pid of kids) serversKiB += await rssKiB(pid);
  results.push({ readyMs, punkKiB, serversKiB, serverProcesses: kids.length });
  child.kill('SIGTERM');
  await new Promise(resolve => child.once('exit', resolve));
}

const median = values => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
for (const [i, r] of results.entries()) {
  console.log(`run ${i + 1}: ready ${r.readyMs.toFixed(0)} ms, punk RSS ${(r.punkKiB / 1024).toFixed(1)} MiB, ${r.serverProcesses} server processes RSS ${(r.serversKiB / 1024).toFixed(1)} MiB`);
}
console.log(`median of ${runs}: ready ${median(results.map(r => r.readyMs)).toFixed(0)} ms, punk RSS ${(median(results.map(r => r.punkKiB)) / 1024).toFixed(1)} MiB, servers RSS ${(median(results.map(r => r.serversKiB)) / 1024).toFixed(1)} MiB`);
