// Builds the production layout of one container image into a fresh directory: what the Dockerfile's final stage
// copies to /opt/punk, so a test can check it and run it without a Docker engine (docs/images.md).
//
//   node scripts/assemble-image.mjs <target> <outDir>   assemble one target (outDir must not exist or be empty)
//   node scripts/assemble-image.mjs --list              print the targets as JSON: {"<target>": {"main": …} | {"binary": …}}
//
// A service target (operator, mcp-front, gateway, governance, ledger) gets the built dist/ of its workspace and of
// the @punk workspaces it depends on, without tests, declarations or source maps, and their SQL migrations/ (read
// at run time next to dist/); their package.json files without devDependencies or scripts; a root package.json
// naming only those workspaces; and a production-only `npm install --omit=dev` pinned by the repository's
// package-lock.json. The gateway's layout also gets an empty manifests/ directory (its image's PUNK_MANIFESTS: in a
// cluster its servers come from the operator). The bridge and runner targets get only the bridge's single
// executable at bin/punk-bridge (`npm run build:sea -w @punk/bridge` builds it).
// Run it after `tsc -b` from the repository root; npm must be on PATH (its cache is npm's usual one, or
// npm_config_cache). Exit code 1 with one message on any problem.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = dirname(dirname(fileURLToPath(import.meta.url)));

/** Service images: the workspace whose dist/main.js the image runs. */
const SERVICE_WORKSPACES = {
  operator: 'operator',
  'mcp-front': 'services/mcp-front',
  gateway: 'services/gateway',
  governance: 'services/governance',
  ledger: 'services/ledger',
};

/** Images that carry only the bridge's single executable (the runners add node/npx or uv/uvx in the Dockerfile). */
const BRIDGE_TARGETS = ['bridge', 'runner-npm', 'runner-pypi'];

/** Where `npm run build:sea -w @punk/bridge` writes the executable, and where the layout keeps it. */
const SEA_BINARY = 'services/bridge/dist-sea/punk-bridge';
const LAYOUT_BINARY = 'bin/punk-bridge';

/** Directories of a workspace read at run time beside dist/: the SQL migrations the gateway and ledger apply. */
const DATA_DIRS = ['migrations'];

/** Targets that get an empty manifests/ directory, the PUNK_MANIFESTS their image sets. */
const MANIFEST_TARGETS = ['gateway'];

/** package.json fields a runtime needs; the rest (devDependencies, scripts, types) stays out of the image. */
const RUNTIME_FIELDS = ['name', 'version', 'description', 'private', 'type', 'main', 'exports', 'bin', 'dependencies'];

/** A problem the script reports as one message and exit code 1, without a stack. */
class AssembleError extends Error {}

/**
 * The JSON content of a file.
 * @param {string} path
 * @returns {any}
 */
function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/**
 * The targets and what each image runs, relative to the layout root.
 * @returns {Record<string, { main: string } | { binary: string }>}
 */
function targets() {
  const all = {};
  for (const [target, workspace] of Object.entries(SERVICE_WORKSPACES)) all[target] = { main: `${workspace}/dist/main.js` };
  for (const target of BRIDGE_TARGETS) all[target] = { binary: LAYOUT_BINARY };
  return all;
}

/**
 * The workspace directories a workspace needs at run time: itself and, transitively, the @punk workspaces among
 * its `dependencies` (devDependencies are not followed), in the order of the root package.json's `workspaces`.
 * @param {string} start a workspace directory relative to the repository root
 * @returns {string[]}
 * @throws {AssembleError} when a dependency names a workspace package the root package.json does not list
 */
function runtimeWorkspaces(start) {
  const listed = readJson(join(repoRoot, 'package.json')).workspaces;
  const byName = new Map(listed.map((dir) => [readJson(join(repoRoot, dir, 'package.json')).name, dir]));
  const needed = new Set();
  const visit = (dir) => {
    if (needed.has(dir)) return;
    needed.add(dir);
    for (const name of Object.keys(readJson(join(repoRoot, dir, 'package.json')).dependencies ?? {})) {
      if (!name.startsWith('@punk/')) continue;
      const found = byName.get(name);
      if (found === undefined)
        throw new AssembleError(`${dir}/package.json depends on ${name}, which is not a workspace of the root package.json`);
      visit(found);
    }
  };
  visit(start);
  return listed.filter((dir) => needed.has(dir));
}

/**
 * Whether a file of a dist/ tree belongs in an image: compiled JavaScript and data, not tests, declarations,
 * source maps or TypeScript build info.
 * @param {string} path relative to the dist/ directory
 * @returns {boolean}
 */
function isRuntimeFile(path) {
  if (path === 'test' || path.startsWith('test/')) return false;
  return !/(\.test\.js|\.d\.ts|\.d\.ts\.map|\.js\.map|\.tsbuildinfo)$/.test(path);
}

