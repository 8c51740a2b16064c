/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`)
 * against the fixture upstream alone, against Punk's per-server endpoints in
 * the distributed topology (fixture over Streamable HTTP and over stdio), and
 * its protocol-level scenarios against the aggregated `/mcp`, in every
 * protocol era the suite covers (plan.ts): one test per target, two at a
 * time. Each run must end with no failure outside its baseline
 * (e2e/conformance/<target>.yaml, each entry explained there); informational
 * runs (the pending suite, MRTR over the 2025-era stdio upstream) are only
 * recorded. Every run's summary lines are printed as test diagnostics, and
 * written to `PUNK_CONFORMANCE_SUMMARY` when that names a file.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { conformancePlan, pendingPlan, type PlannedRun } from './conformance/plan.js';
import { formatOutcome, runConformance } from './conformance/suite.js';
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
    const order = [...conformancePlan('', ''), ...pendingPlan('', '')].map((run) => run.label);
    await writeFile(
      process.env.PUNK_CONFORMANCE_SUMMARY,
      order
        .filter((label) => report.has(label))
        .map((label) => report.get(label))
        .join('\n\n') + '\n',
    );
  }
});

/** Runs `runs` one after the other, prints each summary, and returns the runs that failed outside their baseline. */
async function runLane(t: { diagnostic(message: string): void }, runs: PlannedRun[]): Promise<string[]> {
  const failed: string[] = [];
  for (const run of runs) {
    const outcome = await runConformance(run);
    const text = formatOutcome(outcome);
    report.set(run.label, text);
    for (const line of text.split('\n')) t.diagnostic(line);
    if (outcome.summary.length === 0) failed.push(`${run.label}: no summary\n${outcome.output.slice(-2000)}`);
    else if (!run.informational && outcome.exitCode !== 0) failed.push(text);
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
  test('the pending suite, for the record', async (t) => {
    assert.deepEqual(await runLane(t, pendingPlan(topology.fixtureUrl, topology.baseUrl)), []);
  });
});
