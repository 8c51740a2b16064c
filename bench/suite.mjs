#!/usr/bin/env node
// `npm run bench`: every path of a tools/call side by side in one run (bench/paths.mjs), interleaved in
// round-robin rounds so that the machine's noise hits every path alike, at 1, 8 and 32 concurrent sessions
// (sequential calls per session) in both protocol eras; then the memory scenarios, the large-result scenario
// and the start time. Prints the tables and writes them with the targets of issue 16 to docs/benchmarks.md.
// Options (npm run bench -- --help):
const USAGE = `Usage: npm run bench -- [options]
  --quick                 the shortest run (1 round of 100 ms slices after a 50 ms warm-up, 200/400 calls, 50 idle
                          sessions, one 1 MiB large result with a 10 s deadline and none at the limit; a smoke
                          test: no target is judged on it)
  --only LIST             comma-separated paths (direct, punk-up, punk-up-ephemeral, cluster, supergateway, mcp-proxy) and/or
                          scenarios (latency, memory, sessions, large, start); default: everything
  --eras LIST             2025-11-25,2026-07-28 (default both)
  --sessions LIST         concurrent sessions per path (default 1,8,32)
  --rounds N              round-robin rounds per (era, sessions) (default 8)
  --slice-ms MS           time each path runs per round (default 400)
  --warmup-ms MS          unrecorded slice per path before the first round (default 300)
  --calls N1,N2           memory: RSS after N1 and after N2 calls on each of punk up and the cluster (default
                          2000,10000; 10000,100000, the targets' figures, takes about 20 minutes more on a loaded 2-core machine)
  --idle-sessions N       memory: idle 2025-era sessions opened on one mcp-front (default 10000, the
                          target's count; about 2 minutes here)
  --large-mib LIST        sizes of the large results in MiB (default 4,40), besides one result of exactly the
                          limit as JSON (PUNK_MAX_RESULT_BYTES, default 32 MiB; not in --quick)
  --large-deadline-ms MS  the client's deadline of one large-result call (default 15000)
  --start-runs N          starts of \`punk up\` per mode, the median reported (default 1)
  --out FILE              the markdown report (default docs/benchmarks.md)
`;
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { cpuMs, pct, root, rssKiB, stopAllOwned } from './common.mjs';
import { idleSessions } from './front-sessions.mjs';
import { ERAS } from './mcp-http.mjs';
import { startCluster, startDirect, startMcpProxy, startPunkUp, startPunkUpEphemeral, startSupergateway } from './paths.mjs';
import { renderReport } from './report.mjs';
import { caches, exampleManifests, measureStart } from './startup.mjs';

const { DEFAULT_MAX_PAYLOAD_BYTES } = await import(join(root, 'services/lib/dist/bus/bus.js'));

