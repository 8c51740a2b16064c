#!/usr/bin/env node
// What `npm ci` / `npm install` run last (npm's `prepare`): compile every workspace (`tsc -b`), build the
// dashboard (scripts/build-ui.mjs) and make the
// template of a new embedded database (services/lib/src/db/pglite-template.ts), so that the first `npm start`
// neither compiles nor runs initdb. package.json skips it where the sources are not there yet (the Dockerfile
// installs dependencies before it copies them).
//   node scripts/prepare.mjs
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
for (const args of [[tsc, '-b'], [join(root, 'scripts/build-ui.mjs')]]) {
  const build = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

// Opening an in-memory database makes the template when the cache has none for this PGlite version; opening one in
// a new data directory (removed after) makes its directory form, which every new data directory is a copy of.
const { createLogger, openDatabase } = await import(pathToFileURL(join(root, 'services/lib/dist/index.js')).href);
const log = createLogger('prepare', 'warn');
await (await openDatabase({ dataDir: null, log })).close();
const scratch = mkdtempSync(join(tmpdir(), 'punk-prepare-'));
try {
  await (await openDatabase({ dataDir: join(scratch, 'data'), log })).close();
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
