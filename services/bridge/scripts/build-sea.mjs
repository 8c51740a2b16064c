// `npm run build:sea -w @punk/bridge`: the bridge as one self-contained executable, dist-sea/punk-bridge, that an
// init container copies into any glibc Linux image of the same architecture (docs/bridge.md). Bundles the built
// dist/main.js and its dependencies into one CommonJS file (esbuild; Node 24 runs only CommonJS as a single
// executable's main script), makes the preparation blob (node --experimental-sea-config) and injects it into a
// copy of the running Node binary (postject), as the Node 24 "Single executable applications" guide describes.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const out = join(root, 'dist-sea');
const bundle = join(out, 'punk-bridge.cjs');
const blob = join(out, 'punk-bridge.blob');
const binary = join(out, 'punk-bridge');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, 'dist/main.js')],
  bundle: true,
  platform: 'node',
  target: `node${process.versions.node.split('.')[0]}`,
  format: 'cjs',
  outfile: bundle,
  logLevel: 'warning',
});
const config = join(out, 'sea-config.json');
writeFileSync(config, JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: true }));
execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: ['ignore', 'ignore', 'inherit'] });
copyFileSync(process.execPath, binary);
chmodSync(binary, 0o755);
// The npm `node` package's binary carries debug information (about 20 MB): drop it when binutils are installed.
try {
  execFileSync('strip', [binary], { stdio: 'ignore' });
} catch {
  console.log('strip (binutils) is not installed: the executable keeps the debug information of the Node binary');
}
const postject = join(dirname(fileURLToPath(import.meta.resolve('postject'))), 'cli.js');
// postject warns about every ELF note section it cannot name; its output matters only when it fails.
const injected = spawnSync(
  process.execPath,
  [postject, binary, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'],
  { encoding: 'utf8' },
);
if (injected.status !== 0) {
  process.stderr.write(`${injected.stdout}${injected.stderr}postject failed (exit ${injected.status ?? injected.signal})\n`);
  process.exit(1);
}
console.log(`built ${binary} (Node ${process.versions.node}, ${process.platform}-${process.arch})`);
