/**
 * skaffold.yaml, checked against skaffold itself: its JSON schema for the file's apiVersion, taken from the source
 * of skaffold's Go module (`scripts/skaffold.mjs schema`), and, when the binary has been built from that module
 * (`node scripts/skaffold.mjs build`), skaffold parsing the file with each profile applied. Also the file's
 * agreement with the Dockerfile (an artifact per image target) and with the chart's values.
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Ajv, type ValidateFunction } from 'ajv';
import jsonPatch, { type Operation } from 'fast-json-patch';
import { parse } from 'yaml';
import { repoRoot } from './harness.js';

const script = join(repoRoot, 'scripts', 'skaffold.mjs');
const config = parse(readFileSync(join(repoRoot, 'skaffold.yaml'), 'utf8')) as SkaffoldConfig;
const targets = JSON.parse(
  spawnSync(process.execPath, [join(repoRoot, 'scripts', 'assemble-image.mjs'), '--list'], { encoding: 'utf8' }).stdout,
) as Record<string, unknown>;

/** The parts of skaffold.yaml the checks below read. */
interface SkaffoldConfig {
  apiVersion: string;
  build: { artifacts: { image: string; docker: { dockerfile: string; target: string } }[] };
  deploy: {
    helm: {
      releases: {
        chartPath: string;
        setValueTemplates: Record<string, string>;
        setValues: Record<string, unknown>;
        valuesFiles?: string[];
      }[];
    };
  };
  profiles: { name: string; patches: (Operation & { path: string })[]; portForward?: unknown[] }[];
}

/** Runs scripts/skaffold.mjs; `skip` is its message when Go is absent, so the schema checks cannot run. */
function skaffoldScript(command: string): { ok: true; out: string } | { ok: false; skip?: string; error: string } {
  const run = spawnSync(process.execPath, [script, command], { encoding: 'utf8' });
  if (run.status === 0) return { ok: true, out: run.stdout.trim() };
  const error = run.stderr.trim();
  return /Go is not installed/.test(error) ? { ok: false, skip: error, error } : { ok: false, error };
}

let validator: ValidateFunction | undefined;
/** Ajv's validator of skaffold's schema (draft-07; skaffold's own x-intellij-* keywords are annotations). */
function schemaValidator(path: string): ValidateFunction {
  validator ??= new Ajv({ strict: false, allErrors: true }).compile(JSON.parse(readFileSync(path, 'utf8')) as object);
  return validator;
}

test('skaffold.yaml uses the newest config apiVersion of skaffold and is valid by its JSON schema', (t) => {
  const latest = skaffoldScript('latest');
  if (!latest.ok && latest.skip) {
    t.skip(latest.skip);
    return;
  }
  assert.ok(latest.ok, latest.ok ? '' : latest.error);
  assert.equal(config.apiVersion, latest.out);
  const schema = skaffoldScript('schema');
  assert.ok(schema.ok, schema.ok ? '' : schema.error);
  const validate = schemaValidator(schema.out);
  assert.equal(validate(config), true, JSON.stringify(validate.errors, null, 2));
});

test('each profile applies to skaffold.yaml (its JSON patches resolve) and gives a config valid by the schema', (t) => {
  const schema = skaffoldScript('schema');
  if (!schema.ok && schema.skip) {
    t.skip(schema.skip);
    return;
  }
  assert.ok(schema.ok, schema.ok ? '' : schema.error);
  const validate = schemaValidator(schema.out);
  assert.deepEqual(
    config.profiles.map((p) => p.name),
    ['dev', 'cluster'],
  );
  for (const profile of config.profiles) {
    const { profiles: _, ...base } = structuredClone(config);
    // As skaffold applies a profile: its patches (RFC 6902, each path must resolve), then its own sections.
    const effective = jsonPatch.applyPatch(base, profile.patches, true, false).newDocument as Record<string, unknown>;
    if (profile.portForward) effective.portForward = profile.portForward;
    assert.equal(validate(effective), true, `profile ${profile.name}: ${JSON.stringify(validate.errors, null, 2)}`);
  }
});

