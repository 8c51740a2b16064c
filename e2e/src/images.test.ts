/**
 * The container images' contents without a Docker engine: for each target, `scripts/assemble-image.mjs` (the very
 * step the Dockerfile runs) builds the image's /opt/punk layout into a fresh directory outside the repository; the
 * layout holds production dependencies only and no tests or sources, and what it holds runs on its own: each
 * service becomes ready against the real NATS and Postgres, the operator against a real kube-apiserver (or, when
 * none is built, answers /healthz, is not ready, and gives up naming what it could not list), the bridge serves a
 * stdio server.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { after, before, test } from 'node:test';
import { createScratchDatabase, type ScratchDatabase } from '../../services/lib/dist/test/pgtest.js';
import { controlPlaneAvailability, startControlPlane, type ControlPlane } from '../../operator/dist/test/control-plane.js';
import { imageEnv } from './dockerfile-stages.js';
import { freePort, repoRoot } from './harness.js';
import { readyStatus } from './processes.js';

const script = join(repoRoot, 'scripts', 'assemble-image.mjs');
const natsUrl = process.env.PUNK_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const seaBinary = join(repoRoot, 'services', 'bridge', 'dist-sea', 'punk-bridge');

/** What `assemble-image.mjs --list` says each target runs. */
type Targets = Record<string, { main: string } | { binary: string }>;
const targets = JSON.parse(spawnSync(process.execPath, [script, '--list'], { encoding: 'utf8' }).stdout) as Targets;

/** Packages that only build, type-check or lint Punk: none may be in an image. */
const BUILD_ONLY = ['typescript', 'node', 'esbuild', 'postject', 'dockerfile-utils'];

/**
 * The environment the target's image sets (its Dockerfile stages' ENV), with /opt/punk moved to the layout; PATH
 * stays the test's, whose node is the one the image's base provides.
 */
function layoutEnv(target: string, layout: string): Record<string, string> {
  const env = Object.entries(imageEnv(target)).filter(([name]) => name !== 'PATH');
  return Object.fromEntries(env.map(([name, value]) => [name, value.replaceAll('/opt/punk', layout)]));
}

/**
 * The @types packages some library of the layout declares among its own dependencies (as
 * @kubernetes/client-node does @types/node): the only ones allowed in it. Read from the layout's package-lock.json.
 */
function typesRequiredByLibraries(layout: string): Set<string> {
  const lock = JSON.parse(readFileSync(join(layout, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { link?: boolean; dev?: boolean; dependencies?: Record<string, string> }>;
  };
  const required = new Set<string>();
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (!path.includes('node_modules/') || entry.link || entry.dev) continue;
    for (const name of Object.keys(entry.dependencies ?? {})) if (name.startsWith('@types/')) required.add(name);
  }
  return required;
}

let work: string;
let database: ScratchDatabase;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'punk-images-'));
  database = await createScratchDatabase();
});