/**
 * Copies one workspace's dist/ (runtime files only), its {@link DATA_DIRS} and a runtime package.json into the layout.
 * @param {string} dir workspace directory relative to the repository root
 * @param {string} out the layout root
 * @throws {AssembleError} when dist/ is missing (not built)
 */
function copyWorkspace(dir, out) {
  const dist = join(repoRoot, dir, 'dist');
  if (!existsSync(dist)) throw new AssembleError(`${dir}/dist does not exist: build first (\`tsc -b\` at the repository root)`);
  cpSync(dist, join(out, dir, 'dist'), { recursive: true, filter: (source) => isRuntimeFile(relative(dist, source)) });
  for (const data of DATA_DIRS) {
    if (existsSync(join(repoRoot, dir, data))) cpSync(join(repoRoot, dir, data), join(out, dir, data), { recursive: true });
  }
  const manifest = readJson(join(repoRoot, dir, 'package.json'));
  const runtime = Object.fromEntries(RUNTIME_FIELDS.filter((field) => field in manifest).map((field) => [field, manifest[field]]));
  writeFileSync(join(out, dir, 'package.json'), `${JSON.stringify(runtime, null, 2)}\n`);
}

/**
 * Assembles a service image's layout: workspaces, root manifest, production dependencies.
 * @param {string} workspace the target's workspace directory
 * @param {string} target
 * @param {string} out the layout root
 * @throws {AssembleError} when a workspace is not built, npm fails, or the entrypoint is missing afterwards
 */
function assembleService(workspace, target, out) {
  const workspaces = runtimeWorkspaces(workspace);
  for (const dir of workspaces) copyWorkspace(dir, out);
  if (MANIFEST_TARGETS.includes(target)) mkdirSync(join(out, 'manifests'));
  const root = readJson(join(repoRoot, 'package.json'));
  const manifest = { name: `punk-image-${target}`, version: root.version, private: true, type: 'module', workspaces };
  writeFileSync(join(out, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  // The repository's lock pins every version; npm drops what the smaller manifest no longer needs.
  copyFileSync(join(repoRoot, 'package-lock.json'), join(out, 'package-lock.json'));
  // No production dependency has an install script (only esbuild and node, both devDependencies, do).
  const npm = spawnSync(
    'npm',
    ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'],
    {
      cwd: out,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  if (npm.error) throw new AssembleError(`could not run npm: ${npm.error.message}`);
  if (npm.status !== 0) throw new AssembleError(`npm install --omit=dev in ${out} failed (exit ${npm.status ?? npm.signal})`);
  const main = join(out, workspace, 'dist', 'main.js');
  if (!existsSync(main)) throw new AssembleError(`${relative(out, main)} is missing from the layout`);
}

/**
 * Assembles a bridge or runner image's layout: the bridge's single executable at bin/punk-bridge.
 * @param {string} out the layout root
 * @throws {AssembleError} when the executable has not been built
 */
function assembleBridge(out) {
  const source = join(repoRoot, SEA_BINARY);
  if (!existsSync(source)) throw new AssembleError(`${SEA_BINARY} does not exist: build it first (\`npm run build:sea -w @punk/bridge\`)`);
  mkdirSync(join(out, dirname(LAYOUT_BINARY)), { recursive: true });
  copyFileSync(source, join(out, LAYOUT_BINARY));
  chmodSync(join(out, LAYOUT_BINARY), 0o755);
}

/**
 * Assembles `target` into `outDir`.
 * @param {string | undefined} target
 * @param {string | undefined} outDir
 * @throws {AssembleError} for an unknown target, a missing or non-empty outDir, or a failed step
 */
function assemble(target, outDir) {
  const known = Object.keys(targets());
  if (target === undefined || outDir === undefined)
    throw new AssembleError(`usage: assemble-image.mjs <target> <outDir>, target one of ${known.join(', ')}`);
  if (!known.includes(target)) throw new AssembleError(`unknown target "${target}": expected one of ${known.join(', ')}`);
  const out = resolve(outDir);
  if (existsSync(out) && readdirSync(out).length > 0) throw new AssembleError(`${out} is not empty: give a new or empty directory`);
  mkdirSync(out, { recursive: true });
  if (target in SERVICE_WORKSPACES) assembleService(SERVICE_WORKSPACES[target], target, out);
  else assembleBridge(out);
  process.stderr.write(`assemble-image: ${target} assembled in ${out}\n`);
}

try {
  if (process.argv[2] === '--list') process.stdout.write(`${JSON.stringify(targets())}\n`);
  else assemble(process.argv[2], process.argv[3]);
} catch (error) {
  if (!(error instanceof AssembleError)) throw error;
  process.stderr.write(`assemble-image: ${error.message}\n`);
  process.exit(1);
}
