/**
 * `node e2e/dist/conformance/run.js [--pending] [--summary <file>] [--only <label substring>]`:
 * starts the fixture and Punk's distributed topology, runs the conformance
 * plan (plan.ts), prints each run's summary lines and failed checks, and
 * writes them to `--summary` when given. Exit code 1 when a run failed
 * outside its baseline.
 *
 * `--sdk`: the SDK-style upstream's runs instead (sdkPlan, `--only` filters them too), each direct run then the
 * same through Punk, printing the scenarios that pass directly and not through Punk (exit code 1 when any).
 *
 * `--serve`: starts the same and prints its URLs instead, until Ctrl-C, to run
 * `conformance server --url ...` by hand.
 */
import { writeFile } from 'node:fs/promises';
import { conformancePlan, lostThroughPunk, pendingPlan, runAll, sdkPlan } from './plan.js';
import { formatOutcome, runConformance } from './suite.js';
import { startConformanceTopology } from './topology.js';

const args = process.argv.slice(2);
const option = (name: string) => {
  const index = args.indexOf(name);
  return index === -1 ? undefined : args[index + 1];
};
const topology = await startConformanceTopology();
if (args.includes('--serve')) {
  console.log(
    `fixture: ${topology.fixtureUrl}\nsdk: ${topology.sdkUrl}\nPunk: ${topology.baseUrl}/mcp, ${topology.baseUrl}/servers/{conformance,conformance-stdio,sdk,sdk-stdio}/mcp`,
  );
  await new Promise((resolve) => process.once('SIGINT', resolve));
  await topology.stop();
  process.exit(0);
}
try {
  const only = option('--only');
  if (args.includes('--sdk')) {
    let lost = 0;
    for (const { direct, through } of sdkPlan(topology.sdkUrl, topology.baseUrl)) {
      if (only && ![direct, ...through].some((r) => r.label.includes(only))) continue;
      const directOutcome = await runConformance(direct);
      console.log(formatOutcome(directOutcome) + '\n');
      for (const run of through) {
        const outcome = await runConformance(run);
        const missing = lostThroughPunk(directOutcome, outcome);
        lost += missing.length;
        console.log(`${formatOutcome(outcome)}\n  passing directly, not through Punk: ${missing.join('; ') || 'none'}\n`);
      }
    }
    process.exitCode = lost > 0 ? 1 : 0;
  } else {
    let runs = conformancePlan(topology.fixtureUrl, topology.baseUrl);
    if (args.includes('--pending')) runs.push(...pendingPlan(topology.fixtureUrl, topology.baseUrl));
    if (only) runs = runs.filter((r) => r.label.includes(only));
    const outcomes = await runAll(runs);
    const text = outcomes.map(formatOutcome).join('\n\n') + '\n';
    console.log(text);
    const summary = option('--summary');
    if (summary) await writeFile(summary, text);
    process.exitCode = outcomes.some((o, i) => o.exitCode !== 0 && !runs[i]?.informational) ? 1 : 0;
  }
} finally {
  await topology.stop();
}
