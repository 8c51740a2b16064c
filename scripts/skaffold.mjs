// Skaffold from its Go module, to check skaffold.yaml without installing skaffold (docs/images.md).
//
//   node scripts/skaffold.mjs schema   print the path of skaffold's JSON schema for skaffold.yaml's apiVersion,
//                                      copied from the module's source (docs-v2/content/en/schemas/) into the cache
//   node scripts/skaffold.mjs latest   print the newest apiVersion the module has a schema for
//   node scripts/skaffold.mjs build    build the skaffold binary into the cache (skipped when it answers `version`)
//   node scripts/skaffold.mjs path     print the binary's path (exit 1 when it is not built)
//
// Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/punk/skaffold/<version>/ (schemas/, bin/); Go's module cache is Go's own.
// Needs Go (`go` on PATH or /usr/local/go/bin/go) and the Go module proxy. Exit code 1 with one message on failure.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findGo } from './go.mjs';

// v2.16.1: the newest skaffold release the Go module proxy serves here; its newest config schema is v4beta13.
const SKAFFOLD_MODULE = 'github.com/GoogleContainerTools/skaffold/v2';
const SKAFFOLD_VERSION = 'v2.16.1';
const SCHEMAS_DIR = 'docs-v2/content/en/schemas';

const repoRoot = dirname(dirname(fileURLToPath(import.meta.url)));
const cacheDir = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'punk', 'skaffold', SKAFFOLD_VERSION);
const binary = join(cacheDir, 'bin', 'skaffold');

/** A failure the script reports as one message and exit code 1, without a stack. */
class SkaffoldError extends Error {}

/**
 * The `go` command: the one on PATH, else /usr/local/go/bin/go.
 * @returns {string}
 * @throws {SkaffoldError} when neither answers `go version`
 */
function goCommand() {
  const go = findGo();
  if (go) return go.command;
  throw new SkaffoldError(
    'Go is not installed: skaffold and its schemas come from its Go module (install Go 1.24 or later, https://go.dev/dl)',
  );
}

/**
 * The directory of the skaffold module's source, downloaded through the Go module proxy when absent.
 * @returns {string}
 * @throws {SkaffoldError} when Go is absent or the download fails
 */
function moduleDir() {
  const go = goCommand();
  // Outside any Go module, so no go.mod of the current directory takes part.
  const run = spawnSync(go, ['mod', 'download', '-json', `${SKAFFOLD_MODULE}@${SKAFFOLD_VERSION}`], { encoding: 'utf8', cwd: tmpdir() });
  let info;
  try {
    info = JSON.parse(run.stdout);
  } catch {
    throw new SkaffoldError(`go mod download ${SKAFFOLD_MODULE}@${SKAFFOLD_VERSION} failed: ${run.stderr.trim()}`);
  }
  if (info.Error || !info.Dir)
    throw new SkaffoldError(`go mod download ${SKAFFOLD_MODULE}@${SKAFFOLD_VERSION} failed: ${info.Error ?? 'no Dir'}`);
  return info.Dir;
}

/**
 * The apiVersion of the repository's skaffold.yaml (`skaffold/v4beta13` → `v4beta13`).
 * @returns {string}
 * @throws {SkaffoldError} when skaffold.yaml has no `apiVersion: skaffold/…` line
 */
function configVersion() {
  const match = /^apiVersion:\s*skaffold\/(\S+)\s*$/m.exec(readFileSync(join(repoRoot, 'skaffold.yaml'), 'utf8'));
  if (!match) throw new SkaffoldError('skaffold.yaml has no `apiVersion: skaffold/<version>` line');
  return match[1];
}

/**
 * Copies the JSON schema of skaffold.yaml's apiVersion into the cache.
 * @returns {string} its path
 * @throws {SkaffoldError} when the module has no schema for that apiVersion
 */
function schema() {
  const version = configVersion();
  const target = join(cacheDir, 'schemas', `${version}.json`);
  if (existsSync(target)) return target;
  const source = join(moduleDir(), SCHEMAS_DIR, `${version}.json`);
  if (!existsSync(source)) throw new SkaffoldError(`skaffold ${SKAFFOLD_VERSION} has no schema for apiVersion skaffold/${version}`);
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(source, target);
  return target;
}

/**
 * The newest config apiVersion of the module (`skaffold/v4beta13`), by the order skaffold's versions sort in.
 * @returns {string}
 */
function latest() {
  const versions = readdirSync(join(moduleDir(), SCHEMAS_DIR))
    .filter((name) => /^v\d+(alpha|beta)?\d*\.json$/.test(name))
    .map((name) => name.slice(0, -5));
  const key = (version) => {
    const [, major, stage = 'ga', minor = '0'] = /^v(\d+)(alpha|beta)?(\d*)$/.exec(version);
    return [Number(major), ['alpha', 'beta', 'ga'].indexOf(stage), Number(minor || 0)];
  };
  versions.sort((a, b) => {
    const [x, y] = [key(a), key(b)];
    return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
  });
  return `skaffold/${versions.at(-1)}`;
}

/**
 * Whether the cached binary runs and reports the pinned version.
 * @returns {boolean}
 */
function built() {
  if (!existsSync(binary)) return false;
  const run = spawnSync(binary, ['version'], { encoding: 'utf8', timeout: 30_000 });
  return run.status === 0 && run.stdout.includes(SKAFFOLD_VERSION);
}

/**
 * Builds cmd/skaffold of the module into the cache (inside the module's own directory, so its go.mod with its
 * replace directives applies, as `go install` would refuse them).
 * @throws {SkaffoldError} when the build fails
 */
function build() {
  if (built()) return;
  const ldflags = `-s -w -X ${SKAFFOLD_MODULE}/pkg/skaffold/version.version=${SKAFFOLD_VERSION}`;
  const run = spawnSync(goCommand(), ['build', '-trimpath', `-ldflags=${ldflags}`, '-o', binary, './cmd/skaffold'], {
    cwd: moduleDir(),
    stdio: 'inherit',
    env: { ...process.env, GOFLAGS: '-mod=mod' },
  });
  if (run.status !== 0) throw new SkaffoldError(`building skaffold ${SKAFFOLD_VERSION} failed (exit ${run.status ?? run.signal})`);
}

try {
  const command = process.argv[2];
  if (command === 'schema') process.stdout.write(`${schema()}\n`);
  else if (command === 'latest') process.stdout.write(`${latest()}\n`);
  else if (command === 'build') build();
  else if (command === 'path') {
    if (!built())
      throw new SkaffoldError(`skaffold ${SKAFFOLD_VERSION} is not built (no working ${binary}): run \`node scripts/skaffold.mjs build\``);
    process.stdout.write(`${binary}\n`);
  } else
    throw new SkaffoldError(`usage: skaffold.mjs schema|latest|build|path (got ${command === undefined ? 'nothing' : `"${command}"`})`);
} catch (error) {
  if (!(error instanceof SkaffoldError)) throw error;
  process.stderr.write(`skaffold: ${error.message}\n`);
  process.exit(1);
}
