#!/usr/bin/env node
// Builds the dashboard (workspace ui/) into ui/dist: type-checks it (`tsc -p ui`), then bundles it with Vite
// (ui/vite.config.ts). Run by `npm run build` (after `tsc -b`, whose @punk/lib declarations the dashboard's
// types come from) and by scripts/prepare.mjs, so `npm ci` leaves a dashboard mcp-front can serve at /ui.
//   node scripts/build-ui.mjs
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const ui = join(root, 'ui');
const require = createRequire(import.meta.url);
for (const [bin, args] of [
  [require.resolve('typescript/bin/tsc'), ['-p', '.']],
  [join(dirname(require.resolve('vite/package.json')), 'bin', 'vite.js'), ['build', '--logLevel', 'warn']],
]) {
  const step = spawnSync(process.execPath, [bin, ...args], { cwd: ui, stdio: 'inherit' });
  if (step.status !== 0) process.exit(step.status ?? 1);
}