const GROUPS = ['direct', 'punk-up', 'punk-up-ephemeral', 'cluster', 'supergateway', 'mcp-proxy'];
const SCENARIOS = ['latency', 'memory', 'sessions', 'large', 'start'];

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    eras: { type: 'string' },
    sessions: { type: 'string' },
    rounds: { type: 'string' },
    'slice-ms': { type: 'string' },
    'warmup-ms': { type: 'string' },
    calls: { type: 'string' },
    'idle-sessions': { type: 'string' },
    'large-mib': { type: 'string' },
    'large-deadline-ms': { type: 'string' },
    'start-runs': { type: 'string' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

/** A comma-separated list of numbers from flag `name` (or its default), refused with a sentence naming the flag. */
function numbers(name, fallback) {
  const text = flags[name] ?? fallback;
  const list = String(text)
    .split(',')
    .map((v) => Number(v.trim()));
  if (list.some((n) => !Number.isFinite(n) || n <= 0)) {
    console.error(`--${name} ${text}: use positive numbers, comma-separated`);
    process.exit(2);
  }
  return list;
}

const quick = flags.quick;
const only = (flags.only ?? '').split(',').filter(Boolean);
const unknown = only.filter((t) => !GROUPS.includes(t) && !SCENARIOS.includes(t));
if (unknown.length) {
  console.error(`--only ${flags.only}: unknown ${unknown.join(', ')}; use ${[...GROUPS, ...SCENARIOS].join(', ')}`);
  process.exit(2);
}
const eras = (flags.eras ?? ERAS.join(',')).split(',').map((e) => ERAS.find((known) => known.startsWith(e.trim())));
if (eras.some((e) => !e)) {
  console.error(`--eras ${flags.eras}: use ${ERAS.join(', ')}`);
  process.exit(2);
}
const options = {
  groups: only.some((t) => GROUPS.includes(t)) ? GROUPS.filter((g) => only.includes(g)) : GROUPS,
  scenarios: only.some((t) => SCENARIOS.includes(t)) ? SCENARIOS.filter((s) => only.includes(s)) : SCENARIOS,
  eras,
  concurrency: numbers('sessions', '1,8,32'),
  rounds: numbers('rounds', quick ? 1 : 8)[0],
  sliceMs: numbers('slice-ms', quick ? 100 : 400)[0],
  warmupMs: numbers('warmup-ms', quick ? 50 : 300)[0],
  calls: numbers('calls', quick ? '200,400' : '2000,10000'),
  idleSessions: numbers('idle-sessions', quick ? 50 : 10_000)[0],
  quick,
  largeMiB: numbers('large-mib', quick ? '1' : '4,40'),
  // The bus's limit, as every Punk process of the bench reads it.
  limitBytes: Number(process.env.PUNK_MAX_RESULT_BYTES ?? DEFAULT_MAX_PAYLOAD_BYTES),
  largeDeadlineMs: numbers('large-deadline-ms', quick ? 10_000 : 15_000)[0],
  startRuns: numbers('start-runs', 1)[0],
  out: resolve(flags.out ?? join(root, 'docs/benchmarks.md')),
};
const runs = (scenario, group) => options.scenarios.includes(scenario) && (!group || options.groups.includes(group));
const log = (line) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

// Everything started is stopped on the way out, whatever the way: done, failed, or interrupted.
const systems = [];
/** Stops every system started so far, the last first, then any child process still running. */
async function stopEverything() {
  while (systems.length)
    await systems
      .pop()
      .stop()
      .catch((error) => log(`stopping: ${error.message}`));
  await stopAllOwned(5000);
}
for (const signal of ['SIGINT', 'SIGTERM'])
  process.once(signal, () => {
    log(`${signal}: stopping everything the benchmark started`);
    void stopEverything().finally(() => process.exit(130));
  });

/** The summed CPU time (ms) of the processes `pids` lists now. */
async function cpuOf(pids) {
  const times = await Promise.all(pids.map(cpuMs));
  return times.reduce((sum, t) => sum + t, 0);
}

/**
 * Runs `sessions` loops of sequential calls for `ms`; adds each call's latency (ms) to `samples`, and (recorded
 * slices of a path that names its processes) their CPU time to `tally.cpuMs`.
 */
async function slice(sessions, ms, samples, tally, cpuPids) {
  const pids = samples && cpuPids ? await cpuPids() : [];
  const cpuBefore = await cpuOf(pids);
  const started = performance.now();
  const end = started + ms;
  await Promise.all(
    sessions.map(async (session) => {
      while (performance.now() < end && tally.errors < 20) {
        const t0 = performance.now();
        try {
          await session.call({ message: 'bench' }, AbortSignal.timeout(30_000));
          samples?.push(performance.now() - t0);
          tally.calls += samples ? 1 : 0;
        } catch (error) {
          tally.errors++;
          tally.error ??= error.message;
        }
      }
    }),
  );
  if (samples) tally.ms += performance.now() - started;
  if (pids.length) tally.cpuMs = (tally.cpuMs ?? 0) + (await cpuOf(pids)) - cpuBefore;
}

/** Opens `count` sessions of `path` in `era`, 8 at a time. */
async function openSessions(path, era, count) {
  const sessions = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(8, count) }, async () => {
      while (next < count) {
        const i = next++;
        sessions[i] = await path.open(era);
      }
    }),
  );
  return sessions;
}

/** The latency scenario: per (era, sessions), each path's p50, p99 and calls/s over interleaved rounds. */
async function latency(paths) {
  const cells = [];
  for (const era of options.eras) {
    for (const concurrency of options.concurrency) {
      log(`latency: ${era}, ${concurrency} sessions per path, ${options.rounds} rounds of ${options.sliceMs} ms`);
      const open = [];
      for (const path of paths) {
        const cell = { era, concurrency, path: path.id, samples: [], calls: 0, errors: 0, ms: 0 };
        cells.push(cell);
        try {
          open.push({ cell, cpuPids: path.cpuPids, sessions: await openSessions(path, era, concurrency) });
        } catch (error) {
          cell.error = `opening sessions: ${error.message}`;
          cell.errors++;
        }
      }
      for (const { cell, sessions } of open) await slice(sessions, options.warmupMs, undefined, cell);
      for (let round = 0; round < options.rounds; round++) {
        // Rotate the order every round, so no path always follows the same one.
        for (let k = 0; k < open.length; k++) {
          const { cell, sessions, cpuPids } = open[(k + round) % open.length];
          await slice(sessions, options.sliceMs, cell.samples, cell, cpuPids);
        }
      }
      for (const { sessions } of open) await Promise.all(sessions.map((s) => s.close()));
      for (const cell of cells.filter((c) => c.era === era && c.concurrency === concurrency)) {
        const sorted = cell.samples.sort((a, b) => a - b);
        Object.assign(cell, {
          p50: sorted.length ? pct(sorted, 50) : undefined,
          p99: sorted.length ? pct(sorted, 99) : undefined,
          perSecond: cell.ms ? (cell.calls * 1000) / cell.ms : undefined,
          cpuPerCallMs: cell.cpuMs !== undefined && cell.calls ? cell.cpuMs / cell.calls : undefined,
        });
        delete cell.samples;
      }
    }
  }
  return cells;
}

