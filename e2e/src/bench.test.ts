/**
 * `npm run bench` in its quickest mode against `punk up` only: it prints the latency table and writes the
 * markdown report, each with a row per selected path for every era and session count, and no row of a path
 * it was not asked for. Figures are not checked (they belong to the benchmark, not to a test).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { removeDir, repoRoot } from './harness.js';

const PUNK_UP_PATHS = ['up-server-http', 'up-server-stdio', 'up-mcp-http', 'up-mcp-stdio'];
const OTHER_PATHS = ['direct-http', 'direct-stdio', 'up-ephemeral-stdio', 'cluster-http', 'cluster-stdio', 'supergateway', 'mcp-proxy'];

let dir: string | undefined;
after(async () => {
  if (dir) await removeDir(dir);
});

test(
  'npm run bench -- --quick --only punk-up prints the table and writes the report, a row per punk up path',
  { timeout: 600_000 },
  async () => {
    dir = await mkdtemp(join(tmpdir(), 'punk-bench-test-'));
    const out = join(dir, 'benchmarks.md');
    const child = spawn(process.execPath, [join(repoRoot, 'bench/suite.mjs'), '--quick', '--only', 'punk-up', '--out', out], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, `the benchmark exits 0:\n${stderr}`);

    const markdown = await readFile(out, 'utf8');
    assert.match(markdown, /^# Benchmarks/m);
    assert.match(markdown, /^- machine: \d+ CPUs/m, 'the report names the machine');
    for (const [where, text] of [
      ['printed table', stdout],
      ['markdown report', markdown],
    ] as const) {
      assert.match(text, /\| era \| sessions \| path \| p50 \| p99 \| calls\/s \| CPU\/call \|/, `the ${where} has the latency table`);
      for (const era of ['2025-11-25', '2026-07-28'])
        for (const sessions of [1, 8, 32])
          for (const path of PUNK_UP_PATHS)
            assert.match(
              text,
              // p50, p99, calls/s, then the CPU per call of Punk's process.
              new RegExp(`^\\| ${era} \\| ${String(sessions)} \\| ${path} \\| \\d[^|]* \\| \\d[^|]* \\| \\d+ \\| \\d+\\.\\d+ ms \\|`, 'm'),
              `the ${where} has ${path}, ${era}, ${String(sessions)} sessions`,
            );
      for (const path of OTHER_PATHS)
        assert.doesNotMatch(text, new RegExp(`^\\| [0-9-]+ \\| \\d+ \\| ${path} \\|`, 'm'), `no ${path} row in the ${where}`);
      assert.match(text, /^## Targets/m, `the ${where} lists the targets`);
    }
  },
);
