/**
 * Which conformance runs prove Punk's endpoint, and how to run them: the
 * fixture alone (the baseline), Punk's per-server endpoints in the
 * distributed topology (fixture over Streamable HTTP and over stdio, each
 * reached in the era of the client's request), the SDK-style upstream
 * directly and through Punk (sdkPlan), and the
 * protocol-level scenarios against the aggregated `/mcp`, each in every
 * protocol era the suite covers, plus its pending suite for the record.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { baselineDir, runConformance, type ConformanceOutcome, type ConformanceRun } from './suite.js';

/** Scenarios about the endpoint itself rather than an upstream's features (run against the aggregated `/mcp`). */
export const PROTOCOL_SCENARIOS = [
  'server-initialize',
  'server-session-lifecycle',
  'server-stateless',
  'ping',
  'server-sse-multiple-streams',
  'dns-rebinding-protection',
  'http-header-validation',
  'caching',
];

/** A run of the plan; `lane` groups runs that must not overlap (they share one upstream connection). */
export interface PlannedRun extends ConformanceRun {
  lane: string;
  /** Recorded, never asserted. */
  informational?: boolean;
}

/** `e2e/conformance/<target>.yaml` when it exists: the failures of that target known and explained there. */
function baseline(target: string): Pick<ConformanceRun, 'expectedFailures'> {
  const path = join(baselineDir, `${target}.yaml`);
  return existsSync(path) ? { expectedFailures: path } : {};
}

/** Each dated 2025 revision's active suite, then 2026-07-28's active and draft suites, against one target. */
function eraRuns(target: string, url: string): PlannedRun[] {
  const base = { url, lane: target, ...baseline(target) };
  return [
    ...(['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'] as const).map((specVersion) => ({
      ...base,
      label: `${target} ${specVersion} active`,
      specVersion,
      suite: 'active' as const,
    })),
    {
      ...base,
      label: `${target} 2026-07-28 draft`,
      specVersion: '2026-07-28',
      suite: 'draft' as const,
    },
  ];
}

/**
 * The runs. `fixtureUrl` is the fixture's own endpoint, `baseUrl` Punk's (the proxy in front of the front replicas).
 * Over stdio the fixture speaks both eras (`serveStdio`): each gateway replica reaches it in 2025 for 2025-era clients
 * and, in a process of its own, in 2026-07-28 for 2026-07-28 clients, whose MRTR rounds then carry the fixture's own
 * keys and state (a retry goes back to the replica running that process).
 */
export function conformancePlan(fixtureUrl: string, baseUrl: string): PlannedRun[] {
  const stdioUrl = `${baseUrl}/servers/conformance-stdio/mcp`;
  return [
    ...eraRuns('fixture', fixtureUrl),
    ...eraRuns('punk-server-http', `${baseUrl}/servers/conformance/mcp`),
    ...eraRuns('punk-server-stdio', stdioUrl),
    ...(['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'] as const).map((specVersion) => ({
      label: `punk-aggregated ${specVersion} protocol`,
      url: `${baseUrl}/mcp`,
      lane: 'punk-aggregated',
      specVersion,
      scenarios: PROTOCOL_SCENARIOS,
      ...baseline('punk-aggregated'),
    })),
  ];
}

/** One run against the SDK-style upstream directly, and the same run through Punk's per-server endpoints. */
export interface ComparedRuns {
  direct: PlannedRun;
  /** Over Streamable HTTP (`/servers/sdk/mcp`) and over stdio (`/servers/sdk-stdio/mcp`). */
  through: PlannedRun[];
}

/**
 * The runs of the SDK-style upstream (sdk-server.ts), in every era the suite covers: each must pass through Punk
 * every scenario it passes directly (see {@link lostThroughPunk}); what fails directly is not asked of Punk.
 */
export function sdkPlan(sdkUrl: string, baseUrl: string): ComparedRuns[] {
  const direct = eraRuns('sdk', sdkUrl);
  const http = eraRuns('punk-sdk-http', `${baseUrl}/servers/sdk/mcp`);
  const stdio = eraRuns('punk-sdk-stdio', `${baseUrl}/servers/sdk-stdio/mcp`);
  return direct.map((run, i) => ({ direct: run, through: [http[i], stdio[i]].filter((r): r is PlannedRun => r !== undefined) }));
}

/** Scenarios of a summary that passed (`✓ <scenario>: ...`). */
function passedScenarios(summary: string[]): Set<string> {
  return new Set(summary.map((line) => /^✓ ([^:]+):/.exec(line)?.[1]).filter((name) => name !== undefined));
}

/** The scenarios that passed in `direct` and did not pass in `through` (each with its line there, if any). */
export function lostThroughPunk(direct: ConformanceOutcome, through: ConformanceOutcome): string[] {
  const passed = passedScenarios(through.summary);
  return [...passedScenarios(direct.summary)]
    .filter((scenario) => !passed.has(scenario))
    .map((scenario) => through.summary.find((line) => line.includes(` ${scenario}:`)) ?? `${scenario}: not run`);
}

/** The pending suite, once per target and era, for the record (never asserted). */
export function pendingPlan(fixtureUrl: string, baseUrl: string): PlannedRun[] {
  const targets = [
    { name: 'fixture', url: fixtureUrl },
    { name: 'punk-server-http', url: `${baseUrl}/servers/conformance/mcp` },
  ];
  return targets.flatMap((target) =>
    (['2025-11-25', '2026-07-28'] as const).map((specVersion) => ({
      label: `${target.name} ${specVersion} pending`,
      url: target.url,
      lane: target.name,
      specVersion,
      suite: 'pending' as const,
      informational: true,
    })),
  );
}

/**
 * Runs `runs`, lane by lane (a lane's runs one after the other, in order) with at most `concurrency` lanes
 * at once; outcomes in the order of `runs`.
 */
export async function runAll(runs: PlannedRun[], concurrency = 2): Promise<ConformanceOutcome[]> {
  const outcomes: ConformanceOutcome[] = new Array(runs.length);
  const lanes = [...new Set(runs.map((r) => r.lane))].map((lane) =>
    runs.map((run, index) => ({ run, index })).filter((e) => e.run.lane === lane),
  );
  let next = 0;
  const worker = async () => {
    while (next < lanes.length) {
      for (const { run, index } of lanes[next++]!) outcomes[index] = await runConformance(run);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, lanes.length) }, worker));
  return outcomes;
}