/** Runs `count` calls on `sessions` (each sequential, all at once). */
async function callsOn(sessions, count, tally) {
  let next = 0;
  await Promise.all(
    sessions.map(async (session) => {
      while (next < count) {
        next++;
        try {
          await session.call({ message: 'bench' }, AbortSignal.timeout(30_000));
        } catch (error) {
          tally.errors++;
          tally.error ??= error.message;
        }
      }
    }),
  );
}

/**
 * The flat-memory scenario: on each target (a path and the processes whose RSS counts), 8 sessions of 2025-era
 * calls, RSS read after a warm-up of 1000 calls, then after `options.calls` calls in all; targets take turns in
 * chunks of 1000 calls.
 */
async function memory(targets) {
  const checkpoints = [0, ...options.calls];
  const results = [];
  for (const target of targets) {
    target.sessions = await openSessions(target.path, '2025-11-25', 8);
    target.tally = { errors: 0 };
    target.readings = [];
    results.push(target);
  }
  const read = async (target, calls) => {
    const processes = await target.processes();
    const reading = { calls, rss: {} };
    for (const { name, pid } of processes) reading.rss[name] = await rssKiB(pid);
    target.readings.push(reading);
  };
  log(`memory: warm-up of 1000 calls on ${targets.map((t) => t.path.id).join(', ')}`);
  for (const target of targets) await callsOn(target.sessions, 1000, target.tally);
  for (const target of targets) await read(target, 0);
  for (let i = 1; i < checkpoints.length; i++) {
    log(`memory: calls ${checkpoints[i - 1]} to ${checkpoints[i]}`);
    for (let done = checkpoints[i - 1]; done < checkpoints[i]; done += 1000)
      for (const target of targets) await callsOn(target.sessions, Math.min(1000, checkpoints[i] - done), target.tally);
    for (const target of targets) await read(target, checkpoints[i]);
  }
  for (const target of targets) await Promise.all(target.sessions.map((s) => s.close()));
  return results.map(({ name, readings, tally }) => ({ name, readings, errors: tally.errors, error: tally.error }));
}

/** What `blob`'s result adds as JSON around its text of "x": `{"content":[{"type":"text","text":"…"}]}`. */
const BLOB_RESULT_JSON_BYTES = 39;

/**
 * The large-result scenario: one `blob` call of each size on each path, and (but in `--quick`) one whose result is
 * exactly the limit as JSON (the largest a client may get), bounded by the client's deadline.
 */
async function large(paths) {
  const results = [];
  const sizes = options.largeMiB.map((mib) => ({ mib, bytes: Math.round(mib * 1024 * 1024) }));
  if (!options.quick)
    sizes.push({ mib: options.limitBytes / 1024 / 1024, bytes: options.limitBytes - BLOB_RESULT_JSON_BYTES, atLimit: true });
  for (const path of paths) {
    for (const { mib, bytes, atLimit } of sizes) {
      log(`large result: ${atLimit ? 'the limit' : `${mib} MiB`} through ${path.id}`);
      const session = await path.open('2025-11-25');
      const t0 = performance.now();
      let outcome;
      try {
        const result = await session.call({ bytes }, AbortSignal.timeout(options.largeDeadlineMs));
        const length = result.content?.[0]?.text?.length;
        outcome = length === bytes ? { status: 'ok' } : { status: 'error', message: `a result of ${length} bytes, not ${bytes}` };
      } catch (error) {
        outcome =
          error.name === 'AbortError' || error.name === 'TimeoutError'
            ? { status: 'timeout', message: `no answer within the ${options.largeDeadlineMs} ms deadline` }
            : { status: 'error', message: error.message.slice(0, 200) };
      }
      results.push({ path: path.id, mib, ...(atLimit && { atLimit }), ms: performance.now() - t0, ...outcome });
      await session.close();
    }
  }
  return results;
}

