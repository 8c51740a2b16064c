/**
 * Runs the official MCP conformance suite (`@modelcontextprotocol/conformance`,
 * its `conformance server` command) against one URL and reads back what it
 * printed: the summary lines and the failed checks of each scenario.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../harness.js';

/** The CLI of the installed suite. */
export const conformanceBin = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js');

/** Baselines of known failures, per run kind (YAML, the suite's `--expected-failures` format). */
export const baselineDir = join(repoRoot, 'e2e', 'conformance');

/** One invocation of `conformance server`. */
export interface ConformanceRun {
  /** A label for the summary file: `fixture 2025-11-25 active`. */
  label: string;
  url: string;
  specVersion: '2025-03-26' | '2025-06-18' | '2025-11-25' | '2026-07-28';
  /** `active` (default), `draft`, `pending` or `all`. */
  suite?: 'active' | 'draft' | 'pending' | 'all';
  /** Only these scenarios (one CLI call each, run one after the other); default every scenario of the suite. */
  scenarios?: string[];
  /** Path of an expected-failures YAML file. */
  expectedFailures?: string;
  /** Per-scenario timeout, in milliseconds (default the suite's 30 s). */
  timeoutMs?: number;
}

/** A failed check (or a warning, which a baseline counts as a failure too) of a scenario, from its `checks.json`. */
export interface FailedCheck {
  scenario: string;
  id: string;
  status: 'FAILURE' | 'WARNING';
  message: string;
}

/** What one run printed and wrote. */
export interface ConformanceOutcome {
  run: ConformanceRun;
  /** Exit code of the CLI (0: no failure outside the baseline). */
  exitCode: number | null;
  /** The lines after `=== SUMMARY ===` (`✓ tools-list: 3 passed, 0 failed`, ..., `Total: ...`). */
  summary: string[];
  /** Every failed check, whether baselined or not. */
  failures: FailedCheck[];
  /** Everything the CLI printed. */
  output: string;
  durationMs: number;
}

function invoke(args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [conformanceBin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

async function failedChecks(dir: string): Promise<FailedCheck[]> {
  const failures: FailedCheck[] = [];
  for (const entry of await readdir(dir).catch(() => [] as string[])) {
    const text = await readFile(join(dir, entry, 'checks.json'), 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    const scenario = entry.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
    for (const check of JSON.parse(text) as Array<{ id: string; status: string; description?: string; errorMessage?: string }>) {
      if (check.status === 'FAILURE' || check.status === 'WARNING')
        failures.push({ scenario, id: check.id, status: check.status, message: check.errorMessage ?? check.description ?? '' });
    }
  }
  return failures;
}

/** Summary lines of one CLI output: everything after `=== SUMMARY ===` that is not blank. */
export function summaryLines(output: string): string[] {
  const at = output.lastIndexOf('=== SUMMARY ===');
  if (at === -1) return [];
  return output
    .slice(at + '=== SUMMARY ==='.length)
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line !== '');
}

/**
 * The summary line of a one-scenario CLI output, shaped like the suite's own (`✓ ping: 2 passed, 0 failed`,
 * with `, N warnings` when there are any), `- ping: skipped (...)` when the scenario does not apply at the
 * spec version, `✗ ping: no result` when the output has neither.
 */
export function scenarioLine(scenario: string, output: string): string {
  const skipped = /SKIPPED: (.*)/.exec(output);
  if (skipped) return `- ${scenario}: skipped (${skipped[1]!.replace(/ Use --force.*/, '')})`;
  const result = /Passed: (\d+)\/(\d+), (\d+) failed, (\d+) warnings/.exec(output);
  if (!result) return `✗ ${scenario}: no result`;
  const [, passed, , failed, warnings] = result;
  return `${failed === '0' ? '✓' : '✗'} ${scenario}: ${passed} passed, ${failed} failed${warnings === '0' ? '' : `, ${warnings} warnings`}`;
}

/**
 * Runs `conformance server --url ... --spec-version ... --suite ...` (with
 * Node of this process, which must be 22 or later) and collects its summary
 * and failed checks. Never throws for failing checks; throws only when the
 * CLI cannot be started.
 */
export async function runConformance(run: ConformanceRun): Promise<ConformanceOutcome> {
  const started = Date.now();
  const outDir = await mkdtemp(join(tmpdir(), 'punk-conformance-'));
  const base = ['server', '--url', run.url, '--spec-version', run.specVersion, '-o', outDir];
  if (run.expectedFailures) base.push('--expected-failures', run.expectedFailures);
  if (run.timeoutMs) base.push('--timeout', String(run.timeoutMs));
  const calls = run.scenarios ? run.scenarios.map((s) => [...base, '--scenario', s]) : [[...base, '--suite', run.suite ?? 'active']];
  let exitCode: number | null = 0;
  let output = '';
  const summary: string[] = [];
  try {
    for (const args of calls) {
      const result = await invoke(args, 5 * 60_000);
      output += result.output;
      if (result.code !== 0) exitCode = result.code;
      summary.push(...(run.scenarios ? [scenarioLine(args[args.length - 1]!, result.output)] : summaryLines(result.output)));
    }
    const failures = await failedChecks(outDir);
    if (run.scenarios) {
      const totals = summary.map((line) => /: (\d+) passed, (\d+) failed/.exec(line)).filter((m) => m !== null);
      summary.push(`Total: ${totals.reduce((n, m) => n + Number(m[1]), 0)} passed, ${totals.reduce((n, m) => n + Number(m[2]), 0)} failed`);
    }
    return { run, exitCode, summary, failures, output, durationMs: Date.now() - started };
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

/** The summary of a run as a block of text: a heading naming the run, then its lines. */
export function formatOutcome(outcome: ConformanceOutcome): string {
  const head = `## ${outcome.run.label} (${outcome.run.url}, --spec-version ${outcome.run.specVersion}${outcome.run.scenarios ? `, ${outcome.run.scenarios.length} scenarios` : `, --suite ${outcome.run.suite ?? 'active'}`}; exit ${outcome.exitCode}; ${(outcome.durationMs / 1000).toFixed(1)} s)`;
  const failed = outcome.failures.map(
    (f) => `  ${f.status === 'FAILURE' ? 'FAILED' : 'WARNING'} ${f.scenario} / ${f.id}: ${f.message.replace(/\s+/g, ' ').slice(0, 300)}`,
  );
  return [head, ...outcome.summary, ...failed].join('\n');
}
