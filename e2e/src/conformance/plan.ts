/**
 * Which conformance runs prove Punk's endpoint, and how to run them: the
 * fixture alone (the baseline), Punk's per-server endpoints in the
 * distributed topology (fixture over Streamable HTTP, which the gateway
 * speaks 2026-07-28 to, and over stdio, which it speaks 2025 to), and the
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

/** The Multi Round-Trip Request scenarios of the 2026-07-28 draft suite (SEP-2322). */
export const MRTR_SCENARIOS = [
  'input-required-result-basic-elicitation',
  'input-required-result-basic-sampling',
  'input-required-result-basic-list-roots',
  'input-required-result-request-state',
  'input-required-result-multiple-input-requests',
  'input-required-result-multi-round',
  'input-required-result-missing-input-response',
  'input-required-result-non-tool-request',
  'input-required-result-result-type',
  'input-required-result-unsupported-methods',
  'input-required-result-tampered-state',
  'input-required-result-capability-check',
  'input-required-result-ignore-extra-params',
  'input-required-result-validate-input',
];

/** The 2026-07-28 draft suite without its MRTR scenarios. */
const DRAFT_WITHOUT_MRTR = [
  'server-stateless',
  'sep-2164-resource-not-found',
  'caching',
  'http-header-validation',
  'http-custom-header-server-validation',
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
function eraRuns(target: string, url: string, draftScenarios?: string[]): PlannedRun[] {
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
      ...(draftScenarios ? { scenarios: draftScenarios } : { suite: 'draft' as const }),
    },
  ];
}

/**
 * The runs. `fixtureUrl` is the fixture's own endpoint, `baseUrl` Punk's (the proxy in front of the front replicas).
 *
 * Over stdio the fixture is a 2025-era server on one connection shared by every client: its server-to-client
 * requests carry no related request, so the gateway relays one only when exactly one call is in flight, and an
 * MRTR round a scenario abandons holds its upstream call until the pending bound expires. The MRTR scenarios
 * therefore run last on that lane and are recorded, not asserted (the same scenarios are asserted through the
 * HTTP upstream, which speaks 2026-07-28).
 */
export function conformancePlan(fixtureUrl: string, baseUrl: string): PlannedRun[] {
  const stdioUrl = `${baseUrl}/servers/conformance-stdio/mcp`;
  return [
    ...eraRuns('fixture', fixtureUrl),
    ...eraRuns('punk-server-http', `${baseUrl}/servers/conformance/mcp`),
    ...eraRuns('punk-server-stdio', stdioUrl, DRAFT_WITHOUT_MRTR),
    {
      label: 'punk-server-stdio 2026-07-28 mrtr (2025-era upstream)',
      url: stdioUrl,
      lane: 'punk-server-stdio',
      specVersion: '2026-07-28',
      scenarios: MRTR_SCENARIOS,
      informational: true,
    },
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
