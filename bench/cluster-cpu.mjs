#!/usr/bin/env node
// CPU time per 1,000 tools/call of each process of `punk cluster` (the proxy in `punk cluster` itself, every service
// replica, nats-server, the stdio upstream), read from /proc/<pid>/stat around CALLS calls (default 4000) of `echo`
// on the stdio upstream (`cluster-stdio`), SESSIONS (default 8) 2025-11-25 sessions at once; and what NATS carried
// per call (messages in and out, from nats-server's monitoring /varz). A steadier figure than latency on a shared
// machine: it counts the work each process does, not the time it waited for a core.
// With CPU_PROF_DIR, every service runs with `--cpu-prof` (NODE_OPTIONS) and writes its profile there at exit.
//   node bench/cluster-cpu.mjs
import { mkdir, readFile } from 'node:fs/promises';
import { cpuMs, descendants, freePort } from './common.mjs';
import { Session } from './mcp-http.mjs';
import { startCluster } from './paths.mjs';

const CALLS = Number(process.env.CALLS ?? 4000);
const SESSIONS = Number(process.env.SESSIONS ?? 8);
const WARMUP = 300;
const profDir = process.env.CPU_PROF_DIR;

/** `{ in_msgs, out_msgs }` of the nats-server monitoring endpoint. */
async function natsCounters(monitorPort) {
  const varz = await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json();
  return { in: varz.in_msgs, out: varz.out_msgs };
}

/** `count` echo calls spread over the sessions, each session calling sequentially. */
async function drive(sessions, count) {
  let left = count;
  await Promise.all(
    sessions.map(async (session) => {
      while (left-- > 0) {
        const result = await session.call('echo', { message: 'bench' });
        if (result.isError) throw new Error(`echo failed: ${JSON.stringify(result.content)}`);
      }
    }),
  );
}

if (profDir) await mkdir(profDir, { recursive: true });
const monitorPort = await freePort();
const cluster = await startCluster({
  natsArgs: ['-m', String(monitorPort)],
  env: profDir ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${profDir}` } : {},
});
try {
  const path = cluster.paths.find((p) => p.id === 'cluster-stdio');
  const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => new Session(path.url, '2025-11-25').open()));
  await drive(sessions, WARMUP);
  const processes = [
    { name: 'punk cluster (proxy)', pid: cluster.pid },
    ...(await cluster.processes()),
    { name: 'nats-server', pid: cluster.natsPid },
  ];
  // The upstream: the stdio echo server a gateway started (a descendant of a gateway replica).
  for (const p of processes.filter((p) => p.name.startsWith('gateway-')))
    for (const pid of await descendants(p.pid)) {
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (cmdline.includes('echo-server.mjs') && cmdline.includes('stdio')) processes.push({ name: `upstream (${p.name})`, pid });
    }
  const before = await Promise.all(processes.map((p) => cpuMs(p.pid)));
  const natsBefore = await natsCounters(monitorPort);
  const started = performance.now();
  await drive(sessions, CALLS);
  const seconds = (performance.now() - started) / 1000;
  const after = await Promise.all(processes.map((p) => cpuMs(p.pid)));
  const natsAfter = await natsCounters(monitorPort);
  await Promise.all(sessions.map((s) => s.close()));
  const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
  console.log(`${CALLS} echo calls on cluster-stdio, ${SESSIONS} sessions: ${(CALLS / seconds).toFixed(0)} calls/s; load average ${load}`);
  console.log(
    `NATS per call: ${((natsAfter.in - natsBefore.in) / CALLS).toFixed(2)} messages in, ${((natsAfter.out - natsBefore.out) / CALLS).toFixed(2)} out`,
  );
  console.log('CPU ms per 1,000 calls:');
  let total = 0;
  processes.forEach((p, i) => {
    const perThousand = ((after[i] - before[i]) / CALLS) * 1000;
    total += perThousand;
    console.log(`  ${p.name.padEnd(28)} ${perThousand.toFixed(0).padStart(6)}`);
  });
  console.log(`  ${'total'.padEnd(28)} ${total.toFixed(0).padStart(6)}`);
} finally {
  await cluster.stop();
}