/** The start scenario: `punk up` to ready on the examples, fresh and existing data directory; idle RSS with no server. */
async function start() {
  const manifests = await exampleManifests();
  const empty = await mkdtemp(join(tmpdir(), 'punk-bench-empty-'));
  const modes = { fresh: [], existing: [], idle: [] };
  try {
    for (let i = 0; i < options.startRuns; i++) {
      const data = await mkdtemp(join(tmpdir(), 'punk-bench-data-'));
      // The first start of a fresh clone: no compiled code cached (npm ci made the database template); later starts have it.
      const cached = caches(join(data, 'cache'));
      log(`start: punk up, fresh data directory and caches (run ${i + 1})`);
      modes.fresh.push(await measureStart(['--data', join(data, 'data')], manifests, 1000, cached));
      log(`start: punk up, existing data directory (run ${i + 1})`);
      modes.existing.push(await measureStart(['--data', join(data, 'data')], manifests, 1000, cached));
      log(`start: punk up without servers, idle (run ${i + 1})`);
      modes.idle.push(await measureStart(['--data', join(data, 'idle')], empty, 5000));
      await rm(data, { recursive: true, force: true });
    }
  } finally {
    await rm(manifests, { recursive: true, force: true });
    await rm(empty, { recursive: true, force: true });
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  return Object.fromEntries(
    Object.entries(modes).map(([mode, list]) => [
      mode,
      { readyMs: median(list.map((r) => r.readyMs)), punkKiB: median(list.map((r) => r.punkKiB)), runs: list.map((r) => r.readyMs) },
    ]),
  );
}

const startedAt = new Date();
const report = { options, startedAt, loadBefore: loadavg(), paths: [], failures: [], results: {} };
try {
  const wanted = (group) => options.groups.includes(group);
  const needs = {
    direct: runs('latency', 'direct'),
    'punk-up': (runs('latency') || runs('memory') || runs('large')) && wanted('punk-up'),
    'punk-up-ephemeral': runs('latency', 'punk-up-ephemeral'),
    cluster: (runs('latency') || runs('memory') || runs('large')) && wanted('cluster'),
    supergateway: runs('latency', 'supergateway'),
    'mcp-proxy': runs('latency', 'mcp-proxy'),
  };
  const starters = {
    direct: startDirect,
    'punk-up': startPunkUp,
    'punk-up-ephemeral': startPunkUpEphemeral,
    cluster: startCluster,
    supergateway: startSupergateway,
    'mcp-proxy': startMcpProxy,
  };
  const running = {};
  for (const group of GROUPS.filter((g) => needs[g])) {
    log(`starting ${group}`);
    try {
      running[group] = await starters[group]();
      systems.push(running[group]);
    } catch (error) {
      // The other paths are still measured; the report says what did not start.
      log(`${group} did not start: ${error.message}`);
      report.failures.push(`${group} did not start: ${error.message.split('\n')[0]}`);
    }
  }
  const paths = Object.values(running).flatMap((s) => s.paths);
  const byId = (id) => paths.find((p) => p.id === id);
  report.paths = paths.map(({ id, label, transport }) => ({ id, label, transport }));

  if (runs('latency')) report.results.latency = await latency(paths);
  if (runs('memory') && (running['punk-up'] || running.cluster)) {
    const targets = [];
    if (running['punk-up'])
      targets.push({
        name: 'punk up',
        path: byId('up-server-stdio'),
        processes: async () => [{ name: 'punk up', pid: running['punk-up'].pid }],
      });
    if (running.cluster) targets.push({ name: 'punk cluster', path: byId('cluster-stdio'), processes: running.cluster.processes });
    report.results.memory = await memory(targets);
  }
  if (runs('large')) report.results.large = await large(['up-server-stdio', 'cluster-stdio'].map(byId).filter(Boolean));
  await stopEverything();

  if (runs('sessions', 'cluster')) {
    log(`sessions: ${options.idleSessions} idle 2025-era sessions on one mcp-front`);
    report.results.sessions = await idleSessions(options.idleSessions);
  }
  if (runs('start', 'punk-up')) report.results.start = await start();

  report.finishedAt = new Date();
  const { text, markdown } = await renderReport(report);
  console.log(text);
  await mkdir(dirname(options.out), { recursive: true });
  await writeFile(options.out, markdown);
  log(`wrote ${options.out}`);
} finally {
  await stopEverything();
}
