/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`)
 * against the fixture upstream alone, against Punk's per-server endpoints in
 * the distributed topology (fixture over Streamable HTTP and over stdio), and
 * its protocol-level scenarios against the aggregated `/mcp`, in every
 * protocol era the suite covers (plan.ts): one test per target, two at a
 * time. Each run must end with no failure outside its baseline
 * (e2e/conformance/<target>.yaml, each entry explained there); the pending
 * suite is only recorded. The SDK-style upstream (sdk-server.ts) must pass
 * through Punk, over HTTP and stdio, every scenario it passes directly.
 * Every run's summary lines are printed as test diagnostics, and written to
 * `PUNK_CONFORMANCE_SUMMARY` when that names a file.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { conformancePlan, lostThroughPunk, pendingPlan, sdkPlan, type PlannedRun } from './conformance/plan.js';
import { formatOutcome, runConformance, type ConformanceOutcome } from './conformance/suite.js';
import { startConformanceTopology, type ConformanceTopology } from './conformance/topology.js';

/** The targets of the plan, in order (its lanes). */
const TARGETS = ['fixture', 'punk-server-http', 'punk-server-stdio', 'punk-aggregated'];

let topology: ConformanceTopology;
const report = new Map<string, string>();

before(async () => {
  topology = await startConformanceTopology();
});

after(async () => {
  await topology?.stop();
  if (process.env.PUNK_CONFORMANCE_SUMMARY) {
    const sdk = sdkPlan('', '').flatMap(({ direct, through }) => [direct, ...through]);
    const order = [...conformancePlan('', ''), ...sdk, ...pendingPlan('', '')].map((run) => run.label);
    await writeFile(
      process.env.PUNK_CONFORMANCE_SUMMARY,
      order
        .filter((label) => report.has(label))
        .map((label) => report.get(label))
        .join('\n\n') + '\n',
    );
  }
});

/** Runs `runs` one after the other, prints and records each summary, and returns their outcomes. */
async function runAndReport(t: { diagnostic(message: string): void }, runs: PlannedRun[]): Promise<ConformanceOutcome[]> {
  const outcomes: ConformanceOutcome[] = [];
  for (const run of runs) {
    const outcome = await runConformance(run);
    const text = formatOutcome(outcome);
    report.set(run.label, text);
    for (const line of text.split('\n')) t.diagnostic(line);
    outcomes.push(outcome);
  }
  return outcomes;
}

/** Runs `runs` one after the other, prints each summary, and returns the runs that failed outside their baseline. */
async function runLane(t: { diagnostic(message: string): void }, runs: PlannedRun[]): Promise<string[]> {
  const failed: string[] = [];
  for (const [i, outcome] of (await runAndReport(t, runs)).entries()) {
    const text = formatOutcome(outcome);
    if (outcome.summary.length === 0) failed.push(`${outcome.run.label}: no summary\n${outcome.output.slice(-2000)}`);
    else if (!runs[i]?.informational && outcome.exitCode !== 0) failed.push(text);
  }
  return failed;
}

describe('the MCP conformance suite', { concurrency: 2 }, () => {
  for (const target of TARGETS) {
    test(`${target}: every run passes, outside the failures its baseline explains`, async (t) => {
      const runs = conformancePlan(topology.fixtureUrl, topology.baseUrl).filter((run) => run.lane === target);
      const failed = await runLane(t, runs);
      if (failed.length > 0 && target !== 'fixture')
        for (const s of topology.services) t.diagnostic(`${s.name} ${s.url} output:\n${s.output().slice(-3000)}`);
      assert.deepEqual(failed, [], 'runs with failures outside their baseline');
    });
  }
  void test('the SDK-style upstream: every scenario that passes against it directly passes through Punk', async (t) => {
    const lost: string[] = [];
    for (const { direct, through } of sdkPlan(topology.sdkUrl, topology.baseUrl)) {
      const [directOutcome, ...outcomes] = await runAndReport(t, [direct, ...through]);
      for (const outcome of outcomes) {
        const missing = directOutcome ? lostThroughPunk(directOutcome, outcome) : [];
        if (missing.length > 0) lost.push(`${outcome.run.label}:\n  ${missing.join('\n  ')}`);
      }
    }
    if (lost.length > 0) for (const s of topology.services) t.diagnostic(`${s.name} ${s.url} output:\n${s.output().slice(-3000)}`);
    assert.deepEqual(lost, [], 'scenarios that pass directly and fail through Punk');
  });
  test('the pending suite, for the record', async (t) => {
    assert.deepEqual(await runLane(t, pendingPlan(topology.fixtureUrl, topology.baseUrl)), []);
  });
});
