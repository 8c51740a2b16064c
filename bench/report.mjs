// The benchmark suite's report: the tables (markdown, printed and written alike), the machine, and a line per
// target of issues 16 and 27 saying met or not met with the figure it was judged on.
import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

const ms = (v) => (v === undefined ? '–' : `${v.toFixed(2)} ms`);
const signedMs = (v) => (v === undefined ? '–' : `${v >= 0 ? '+' : ''}${v.toFixed(2)} ms`);
const ratio = (a, b) => (a === undefined || !b ? undefined : a / b);
const times = (v) => (v === undefined ? '–' : `${v.toFixed(2)}x`);
const cpu = (v) => (v === undefined ? '–' : `${v.toFixed(2)} ms`);
const mib = (kib) => `${(kib / 1024).toFixed(1)} MiB`;
const table = (head, rows) =>
  [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
const verdict = (met) => (met === undefined ? 'not measured in this run' : met ? '**met**' : '**not met**');

/** The direct path on the same transport as `path`'s upstream: the baseline of its added latency. */
const directOf = (path) => (path.transport === 'stdio' ? 'direct-stdio' : 'direct-http');

/** Per (era, sessions, path) the cell of the latency scenario, and the derived figures against direct and the peers. */
function latencyRows(cells, paths) {
  const find = (era, concurrency, id) => cells.find((c) => c.era === era && c.concurrency === concurrency && c.path === id);
  return cells.map((cell) => {
    const path = paths.find((p) => p.id === cell.path);
    const direct = find(cell.era, cell.concurrency, directOf(path));
    const peer = (id) => find(cell.era, cell.concurrency, id)?.perSecond;
    return {
      ...cell,
      addedP50: direct?.p50 === undefined || cell.p50 === undefined ? undefined : cell.p50 - direct.p50,
      addedP99: direct?.p99 === undefined || cell.p99 === undefined ? undefined : cell.p99 - direct.p99,
      // Throughput against direct over Streamable HTTP, as the issue's table has it: every path but direct-stdio has an HTTP client.
      xDirect: ratio(cell.perSecond, find(cell.era, cell.concurrency, 'direct-http')?.perSecond),
      xSupergateway: ratio(cell.perSecond, peer('supergateway')),
      xMcpProxy: ratio(cell.perSecond, peer('mcp-proxy')),
    };
  });
}

/** The target lines of issues 16 and 27 ("What to reach"), judged on this run's figures. */
function targets(report, rows) {
  if (report.options.quick)
    return ['A `--quick` run is a smoke test of the suite: no target is judged on its figures. Run `npm run bench` for them.'];
  const lines = [];
  const { eras } = report.options;
  const row = (era, concurrency, id) => rows.find((r) => r.era === era && r.concurrency === concurrency && r.path === id);
  // `needs`: the derived figures the test reads; a row without them (its baseline or peer not run) is not judged.
  const judge = (ids, era, concurrency, needs, test, show) => {
    const found = ids.map((id) => row(era, concurrency, id)).filter((r) => r && needs.every((k) => r[k] !== undefined));
    if (found.length === 0) return [undefined, 'not measured'];
    const missing = ids.filter((id) => !found.some((r) => r.path === id));
    const figures = found.map((r) => `${r.path} ${show(r)}`).join('; ');
    return [found.every(test), missing.length ? `${figures}; ${missing.join(', ')} not measured` : figures];
  };
  for (const era of eras) {
    for (const [who, ids, limit] of [
      ['`punk up`', ['up-server-http', 'up-server-stdio'], 0.35],
      ['`punk cluster` (its services and proxy)', ['cluster-http', 'cluster-stdio'], 0.8],
    ]) {
      const [met, figures] = judge(
        ids,
        era,
        8,
        ['cpuPerCallMs'],
        (r) => r.cpuPerCallMs <= limit,
        (r) => cpu(r.cpuPerCallMs),
      );
      lines.push(`- ${era}: ${who} CPU per governed tools/call at 8 sessions ≤ ${limit} ms: ${verdict(met)} (${figures})`);
    }
    for (const concurrency of [8, 32]) {
      const data = row(era, concurrency, 'up-server-stdio');
      const [met, figures] = judge(
        ['up-ephemeral-stdio'],
        era,
        concurrency,
        ['perSecond'],
        (r) => data?.perSecond !== undefined && r.perSecond >= data.perSecond * 0.9,
        (r) => `${r.perSecond.toFixed(0)} calls/s against ${data?.perSecond?.toFixed(0) ?? '–'} with \`--data\``,
      );
      lines.push(
        `- ${era}: \`punk up --ephemeral\` within 10% of \`--data\` at ${concurrency} sessions (stdio upstream): ${verdict(met)} (${figures})`,
      );
    }
    for (const [who, ids, p50, p99] of [
      ['`punk up`', ['up-server-http', 'up-server-stdio'], 0.5, 2],
      ['`punk cluster`', ['cluster-http', 'cluster-stdio'], 1.5, 5],
    ]) {
      const [met, figures] = judge(
        ids,
        era,
        1,
        ['addedP50', 'addedP99'],
        (r) => r.addedP50 <= p50 && r.addedP99 <= p99,
        (r) => `${signedMs(r.addedP50)} p50, ${signedMs(r.addedP99)} p99`,
      );
      lines.push(
        `- ${era}: ${who} added latency over direct (same transport), 1 session, p50 ≤ ${p50} ms and p99 ≤ ${p99} ms: ${verdict(met)} (${figures})`,
      );
    }
    for (const [who, ids, floor] of [
      ['`punk up`', ['up-server-http', 'up-server-stdio'], 0.9],
      ['`punk cluster`', ['cluster-http', 'cluster-stdio'], 0.5],
    ]) {
      const [met, figures] = judge(
        ids,
        era,
        32,
        ['xDirect'],
        (r) => r.xDirect >= floor,
        (r) => `${times(r.xDirect)} (${r.perSecond?.toFixed(0)} calls/s)`,
      );
      lines.push(`- ${era}: ${who} throughput at 32 sessions ≥ ${floor}x direct (over Streamable HTTP): ${verdict(met)} (${figures})`);
    }
    for (const concurrency of [8, 32]) {
      const [met, figures] = judge(
        ['up-server-stdio', 'cluster-stdio'],
        era,
        concurrency,
        ['xSupergateway', 'xMcpProxy'],
        (r) => r.xSupergateway > 1 && r.xMcpProxy > 1,
        (r) => `${times(r.xSupergateway)} supergateway, ${times(r.xMcpProxy)} mcp-proxy`,
      );
      lines.push(
        `- ${era}: \`punk up\` and \`punk cluster\` ahead of supergateway and mcp-proxy on the stdio upstream at ${concurrency} sessions: ${verdict(met)} (${figures})`,
      );
    }
  }
  const memory = report.results.memory;
  if (memory) {
    const [n1, n2] = report.options.calls;
    for (const target of memory) {
      const at = (calls) => target.readings.find((r) => r.calls === calls)?.rss ?? {};
      const growth = Object.keys(at(n2)).map((name) => ({ name, from: at(n1)[name], to: at(n2)[name] }));
      const met = growth.length > 0 && growth.every((g) => g.to <= g.from * 1.05);
      const figures = growth
        .map((g) => `${g.name} ${mib(g.from)} → ${mib(g.to)} (${(((g.to - g.from) / g.from) * 100).toFixed(1)}%)`)
        .join('; ');
      lines.push(
        `- ${target.name}: RSS flat within 5% between ${n1} and ${n2} calls: ${verdict(growth.length ? met : undefined)} (${figures})`,
      );
    }
  } else lines.push(`- RSS flat within 5% between 10,000 and 100,000 calls: ${verdict(undefined)}`);
  const start = report.results.start;
  lines.push(
    `- \`punk up\` idle (no server started) ≤ 150 MiB: ${verdict(start && start.idle.punkKiB <= 150 * 1024)}${start ? ` (${mib(start.idle.punkKiB)})` : ''}`,
  );
  const sessions = report.results.sessions;
  lines.push(
    `- a front replica ≤ 20 KiB per idle 2025-era session (10,000 sessions): ${verdict(sessions && sessions.sessions >= 10_000 && sessions.perSessionKiB <= 20)}${sessions ? ` (${sessions.perSessionKiB.toFixed(1)} KiB per session with ${sessions.sessions} sessions)` : ''}`,
  );
  lines.push(
    `- start: ready within 3 s on a fresh data directory, 1.5 s on later starts: ${verdict(start && start.fresh.readyMs <= 3000 && start.existing.readyMs <= 1500)}${start ? ` (${(start.fresh.readyMs / 1000).toFixed(2)} s fresh, ${(start.existing.readyMs / 1000).toFixed(2)} s later; measured from \`node scripts/punk.mjs up\` as \`npm start\` runs it, built already (\`npm ci\` builds); fresh: an empty compile cache, as on a fresh clone)` : ''}`,
  );
  const large = report.results.large?.filter((r) => r.path.startsWith('cluster'));
  const limitMiB = report.options.limitBytes / 1024 / 1024;
  if (large?.length) {
    const within = large.filter((r) => r.mib <= limitMiB);
    const past = large.filter((r) => r.mib > limitMiB);
    const show = (list) => list.map((r) => `${sizeOf(r)}: ${r.status} in ${(r.ms / 1000).toFixed(2)} s`).join(', ');
    // Judged only with a result of the limit itself among them: the sizes below it say nothing of the limit.
    if (within.length)
      lines.push(
        `- cluster: results up to the limit (${limitMiB} MiB) cross the bus intact: ${verdict(within.some((r) => r.atLimit) ? within.every((r) => r.status === 'ok') : undefined)} (${show(within)})`,
      );
    if (past.length)
      lines.push(
        `- cluster: past the limit, a clear error at once (within 5 s): ${verdict(past.every((r) => r.status === 'error' && r.ms <= 5000))} (${show(past)}; whether the ledger records the failure is not checked here)`,
      );
  } else
    lines.push(`- cluster: results of any size up to the limit (${limitMiB} MiB) intact, a clear error past it: ${verdict(undefined)}`);
  return lines;
}

/** A large result's size as the report names it: MiB, and whether it is the limit itself. */
const sizeOf = (r) => `${Number(r.mib.toFixed(2))} MiB${r.atLimit ? ' (exactly the limit as JSON)' : ''}`;

function gitCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

/** Renders the report of one run: `{ text, markdown }` (the printed tables, and docs/benchmarks.md). */
export async function renderReport(report) {
  const { options, results } = report;
  const sections = [];
  const rows = results.latency ? latencyRows(results.latency, report.paths) : [];
  if (results.latency) {
    sections.push(
      '## Latency and throughput',
      `${options.rounds} round-robin rounds of ${options.sliceMs} ms per path (after a ${options.warmupMs} ms warm-up), sequential calls per session; ` +
        "`+p50`/`+p99`: over direct on the same transport as the path's upstream; `x direct`, `x supergateway`, `x mcp-proxy`: calls/s over theirs; " +
        "`CPU/call`: user and system CPU time of the path's own processes (Punk's, the peer's; direct: the upstream's) during its slices over its calls, " +
        "from /proc/<pid>/stat (10 ms ticks), the figure the noise moves least (work a path defers past its slice, such as the ledger's group commit, lands in the next slice of the same process).",
      table(
        [
          'era',
          'sessions',
          'path',
          'p50',
          'p99',
          'calls/s',
          'CPU/call',
          '+p50',
          '+p99',
          'x direct',
          'x supergateway',
          'x mcp-proxy',
          'errors',
        ],
        rows.map((r) => [
          r.era,
          r.concurrency,
          r.path,
          ms(r.p50),
          ms(r.p99),
          r.perSecond === undefined ? '–' : r.perSecond.toFixed(0),
          cpu(r.cpuPerCallMs),
          signedMs(r.addedP50),
          signedMs(r.addedP99),
          times(r.xDirect),
          times(r.xSupergateway),
          times(r.xMcpProxy),
          r.errors ? `${r.errors}: ${r.error}` : '0',
        ]),
      ),
      `Paths:\n\n${report.paths.map((p) => `- \`${p.id}\`: ${p.label}`).join('\n')}`,
    );
  }
  if (results.memory) {
    sections.push(
      '## Memory under calls',
      "RSS of each process after a warm-up of 1000 calls, then after the given number of calls in all (8 sessions, 2025-11-25, `echo` on the stdio upstream; `punk up` counts Punk's own process, not its servers).",
      table(
        ['process', ...results.memory[0].readings.map((r) => (r.calls === 0 ? 'after warm-up' : `after ${r.calls} calls`)), 'errors'],
        results.memory.flatMap((target) =>
          Object.keys(target.readings[0].rss).map((name) => [
            target.name === name ? name : `${target.name}: ${name}`,
            ...target.readings.map((r) => mib(r.rss[name] ?? 0)),
            target.errors ? `${target.errors}: ${target.error}` : '0',
          ]),
        ),
      ),
    );
  }
  if (results.sessions) {
    const s = results.sessions;
    sections.push(
      '## Idle sessions on one mcp-front',
      `${s.sessions} idle 2025-era sessions (initialize, notifications/initialized, socket closed) on one mcp-front replica: RSS ${mib(s.beforeKiB)} before, ${mib(s.afterKiB)} after, ${s.perSessionKiB.toFixed(1)} KiB per session; the handshakes took ${(s.elapsedMs / 1000).toFixed(1)} s, 16 at a time.`,
    );
  }
  if (results.large) {
    sections.push(
      '## Large results',
      `One \`blob\` call per size (2025-11-25 session, stdio upstream), the client's deadline ${options.largeDeadlineMs} ms.`,
      table(
        ['path', 'size', 'outcome', 'time', 'message'],
        results.large.map((r) => [r.path, sizeOf(r), r.status, `${(r.ms / 1000).toFixed(2)} s`, r.message ?? '']),
      ),
    );
  }
  if (results.start) {
    const s = results.start;
    sections.push(
      '## Start',
      `\`node scripts/punk.mjs up\` (what \`npm start\` runs) to its ready line (median of ${options.startRuns}), on a copy of examples/:`,
      table(
        ['start', 'ready', 'RSS of Punk (servers not counted)'],
        [
          ['fresh data directory', `${s.fresh.readyMs.toFixed(0)} ms`, `${mib(s.fresh.punkKiB)} (1 s after ready)`],
          ['existing data directory', `${s.existing.readyMs.toFixed(0)} ms`, `${mib(s.existing.punkKiB)} (1 s after ready)`],
          ['no server (idle)', `${s.idle.readyMs.toFixed(0)} ms`, `${mib(s.idle.punkKiB)} (5 s after ready)`],
        ],
      ),
      'What the idle RSS is made of (the node binary, PGlite, the V8 heap) and what a start leaves unloaded: [running.md](running.md#start-up-and-memory).',
    );
  }
  const targetLines = targets(report, rows);
  const command = `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`;
  const machine = [
    `- command: \`${command}\` (commit ${gitCommit()})`,
    `- machine: ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB memory, Node ${process.versions.node}`,
    `- run: ${report.startedAt.toISOString()} to ${report.finishedAt.toISOString()}; load average ${report.loadBefore.map((v) => v.toFixed(2)).join(' ')} before, ${loadavg()
      .map((v) => v.toFixed(2))
      .join(' ')} after (other work on the machine shows in every figure; the interleaving spreads it over all paths alike)`,
  ];
  if (report.failures.length) sections.unshift(`## Not measured\n\n${report.failures.map((f) => `- ${f}`).join('\n')}`);
  const body = [...sections, '## Targets (issues 16 and 27, "What to reach")', targetLines.join('\n')].join('\n\n');
  const markdown = `# Benchmarks

What \`npm run bench\` measured in its last run written here. Every path calls the same upstream, a minimal SDK v2
MCP server that does no work (\`bench/echo-server.mjs\`), with a raw HTTP client (node:http, one keep-alive socket
per session); \`npm run bench -- --help\` lists the options (\`--quick\`, \`--only punk-up\`, durations, counts).

${machine.join('\n')}

${body}
`;
  return { text: `${machine.join('\n')}\n\n${body}\n`, markdown };
}
