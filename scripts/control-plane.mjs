// Builds a real Kubernetes control plane (kube-apiserver and etcd) from their Go
// modules into a cache outside the repository, the way envtest supplies them to
// Go operators, so that the operator tests can start one (issue 6), and helm, which
// the chart tests run against it (issue 7).
//
//   node scripts/control-plane.mjs build [name…]   build kube-apiserver, etcd and helm, or only the
//                                                  named ones (each skipped when it answers its version)
//   node scripts/control-plane.mjs path    print the bin directory holding all three (exit 1 when one is not built)
//   node scripts/control-plane.mjs check   start etcd and kube-apiserver, wait for /readyz,
//                                          list namespaces over HTTPS, stop both
//
// Cache: ${PUNK_CONTROL_PLANE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/punk/control-plane/<kubernetes version>}
// holds bin/ and the throwaway build modules; the Go state (GOPATH, GOCACHE,
// GOMODCACHE) lives in go/ under the cache root (the parent of the version
// directories, or PUNK_CONTROL_PLANE_DIR itself when that is set), so the Go
// build cache survives between runs and version bumps. No binary is ever written
// inside the repository.
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { findGo } from './go.mjs';

// Kubernetes v1.37.2: the newest release the Go module proxy serves here; its go.mod
// asks for Go 1.26.0, which this machine has.
const KUBERNETES_VERSION = 'v1.37.2';
// etcd v3.7.3: Kubernetes 1.37 tests against etcd 3.7 (ETCD_VERSION=3.7.0 in its
// hack/lib/etcd.sh); 3.7.3 is the newest patch of that minor and needs Go 1.26.0.
const ETCD_VERSION = 'v3.7.3';
// In etcd 3.6 and 3.7 the root package of the server module is `package main`.
const ETCD_MAIN_PACKAGE = 'go.etcd.io/etcd/server/v3';
const KUBE_APISERVER_PACKAGE = 'k8s.io/kubernetes/cmd/kube-apiserver';
// Helm v3.22.0: built with Go 1.26 against the Kubernetes 0.37 client libraries,
// so it knows the API versions of the apiserver above.
const HELM_VERSION = 'v3.22.0';
const HELM_MODULE = 'helm.sh/helm/v3';

const cacheRoot =
  process.env.PUNK_CONTROL_PLANE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'punk', 'control-plane');
const versionDir = process.env.PUNK_CONTROL_PLANE_DIR ?? join(cacheRoot, KUBERNETES_VERSION);
const binDir = join(versionDir, 'bin');
const goStateDir = join(cacheRoot, 'go');
/** Each binary with the arguments that print its version and the text that output must contain. */
const binaries = {
  'kube-apiserver': { path: join(binDir, 'kube-apiserver'), versionArgs: ['--version'], versionText: `Kubernetes ${KUBERNETES_VERSION}` },
  etcd: { path: join(binDir, 'etcd'), versionArgs: ['--version'], versionText: `etcd Version: ${ETCD_VERSION.slice(1)}` },
  helm: { path: join(binDir, 'helm'), versionArgs: ['version', '--short'], versionText: HELM_VERSION },
};

/** A failure the script reports as one message and exit code 1, without a stack. */
class ControlPlaneError extends Error {}

/**
 * Writes one progress line to stderr (stdout is kept for `path`).
 * @param {string} line
 */
function say(line) {
  process.stderr.write(`control-plane: ${line}\n`);
}

/**
 * Seconds since `start` (a `performance.now()` reading), as text with one decimal.
 * @param {number} start milliseconds from performance.now()
 * @returns {string}
 */
function secondsSince(start) {
  return `${((performance.now() - start) / 1000).toFixed(1)} s`;
}

/**
 * Whether a binary exists and its version output contains the pinned version.
 * @param {{ path: string, versionArgs: string[], versionText: string }} binary
 * @returns {boolean}
 */
function answersVersion(binary) {
  if (!existsSync(binary.path)) return false;
  // helm keeps its state under HOME; a throwaway one leaves the user's untouched.
  const env = { ...process.env, HELM_CONFIG_HOME: tmpdir(), HELM_CACHE_HOME: tmpdir(), HELM_DATA_HOME: tmpdir() };
  const result = spawnSync(binary.path, binary.versionArgs, { encoding: 'utf8', timeout: 10_000, env });
  return result.status === 0 && `${result.stdout}${result.stderr}`.includes(binary.versionText);
}