test('the schema check is live: a misspelt field and a wrong type are rejected, naming where', (t) => {
  const schema = skaffoldScript('schema');
  if (!schema.ok && schema.skip) {
    t.skip(schema.skip);
    return;
  }
  assert.ok(schema.ok, schema.ok ? '' : schema.error);
  const validate = schemaValidator(schema.out);
  const broken = structuredClone(config) as unknown as { build: { artifacts: Record<string, unknown>[] } };
  broken.build.artifacts[0] = { image: 'ghcr.io/punk-dev/punk-operator', docker: { dockerfile: 'Dockerfile', targett: 'operator' } };
  broken.build.artifacts[1] = { image: 'ghcr.io/punk-dev/punk-mcp-front', docker: { target: 7 } };
  assert.equal(validate(broken), false);
  const errors = validate.errors ?? [];
  assert.ok(
    errors.some(
      (e) =>
        e.instancePath === '/build/artifacts/0/docker' && e.keyword === 'additionalProperties' && e.params.additionalProperty === 'targett',
    ),
    JSON.stringify(errors),
  );
  assert.ok(
    errors.some((e) => e.instancePath === '/build/artifacts/1/docker/target' && e.keyword === 'type'),
    JSON.stringify(errors),
  );
});

test('skaffold builds every image target of the Dockerfile as ghcr.io/punk-dev/punk-<target>', () => {
  const built = config.build.artifacts.map((artifact) => [artifact.image, artifact.docker.dockerfile, artifact.docker.target]);
  assert.deepEqual(
    built,
    Object.keys(targets).map((target) => [`ghcr.io/punk-dev/punk-${target}`, 'Dockerfile', target]),
  );
});

test('every image value skaffold sets names a built artifact', () => {
  // skaffold's template names: the image with every character outside [A-Za-z0-9_] as `_` (docs, deployers/helm).
  const names = new Set(config.build.artifacts.map((artifact) => artifact.image.replace(/[^A-Za-z0-9_]/g, '_')));
  for (const [key, template] of Object.entries(config.deploy.helm.releases[0]!.setValueTemplates)) {
    const match = /^\{\{\.IMAGE_(?:DOMAIN|REPO_NO_DOMAIN|TAG)_([A-Za-z0-9_]+)\}\}$/.exec(template);
    assert.ok(match, `${key}: ${template} is one image template`);
    assert.ok(names.has(match[1]!), `${key}: ${match[1]} is a built artifact`);
  }
});

test('every value skaffold sets, in any profile, is a key of the chart (when the chart is in this checkout)', (t) => {
  const release = config.deploy.helm.releases[0]!;
  const values = join(repoRoot, release.chartPath, 'values.yaml');
  if (!existsSync(values)) {
    t.skip(`${release.chartPath} is not in this checkout`);
    return;
  }
  const defaults = parse(readFileSync(values, 'utf8')) as Record<string, unknown>;
  const keys = [...Object.keys(release.setValueTemplates), ...Object.keys(release.setValues)];
  for (const profile of config.profiles)
    for (const patch of profile.patches)
      if (patch.path.startsWith('/deploy/helm/releases/0/setValues/')) keys.push(patch.path.split('/').at(-1)!);
  for (const profile of config.profiles) {
    for (const patch of profile.patches) {
      if (!patch.path.endsWith('/valuesFiles')) continue;
      for (const file of (patch as { value: string[] }).value)
        if (!file.includes('{{')) assert.ok(existsSync(join(repoRoot, file)), `profile ${profile.name}: values file ${file} exists`);
    }
  }
  for (const key of keys) {
    const found = key
      .split('.')
      .reduce<unknown>(
        (node, part) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined),
        defaults,
      );
    assert.notEqual(found, undefined, `${key} is a value of ${release.chartPath}`);
  }
});

test('skaffold itself reads skaffold.yaml with each profile applied (when built from its Go module)', (t) => {
  const path = skaffoldScript('path');
  if (!path.ok) {
    t.skip(`${path.error}; the JSON schema checks above still ran`);
    return;
  }
  for (const profile of ['', ...config.profiles.map((p) => p.name)]) {
    const run: SpawnSyncReturns<string> = spawnSync(
      path.out,
      ['diagnose', '--yaml-only', '--filename', 'skaffold.yaml', ...(profile ? ['--profile', profile] : [])],
      {
        cwd: repoRoot,
        encoding: 'utf8',
        env: { ...process.env, SKAFFOLD_UPDATE_CHECK: 'false', SKAFFOLD_COLLECT_METRICS: 'false' },
      },
    );
    assert.equal(run.status, 0, `skaffold diagnose ${profile ? `-p ${profile}` : ''}:\n${run.stdout}${run.stderr}`);
    const effective = parse(run.stdout) as SkaffoldConfig;
    assert.equal(effective.build.artifacts.length, Object.keys(targets).length);
    if (profile === 'dev')
      assert.deepEqual(effective.deploy.helm.releases[0]!.valuesFiles, [join(repoRoot, 'charts/punk/examples/dev-bundled.yaml')]);
  }
});
