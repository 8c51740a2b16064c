/**
 * The Dockerfile, checked without a Docker engine: dockerfile-utils (the validator of VS Code's Docker tooling)
 * finds no problem in it, and every image target has the shape docs/images.md promises: a stage per target that
 * `scripts/assemble-image.mjs --list` knows, the layout copied to /opt/punk, user 65532, tini as PID 1, the
 * process the layout holds, a port, and the OCI labels.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Copy } from 'dockerfile-ast';
import { chainInstructions, dockerfilePath, dockerfileStages, imageLabels, lastExecForm, stageChain } from './dockerfile-stages.js';
import { repoRoot } from './harness.js';

const linter = join(repoRoot, 'node_modules', 'dockerfile-utils', 'bin', 'dockerfile-utils');
const targets = JSON.parse(
  spawnSync(process.execPath, [join(repoRoot, 'scripts', 'assemble-image.mjs'), '--list'], { encoding: 'utf8' }).stdout,
) as Record<string, { main: string } | { binary: string }>;

/** What `dockerfile-utils lint --json` reports: one entry per problem. */
function lint(path: string): {
  status: number | null;
  problems: { severity: number; message: string; range: { start: { line: number } } }[];
} {
  const run = spawnSync(process.execPath, [linter, 'lint', '--json', path], { encoding: 'utf8' });
  assert.equal(run.stderr, '', `dockerfile-utils wrote to stderr: ${run.stderr}`);
  return { status: run.status, problems: JSON.parse(run.stdout || '[]') };
}

test('dockerfile-utils finds no problem in the Dockerfile', () => {
  const { status, problems } = lint(dockerfilePath);
  assert.deepEqual(
    problems.map((p) => `line ${p.range.start.line + 1}: ${p.message}`),
    [],
  );
  assert.equal(status, 0);
});

test('dockerfile-utils does report the problems of a broken Dockerfile (the check above is live)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'punk-dockerfile-'));
  try {
    const broken = join(dir, 'Dockerfile');
    writeFileSync(broken, 'FROM node:24-bookworm-slim\nUSER\nEXPOSE 4100\nCMD ["node"\n');
    const { status, problems } = lint(broken);
    assert.notEqual(status, 0);
    assert.ok(
      problems.some((p) => p.range.start.line === 1 && /no arguments/.test(p.message)),
      JSON.stringify(problems),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every image target is a stage, and every stage name is unique', () => {
  const names = dockerfileStages()
    .map((stage) => stage.name)
    .filter((name) => name !== null);
  assert.deepEqual(names.length, new Set(names).size, `duplicate stage names: ${names.join(', ')}`);
  for (const target of Object.keys(targets)) assert.ok(names.includes(target), `no stage named ${target}`);
});

for (const [target, runs] of Object.entries(targets)) {
  test(`${target}: copies its layout to /opt/punk, runs as 65532 under tini on a slim base, exposes a port, carries the OCI labels`, () => {
    const chain = stageChain(target);
    const base = chain[0]!.from;
    assert.match(`${base.getImageName()}:${base.getImageTag()}`, /^(node|debian|python):.*slim/, `${target} is built on a slim image`);

    const copies = chainInstructions(target, 'COPY') as Copy[];
    const layoutCopy = copies.find((copy) => copy.getArgumentsContent()?.endsWith('/layout /opt/punk'));
    assert.ok(layoutCopy, `${target} copies a layout to /opt/punk`);
    const from = layoutCopy.getFromFlag()?.getValue() ?? '';
    const layoutStage = dockerfileStages().find((stage) => stage.name === from);
    const assembles = layoutStage?.instructions.some(
      (i) =>
        i.getKeyword() === 'RUN' &&
        i.getArgumentsContent()?.includes(`node scripts/assemble-image.mjs ${'main' in runs ? target : 'bridge'} /layout`),
    );
    assert.ok(assembles, `${from} runs the assembly script for ${target}`);

    const users = chainInstructions(target, 'USER');
    assert.equal(users.at(-1)?.getArgumentsContent(), '65532:65532');
    const entrypoint = lastExecForm(target, 'ENTRYPOINT') ?? [];
    assert.deepEqual(entrypoint.slice(0, 2), ['/usr/bin/tini', '--']);
    const command = [...entrypoint.slice(2), ...(lastExecForm(target, 'CMD') ?? [])];
    if ('main' in runs) assert.deepEqual(command, ['node', `/opt/punk/${runs.main}`]);
    else assert.match(command.join(' '), /punk-bridge/);

    assert.ok(chainInstructions(target, 'EXPOSE').length > 0, `${target} exposes its port`);
    assert.deepEqual(chainInstructions(target, 'HEALTHCHECK'), [], 'Kubernetes probes, not HEALTHCHECK');
    const labels = imageLabels(target);
    assert.equal(labels['org.opencontainers.image.title'], `punk-${target}`);
    for (const key of ['description', 'source', 'version', 'revision', 'vendor'])
      assert.ok(labels[`org.opencontainers.image.${key}`], `label org.opencontainers.image.${key}`);
  });
}