/**
 * The `go` command to run: the one on PATH, else /usr/local/go/bin/go.
 * @returns {string}
 * @throws {ControlPlaneError} when neither answers `go version`
 */
function goCommand() {
  const go = findGo();
  if (go) {
    say(`using ${go.version}`);
    return go.command;
  }
  throw new ControlPlaneError(
    'Go is not installed: no `go` on PATH nor at /usr/local/go/bin/go. Install Go 1.26 or later to build kube-apiserver, etcd and helm.',
  );
}

/**
 * The environment for every go command: Go state under the cache root, static
 * binaries (CGO_ENABLED=0, as the Kubernetes and etcd releases build them), and
 * go.mod/go.sum of the throwaway modules updated as needed.
 * @returns {NodeJS.ProcessEnv}
 */
function goEnvironment() {
  return {
    ...process.env,
    GOPATH: join(goStateDir, 'path'),
    GOCACHE: join(goStateDir, 'cache'),
    GOMODCACHE: join(goStateDir, 'mod'),
    GOFLAGS: '-mod=mod',
    CGO_ENABLED: '0',
  };
}

/**
 * Runs a go command, keeping its output; on failure throws with the last lines.
 * Prints a heartbeat every minute so a long cold build shows it is alive.
 * @param {string} go the go command
 * @param {string[]} args
 * @param {{ cwd: string, what: string }} options `what` names the step in messages
 * @returns {Promise<string>} stdout
 * @throws {ControlPlaneError} naming the step, and saying when the module proxy refused a module
 */
function runGo(go, args, { cwd, what }) {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    const child = spawn(go, args, { cwd, env: goEnvironment(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data) => {
      stdout += data;
    });
    child.stderr.on('data', (data) => {
      stderr += data;
    });
    const heartbeat = setInterval(() => say(`  … ${what}: ${secondsSince(start)} so far`), 60_000);
    child.on('error', (error) => {
      clearInterval(heartbeat);
      reject(new ControlPlaneError(`${what}: cannot run ${go}: ${error.message}`));
    });
    child.on('close', (code) => {
      clearInterval(heartbeat);
      if (code === 0) return resolve(stdout);
      // `go mod download -json` reports a failure in the "Error" field on stdout.
      const jsonError = /"Error":\s*("(?:[^"\\]|\\.)*")/.exec(stdout)?.[1];
      const lines = `${stderr}${jsonError ? JSON.parse(jsonError) : ''}`.trim().split('\n');
      const refused = lines.find((line) => /\b(403|404|410)\b|not available|unknown revision|invalid version/.test(line));
      const reason = refused ? `the Go module proxy refused a module: ${refused.trim()}` : 'the go command failed';
      reject(
        new ControlPlaneError(
          `${what} failed (go ${args.join(' ')} in ${cwd}, exit ${code}): ${reason}\n--- last lines ---\n${lines.slice(-25).join('\n')}`,
        ),
      );
    });
  });
}

/**
 * Module paths that a go.mod both requires and replaces with a directory inside
 * its own repository (`k8s.io/api => ./staging/src/k8s.io/api`, `go.etcd.io/etcd/api/v3 => ../api`).
 * Such replace directives only work inside that repository, which is why
 * `go install module/cmd@version` refuses these modules.
 * @param {string} goMod the text of a go.mod file
 * @returns {string[]}
 */
