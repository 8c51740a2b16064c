#!/usr/bin/env node
// `punk <args>` from a checkout, as `npm start` (`punk up`), `npm run cluster` and `npm run punk` run it:
// compiles first (`tsc -b`) when a project of the build (tsconfig.json's references) has a source or
// tsconfig newer than its last build (its tsconfig.tsbuildinfo), else starts at once: `tsc -b` needs about
// half a second to find nothing to do (more on a loaded machine), this check a few milliseconds. Node's
// compile cache (module.enableCompileCache) keeps the compiled code of every module between starts.
//   node scripts/punk.mjs up [options]
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Latest modification time (ms) of the files under `dir` (a project's `src`, which its tsconfig includes). */
function newestSource(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether the project in `dir` changed since its last build (or was never built). */
function stale(dir, shared) {
  let built;
  try {
    built = statSync(join(dir, 'tsconfig.tsbuildinfo')).mtimeMs;
  } catch {
    return true;
  }
  return Math.max(shared, statSync(join(dir, 'tsconfig.json')).mtimeMs, newestSource(join(dir, 'src'))) > built;
}

const { references } = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8'));
const shared = Math.max(statSync(join(root, 'tsconfig.json')).mtimeMs, statSync(join(root, 'tsconfig.base.json')).mtimeMs);
if (references.some((reference) => stale(join(root, reference.path), shared))) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const build = spawnSync(process.execPath, [tsc, '-b'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

// Absent before Node 22.1: main.js then says which Node is needed.
module.enableCompileCache?.();
const main = join(root, 'services/cli/dist/main.js');
process.argv.splice(1, 1, main);
await import(pathToFileURL(main).href);