after(async () => {
  await database?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Runs the assembly script for `target` into a new directory under the test's work directory; returns it. */
function assemble(target: string): string {
  const out = join(work, target);
  const run = spawnSync(process.execPath, [script, target, out], { encoding: 'utf8', cwd: work });
  assert.equal(run.status, 0, `assemble-image.mjs ${target} failed:\n${run.stdout}${run.stderr}`);
  return out;
}

/** Every file under `dir` (relative paths), without descending into `skip` directory names. */
function filesUnder(dir: string, skip: string[] = []): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => !skip.some((name) => relative(dir, join(entry.parentPath, entry.name)).split('/').includes(name)))
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

/** A process started from a layout, with its output collected. */
interface Started {
  url: string;
  output(): string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `command args` with cwd outside the repository and only `env` beside PATH, on a free PUNK_PORT. */
async function startFromLayout(command: string, args: string[], env: Record<string, string>, port: number): Promise<Started> {
  const cwd = mkdtempSync(join(work, 'cwd-'));
  const child = spawn(command, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Polls `path` until it answers `status`; rejects with the process output when it exits first or after `timeoutMs`. */
async function waitForStatus(started: Started, path: string, status: number, timeoutMs: number): Promise<void> {
  let exitCode: number | null | undefined;
  void started.exited.then((code) => (exitCode = code));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer =
      path === '/readyz'
        ? await readyStatus(started.url)
        : await fetch(`${started.url}${path}`).then(
            (res) => res.status,
            () => 0,
          );
    if (answer === status) return;
    if (exitCode !== undefined) throw new Error(`exited with ${exitCode} before ${path} answered ${status}:\n${started.output()}`);
    if (Date.now() > deadline) throw new Error(`${path} did not answer ${status} within ${timeoutMs} ms:\n${started.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Checks that a service layout holds its entrypoint, production dependencies only, and no tests or sources. */
function checkServiceLayout(target: string, layout: string, main: string): void {
  assert.ok(existsSync(join(layout, main)), `${target}: ${main} is in the layout`);
  // Nothing above the layout may hold a node_modules: what the process loads comes from the layout alone.
  for (let dir = dirname(layout); dir !== dirname(dir); dir = dirname(dir))
    assert.ok(!existsSync(join(dir, 'node_modules')), `${dir}/node_modules exists`);
  // Every installed package, at the top level or nested in a package's own node_modules.
  const packages = readdirSync(layout, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /(^|\/)node_modules(\/@[^/]+)?$/.test(entry.parentPath))
    .map((entry) => (basename(entry.parentPath).startsWith('@') ? `${basename(entry.parentPath)}/${entry.name}` : entry.name));
  for (const name of BUILD_ONLY) assert.ok(!packages.includes(name), `${target}: ${name} is a build-only package`);
  const types = packages.filter((name) => name.startsWith('@types/'));
  const required = typesRequiredByLibraries(layout);
  assert.deepEqual(
    types.filter((name) => !required.has(name)),
    [],
    `${target}: @types packages no library of the layout depends on`,
  );
  const own = filesUnder(layout, ['node_modules']);
  const unwanted = own.filter(
    (path) => /(^|\/)(src|test)\//.test(path) || /\.(ts|map|tsbuildinfo)$/.test(path) || path.endsWith('.test.js'),
  );
  assert.deepEqual(unwanted, [], `${target}: tests, sources, declarations or maps in the layout`);
  for (const manifest of own.filter((path) => path.endsWith('package.json'))) {
    const json = JSON.parse(readFileSync(join(layout, manifest), 'utf8')) as Record<string, unknown>;
    assert.equal(json.devDependencies, undefined, `${target}: ${manifest} has no devDependencies`);
  }
}

const serviceTargets = Object.entries(targets).flatMap(([target, runs]) =>
  'main' in runs && target !== 'operator' ? [[target, runs.main] as const] : [],
);

test('the assembly script lists every image target and refuses an unknown one by name', () => {
  assert.deepEqual(Object.keys(targets).sort(), [
    'bridge',
    'gateway',
    'governance',
    'ledger',
    'mcp-front',
    'operator',
    'runner-npm',
    'runner-pypi',
  ]);
  const run = spawnSync(process.execPath, [script, 'frontend', join(work, 'unknown')], { encoding: 'utf8' });
  assert.equal(run.status, 1);
  assert.match(run.stderr, /unknown target "frontend": expected one of operator, mcp-front/);
  const taken = mkdtempSync(join(work, 'taken-'));
  writeFileSync(join(taken, 'file'), '');
  const notEmpty = spawnSync(process.execPath, [script, 'gateway', taken], { encoding: 'utf8' });
  assert.equal(notEmpty.status, 1);
  assert.match(notEmpty.stderr, /is not empty: give a new or empty directory/);
});

for (const [target, main] of serviceTargets) {
  test(`${target}: the image layout holds production dependencies only and the service is ready on real NATS and Postgres`, async () => {
    const layout = assemble(target);
    checkServiceLayout(target, layout, main);
    const port = await freePort();
    const metricsPort = await freePort();
    const service = await startFromLayout(
      process.execPath,
      [join(layout, main)],
      {
        ...layoutEnv(target, layout),
        PUNK_HOST: '127.0.0.1',
        PUNK_PORT: String(port),
        PUNK_METRICS_PORT: String(metricsPort),
        PUNK_NATS_URL: natsUrl,
        PUNK_DATABASE_URL: database.url,
      },
      port,
    );
    try {
      await waitForStatus(service, '/readyz', 200, 60_000);
      const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
      assert.equal(metrics.status, 200, `${target} serves /metrics on PUNK_METRICS_PORT`);
      assert.match(await metrics.text(), /^# TYPE process_resident_memory_bytes gauge$/m);
      if (target === 'mcp-front') {
        // The image carries the built dashboard (ui/dist of the @punk/ui workspace it depends on).
        const dashboard = await fetch(`${service.url}/ui/servers`);
        assert.equal(dashboard.status, 200, 'mcp-front serves the dashboard from its layout');
        assert.match(await dashboard.text(), /<script type="module" crossorigin src="\/ui\/assets\/[^"]+\.js">/);
      }
    } finally {
      assert.equal(await service.stop('SIGTERM'), 0, `${target} exits 0 on SIGTERM:\n${service.output()}`);
    }
  });
}

test('operator: the image layout holds production dependencies only, and the operator runs from it', async (t) => {
  const runs = targets.operator!;
  assert.ok('main' in runs);
  const layout = assemble('operator');
  checkServiceLayout('operator', layout, runs.main);
  const kubeconfig = join(work, 'kubeconfig');
  // Ports are picked right before the operator starts: the control plane's own listeners and its
  // connections to etcd take ephemeral ports, and one picked earlier may be theirs by then.
  const operatorEnv = async () => {
    const port = await freePort();
    const env = {
      ...layoutEnv('operator', layout),
      PUNK_HOST: '127.0.0.1',
      PUNK_PORT: String(port),
      PUNK_METRICS_PORT: String(await freePort()),
      PUNK_NATS_URL: natsUrl,
      KUBECONFIG: kubeconfig,
      PUNK_OPERATOR_LEASE_NAMESPACE: 'default',
    };
    return { env, port };
  };
  const availability = controlPlaneAvailability();
  if (availability.available) {
    const cluster: ControlPlane = await startControlPlane();
    try {
      writeFileSync(kubeconfig, cluster.kubeConfig.exportConfig());
      const { env, port } = await operatorEnv();
      const operator = await startFromLayout(process.execPath, [join(layout, runs.main)], env, port);
      try {
        await waitForStatus(operator, '/readyz', 200, 90_000);
      } finally {
        assert.equal(await operator.stop('SIGTERM'), 0, `the operator exits 0 on SIGTERM:\n${operator.output()}`);
      }
    } finally {
      await cluster.stop();
    }
    return;
  }
  t.diagnostic(
    `no kube-apiserver to make the operator ready (${availability.reason}): checking liveness and its report of the missing cluster`,
  );
  const unreachable = `https://127.0.0.1:${await freePort()}`;
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'missing',
      clusters: [{ name: 'missing', cluster: { server: unreachable, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'missing', user: { token: 'none' } }],
      contexts: [{ name: 'missing', context: { cluster: 'missing', user: 'missing' } }],
    }),
  );
  const { env, port } = await operatorEnv();
  const operator = await startFromLayout(process.execPath, [join(layout, runs.main)], env, port);
  try {
    await waitForStatus(operator, '/healthz', 200, 30_000);
    assert.equal(await readyStatus(operator.url), 503, 'not ready without a cluster');
    // It gives up once its first lists have failed for a while, naming what it could not list.
    assert.notEqual(await operator.exited, 0);
    assert.match(operator.output(), /cannot list McpServer objects/);
  } finally {
    await operator.stop('SIGKILL');
  }
});

test('bridge, runner-npm, runner-pypi: the layout is the bridge executable, which serves a stdio server from it', async (t) => {
  if (!existsSync(seaBinary)) {
    t.skip(`${relative(repoRoot, seaBinary)} is not built (npm run build:sea -w @punk/bridge; npm test builds it)`);
    return;
  }
  const everything = join(repoRoot, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');
  for (const target of ['bridge', 'runner-npm', 'runner-pypi']) {
    const runs = targets[target]!;
    assert.ok('binary' in runs);
    const layout = assemble(target);
    assert.deepEqual(filesUnder(layout), [runs.binary], `${target}: the layout holds the executable only`);
    const binary = join(layout, runs.binary);
    accessSync(binary, constants.X_OK);
    assert.equal(statSync(binary).size, statSync(seaBinary).size);
    const port = await freePort();
    const bridge = await startFromLayout(
      binary,
      ['serve', '--host', '127.0.0.1', '--port', String(port), '--', process.execPath, everything, 'stdio'],
      layoutEnv(target, layout),
      port,
    );
    try {
      await waitForStatus(bridge, '/readyz', 200, 30_000);
    } finally {
      assert.equal(await bridge.stop('SIGTERM'), 0, `${target}: the bridge exits 0 on SIGTERM:\n${bridge.output()}`);
    }
  }
});