function locallyReplacedRequirements(goMod) {
  const required = new Set();
  const replaced = [];
  let block = '';
  for (const raw of goMod.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (line === ')') {
      block = '';
      continue;
    }
    const opening = /^(require|replace)\s*\($/.exec(line);
    if (opening) {
      block = opening[1];
      continue;
    }
    const single = /^(require|replace)\s+(.*)$/.exec(line);
    const [kind, body] = single ? [single[1], single[2]] : [block, line];
    if (kind === 'require' && body) required.add(body.split(/\s+/)[0]);
    if (kind === 'replace' && body) {
      const match = /^(\S+)(?:\s+\S+)?\s*=>\s*(\.{1,2}\/\S*)$/.exec(body);
      if (match) replaced.push(match[1]);
    }
  }
  return replaced.filter((path) => required.has(path));
}

/**
 * Builds one main package from a module whose go.mod may have local replace
 * directives: downloads the module, writes a throwaway module under the version
 * directory that requires it and points each locally replaced requirement at its
 * published version, then runs `go build -trimpath -ldflags '-s -w …'`. The
 * binary is written beside its final name and renamed, so a broken build never
 * leaves a file that looks built.
 * @param {string} go the go command
 * @param {{ name: string, module: string, version: string, mainPackage: string,
 *           publishedVersion: (module: string) => string, ldflags: string[] }} target
 *   `publishedVersion` maps a locally replaced module path to the version to use
 * @returns {Promise<number>} build time in seconds (download and build)
 */
async function buildFromModule(go, target) {
  const start = performance.now();
  const moduleDir = join(versionDir, 'build', target.name);
  mkdirSync(moduleDir, { recursive: true });
  say(`${target.name}: downloading ${target.module}@${target.version}`);
  const download = JSON.parse(
    await runGo(go, ['mod', 'download', '-json', `${target.module}@${target.version}`], {
      cwd: moduleDir,
      what: `downloading ${target.module}@${target.version}`,
    }),
  );
  const goMod = readFileSync(download.GoMod, 'utf8');
  const goVersion = /^go\s+(\S+)/m.exec(goMod)?.[1] ?? '1.26.0';
  const replaced = locallyReplacedRequirements(goMod);
  say(
    `${target.name}: ${replaced.length} modules of ${target.module} are replaced by directories of its repository; pointing them at their published versions`,
  );
  writeFileSync(
    join(moduleDir, 'go.mod'),
    [
      '// Throwaway module written by scripts/control-plane.mjs to build a binary of',
      `// ${target.module}, whose own go.mod replaces modules with directories of its repository.`,
      `module punk.local/control-plane/${target.name}`,
      '',
      `go ${goVersion}`,
      '',
      `require ${target.module} ${target.version}`,
      '',
      'replace (',
      ...replaced.map((path) => `\t${path} => ${path} ${target.publishedVersion(path)}`),
      ')',
      '',
    ].join('\n'),
  );
  const output = join(binDir, target.name);
  const partial = `${output}.partial`;
  say(`${target.name}: go build ${target.mainPackage} (Go ${goVersion} module; a cold build takes minutes)`);
  await runGo(go, ['build', '-trimpath', `-ldflags=${['-s', '-w', ...target.ldflags].join(' ')}`, '-o', partial, target.mainPackage], {
    cwd: moduleDir,
    what: `building ${target.name}`,
  });
  renameSync(partial, output);
  const seconds = (performance.now() - start) / 1000;
  say(`${target.name}: built ${output} in ${seconds.toFixed(1)} s`);
  return seconds;
}

/**
 * How to build each binary from its Go module (see buildFromModule).
 * @type {Record<keyof typeof binaries, { module: string, version: string, mainPackage: string,
 *   publishedVersion: (module: string) => string, ldflags: string[] }>}
 */
const buildTargets = (() => {
  const [, minor, patch] = KUBERNETES_VERSION.slice(1).split('.');
  return {
    'kube-apiserver': {
      module: 'k8s.io/kubernetes',
      version: KUBERNETES_VERSION,
      mainPackage: KUBE_APISERVER_PACKAGE,
      // The staging modules are published as k8s.io/<name> v0.<minor>.<patch>.
      publishedVersion: () => `v0.${minor}.${patch}`,
      // The variables hack/lib/version.sh sets in a release build, so that
      // --version and /version report the release rather than v0.0.0-master.
      ldflags: ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'].flatMap((pkg) => [
        `-X ${pkg}.gitVersion=${KUBERNETES_VERSION}`,
        `-X ${pkg}.gitMajor=1`,
        `-X ${pkg}.gitMinor=${minor}`,
        `-X ${pkg}.gitTreeState=clean`,
      ]),
    },
    etcd: {
      module: 'go.etcd.io/etcd/server/v3',
      version: ETCD_VERSION,
      mainPackage: ETCD_MAIN_PACKAGE,
      // etcd's sibling modules (api, client, pkg) are released with the same version.
      publishedVersion: () => ETCD_VERSION,
      ldflags: [],
    },
    helm: {
      module: HELM_MODULE,
      version: HELM_VERSION,
      mainPackage: `${HELM_MODULE}/cmd/helm`,
      // Helm's go.mod replaces nothing with a directory; kept for the common path.
      publishedVersion: () => HELM_VERSION,
      // What helm's Makefile sets: the release version, and the Kubernetes version
      // that `helm template` and `helm lint` assume (its client-go is v0.37: Kubernetes 1.37).
      ldflags: [
        `-X ${HELM_MODULE}/internal/version.version=${HELM_VERSION}`,
        `-X ${HELM_MODULE}/internal/version.gitTreeState=clean`,
        ...['pkg/lint/rules', 'pkg/chartutil'].flatMap((pkg) => [
          `-X ${HELM_MODULE}/${pkg}.k8sVersionMajor=1`,
          `-X ${HELM_MODULE}/${pkg}.k8sVersionMinor=${minor}`,
        ]),
      ],
    },
  };
})();

