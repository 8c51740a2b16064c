// What the benchmark scripts share: the repository root, a free port, percentiles,
// a manifest directory holding server-everything over stdio, resident memory of a
// process tree, a nats-server and a Postgres database of the run's own, and child
// processes that are stopped (with everything they started) when the run ends,
// fails or is interrupted.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root. */
export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The entry point of @modelcontextprotocol/server-everything. */
export const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** A free TCP port on 127.0.0.1. */
export const freePort = () =>
  new Promise((done) => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => done(port));
    });
  });

/** Resolves once something accepts TCP connections on 127.0.0.1:`port` (a server started as a child process). */
export async function untilListening(port) {
  for (;;) {
    const up = await new Promise((done) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), done(true)));
      socket.once('error', () => done(false));
    });
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The `p`th percentile (0-100) of ascending `sorted` values. */
export const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

/** Milliseconds, two decimals. */
export const fmt = (ms) => `${ms.toFixed(2)} ms`;

/** A fresh temporary directory (`punk-<prefix>-…`) holding one McpServer manifest: `everything`, server-everything over stdio. */
export async function everythingManifestDir(prefix) {
  const dir = await mkdtemp(join(tmpdir(), `punk-${prefix}-`));
  await writeFile(
    join(dir, 'everything.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: everything }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(everything)}]
  image: local/everything
  args: [stdio]
`,
  );
  return dir;
}

/**
 * What every Punk process of the benchmarks gets: warnings only, and no limit on `initialize` requests per client
 * address nor on sessions per principal (the benchmarks open thousands of sessions from 127.0.0.1, as one caller).
 */
export const benchEnv = {
  PUNK_LOG_LEVEL: 'warn',
  PUNK_INITIALIZE_RATE_LIMIT: '100000000',
  PUNK_MAX_SESSIONS: '100000',
  PUNK_MAX_SESSIONS_PER_PRINCIPAL: '100000',
};

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** User plus system CPU time of process `pid`, in milliseconds (clock ticks of 10 ms); 0 once it has gone. */
export async function cpuMs(pid) {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** Resident memory (VmRSS) of process `pid` in KiB; 0 once it has gone. */
export async function rssKiB(pid) {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The processes whose parent is `pid`, read from /proc. */
export async function childrenOf(pid) {
  const children = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** Every process below `pid` (children, their children, …). */
export async function descendants(pid) {
  const all = [];
  for (const child of await childrenOf(pid)) all.push(child, ...(await descendants(child)));
  return all;
}

const owned = new Set();

/**
 * Spawns a child process in its own process group (a terminal's Ctrl-C reaches only the benchmark, which then
 * stops it) and keeps it for {@link stopOwned} / {@link stopAllOwned}. Its output is collected in `child.output`
 * (the last 64 KiB) unless `stdio` says otherwise.
 */
export function spawnOwned(command, args, options = {}) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options, detached: true });
  child.output = '';
  for (const stream of [child.stdout, child.stderr]) stream?.on('data', (chunk) => (child.output = (child.output + chunk).slice(-65_536)));
  child.exited = new Promise((done) => child.once('exit', done));
  owned.add(child);
  child.once('exit', () => owned.delete(child));
  return child;
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Stops a child of {@link spawnOwned}: SIGTERM, then after `graceMs` SIGKILL to its process group; every
 * process that was below it (servers it started in groups of their own included) is SIGKILLed if still running.
 */
export async function stopOwned(child, graceMs = 20_000) {
  const below = await descendants(child.pid);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, graceMs);
    await child.exited;
    clearTimeout(timer);
  }
  for (let i = 0; i < 50 && below.some(alive); i++) await sleep(100);
  for (const pid of below.filter(alive)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

/** Stops every child of {@link spawnOwned} still running, all at once. */
export const stopAllOwned = (graceMs) => Promise.all([...owned].map((child) => stopOwned(child, graceMs)));

/** Resolves with the first match of `pattern` in `child.output`; rejects when the child exits first or after `timeoutMs`. */
export function outputMatch(child, pattern, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const match = pattern.exec(child.output);
      if (match) done(() => resolve(match));
    };
    const timer = setTimeout(() => done(() => reject(new Error(`${what} not ready within ${timeoutMs} ms:\n${child.output}`))), timeoutMs);
    const exited = (code, signal) =>
      done(() => reject(new Error(`${what} exited (${code ?? signal}) before it was ready:\n${child.output}`)));
    const done = (settle) => {
      clearTimeout(timer);
      child.stdout?.off('data', check);
      child.stderr?.off('data', check);
      child.off('exit', exited);
      settle();
    };
    child.stdout?.on('data', check);
    child.stderr?.on('data', check);
    child.once('exit', exited);
    check();
  });
}

/** Path of the nats-server binary (`PUNK_TEST_NATS_SERVER`, default `/usr/sbin/nats-server`). */
export const natsServerBin = process.env.PUNK_TEST_NATS_SERVER ?? '/usr/sbin/nats-server';

/**
 * A nats-server with JetStream of the run's own on a free port (its store in a temporary directory), `extraArgs`
 * added to its command line (`['-m', port]` for its monitoring endpoint): `{ url, pid, stop() }`.
 */
export async function startNats(extraArgs = []) {
  const store = await mkdtemp(join(tmpdir(), 'punk-bench-nats-'));
  const port = await freePort();
  const child = spawnOwned(natsServerBin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store, ...extraArgs]);
  await Promise.race([untilListening(port), child.exited.then(() => Promise.reject(new Error(`nats-server exited:\n${child.output}`)))]);
  return {
    url: `nats://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      await stopOwned(child, 5000);
      await rm(store, { recursive: true, force: true });
    },
  };
}

/** A database `punk_bench_<random>` on the Postgres of `PUNK_TEST_DATABASE_URL` (default the tests'): `{ url, drop() }`. */
export async function scratchDatabase() {
  const { default: pg } = await import('pg');
  const server = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const name = `punk_bench_${randomBytes(6).toString('hex')}`;
  const admin = async (sql) => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