/**
 * `build [name…]`: builds whichever of the named binaries (default: all of
 * kube-apiserver, etcd and helm) is missing or does not answer its version
 * command with the pinned version; the others are left alone.
 * @param {string[]} names binary names; empty for all
 * @throws {ControlPlaneError} on an unknown name, when Go is missing, or a download or build fails
 */
async function build(names) {
  const unknown = names.filter((name) => !(name in binaries));
  if (unknown.length > 0)
    throw new ControlPlaneError(`unknown binary ${unknown.join(', ')}: build knows ${Object.keys(binaries).join(', ')}`);
  const wanted = names.length > 0 ? names : Object.keys(binaries);
  const missing = wanted.filter((name) => !answersVersion(binaries[name]));
  if (missing.length === 0) {
    say(`${wanted.join(', ')} already built in ${binDir}`);
    return;
  }
  const go = goCommand();
  mkdirSync(binDir, { recursive: true });
  say(`building ${missing.join(', ')} into ${binDir} (Go state in ${goStateDir})`);
  for (const name of missing) await buildFromModule(go, { name, ...buildTargets[name] });
  for (const name of missing) {
    const binary = binaries[name];
    if (!answersVersion(binary))
      throw new ControlPlaneError(
        `${name} was built at ${binary.path} but \`${name} ${binary.versionArgs.join(' ')}\` does not say "${binary.versionText}"`,
      );
  }
  say(`done: ${binDir}`);
}

/**
 * The bin directory, when kube-apiserver, etcd and helm are there and executable.
 * @returns {string}
 * @throws {ControlPlaneError} naming the first one missing
 */
function builtBinDir() {
  for (const [name, binary] of Object.entries(binaries)) {
    try {
      accessSync(binary.path, constants.X_OK);
    } catch {
      throw new ControlPlaneError(`${name} is not built (no executable ${binary.path}): run \`node scripts/control-plane.mjs build\``);
    }
  }
  return binDir;
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0).
 * @returns {Promise<number>}
 */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * One HTTP(S) GET on 127.0.0.1.
 * @param {string} url
 * @param {{ ca?: Buffer, token?: string }} [options] CA to verify the server with, bearer token
 * @returns {Promise<{ status: number, body: string }>}
 */
function get(url, { ca, token } = {}) {
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(url, { ca, headers: token ? { authorization: `Bearer ${token}` } : {} }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => {
        body += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    request.setTimeout(5000, () => request.destroy(new Error('no answer within 5 s')));
    request.on('error', reject);
    request.end();
  });
}

/**
 * Polls until `probe` resolves true, or the process exits, or the deadline passes.
 * @param {string} what named in the error
 * @param {() => Promise<boolean>} probe
 * @param {import('node:child_process').ChildProcess} child the process being waited for
 * @param {number} timeoutMs
 * @throws {ControlPlaneError} on exit or timeout
 */
async function waitFor(what, probe, child, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new ControlPlaneError(`${what}: the process exited (${child.exitCode ?? child.signalCode})`);
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new ControlPlaneError(`${what}: not ready within ${timeoutMs / 1000} s`);
}

/**
 * Resident set size of a process, from /proc/<pid>/status (Linux).
 * @param {number} pid
 * @returns {string} e.g. "312 MiB", or "unknown"
 */
function residentSetSize(pid) {
  try {
    const kib = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    return Number.isFinite(kib) ? `${Math.round(kib / 1024)} MiB` : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Sends SIGTERM and waits up to 10 s for the exit, then SIGKILL.
 * @param {import('node:child_process').ChildProcess} child
 * @returns {Promise<void>}
 */
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * `check`: starts etcd and kube-apiserver with the flags envtest uses, waits for
 * /readyz, lists namespaces as an admin with a bearer token over HTTPS verified
 * against the apiserver's self-signed CA, prints timings and memory, then stops
 * both and removes their temporary directory.
 * @throws {ControlPlaneError} when not built or a step fails (with the last log lines)
 */
async function check() {
  const bin = builtBinDir();
  const work = mkdtempSync(join(tmpdir(), 'punk-control-plane-'));
  const children = [];
  // Ctrl-C or a CI time-out: leave no etcd, apiserver or temporary directory behind.
  const abandon = (signal) => {
    for (const { child } of children) child.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
    say(`stopped by ${signal}`);
    process.exit(1);
  };
  process.once('SIGINT', abandon).once('SIGTERM', abandon);
  const start = performance.now();
  try {
    const [etcdClientPort, etcdPeerPort, securePort] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
    const peerUrl = `http://127.0.0.1:${etcdPeerPort}`;
    const launch = (name, args) => {
      const log = openSync(join(work, `${name}.log`), 'w');
      const child = spawn(join(bin, name), args, { stdio: ['ignore', log, log] });
      closeSync(log);
      children.push({ name, child });
      return child;
    };

    const etcd = launch('etcd', [
      '--name=punk',
      `--data-dir=${join(work, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=punk=${peerUrl}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    await waitFor(
      'etcd',
      async () => {
        const { status, body } = await get(`${etcdUrl}/health`);
        return status === 200 && JSON.parse(body).health === 'true';
      },
      etcd,
      30_000,
    );
    say(`etcd ${ETCD_VERSION} healthy at ${etcdUrl} after ${secondsSince(start)}`);

    // Service-account tokens are signed with this key; the public half verifies them.
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(work, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(join(work, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    // An admin user in system:masters, authenticated by a static bearer token.
    const token = randomBytes(32).toString('hex');
    writeFileSync(join(work, 'tokens.csv'), `${token},punk-admin,punk-admin,system:masters\n`, { mode: 0o600 });
    const certDir = join(work, 'certs');
    const apiserverStart = performance.now();
    const apiserver = launch('kube-apiserver', [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${certDir}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      // The endpoint reconciler refuses a loopback advertise address; there is no
      // in-cluster client to need the `kubernetes` Service's endpoints here.
      '--endpoint-reconciler-type=none',
      `--secure-port=${securePort}`,
      `--service-account-issuer=https://127.0.0.1:${securePort}`,
      `--service-account-key-file=${join(work, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(work, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/16',
      '--authorization-mode=RBAC',
      `--token-auth-file=${join(work, 'tokens.csv')}`,
      '--allow-privileged=true',
    ]);
    const server = `https://127.0.0.1:${securePort}`;
    const caFile = join(certDir, 'apiserver.crt');
    await waitFor(
      'kube-apiserver /readyz',
      async () => {
        if (!existsSync(caFile)) return false;
        return (await get(`${server}/readyz`, { ca: readFileSync(caFile), token })).status === 200;
      },
      apiserver,
      120_000,
    );
    say(
      `kube-apiserver ${KUBERNETES_VERSION} ready at ${server}: ${secondsSince(apiserverStart)} after its own start, ${secondsSince(start)} after etcd's start`,
    );
    say(`resident memory at ready: kube-apiserver ${residentSetSize(apiserver.pid)}, etcd ${residentSetSize(etcd.pid)}`);

    const { status, body } = await get(`${server}/api/v1/namespaces`, { ca: readFileSync(caFile), token });
    if (status !== 200) throw new ControlPlaneError(`listing namespaces answered HTTP ${status}: ${body.slice(0, 300)}`);
    const names = JSON.parse(body).items.map((item) => item.metadata.name);
    if (!names.includes('default')) throw new ControlPlaneError(`namespace "default" missing from ${names.join(', ')}`);
    say(`namespaces: ${names.join(', ')}`);
    say('check passed');
  } catch (error) {
    for (const { name } of children) {
      const lines = readFileSync(join(work, `${name}.log`), 'utf8')
        .trim()
        .split('\n')
        .slice(-15);
      say(`--- last lines of ${name}'s log ---\n${lines.join('\n')}`);
    }
    throw error;
  } finally {
    for (const { child } of [...children].reverse()) await stop(child);
    rmSync(work, { recursive: true, force: true });
    process.off('SIGINT', abandon).off('SIGTERM', abandon);
  }
}

const commands = { build, path: () => process.stdout.write(`${builtBinDir()}\n`), check };
const [command, ...names] = process.argv.slice(2);
if (!(command in commands) || (command !== 'build' && names.length > 0)) {
  process.stderr.write('usage: node scripts/control-plane.mjs build [kube-apiserver|etcd|helm…] | path | check\n');
  process.exit(2);
}
try {
  await commands[command](names);
} catch (error) {
  if (!(error instanceof ControlPlaneError)) throw error;
  say(error.message);
  process.exit(1);
}
