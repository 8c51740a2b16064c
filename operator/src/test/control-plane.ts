/**
 * A real Kubernetes control plane for the operator tests, the way envtest serves Go operators: a fresh etcd and
 * kube-apiserver (built from their Go modules by `scripts/control-plane.mjs build` into a cache outside the
 * repository), an admin authenticated by a static bearer token in `system:masters`, and Punk's CRDs from `crds/`
 * installed and Established. No kubelet, scheduler or controller-manager runs: tests write the status a kubelet
 * or the Deployment controller would.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpsGet, request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiextensionsV1Api, KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const script = join(repoRoot, 'scripts', 'control-plane.mjs');

/** Where the control plane binaries are, or why the tests that need them cannot run. */
export type ControlPlaneAvailability = { available: true; binDir: string } | { available: false; reason: string; goInstalled: boolean };

/**
 * Whether kube-apiserver, etcd and helm are built. When they are not and Go is absent, the operator tests skip
 * with `reason`; when Go is present they must be built (`npm test` builds them first), so `reason` says how.
 */
export function controlPlaneAvailability(): ControlPlaneAvailability {
  const path = spawnSync(process.execPath, [script, 'path'], { encoding: 'utf8' });
  if (path.status === 0) return { available: true, binDir: path.stdout.trim() };
  const go = spawnSync('go', ['version'], { encoding: 'utf8' });
  const why = path.stderr.trim().replace(/^control-plane: /, '');
  return {
    available: false,
    goInstalled: go.status === 0,
    reason:
      go.status === 0
        ? `${why} (Go is installed: \`node scripts/control-plane.mjs build\` builds them)`
        : `Go is not installed, so kube-apiserver, etcd and helm cannot be built: ${why}`,
  };
}

/** A running control plane. */
export interface ControlPlane {
  /** An admin's kubeconfig (bearer token, the apiserver's own CA). */
  kubeConfig: KubeConfig;
  /** `https://127.0.0.1:<port>`. */
  server: string;
  /** The admin's bearer token. */
  token: string;
  /** Stops kube-apiserver and etcd and removes their data. */
  stop(): Promise<void>;
}

/**
 * A free TCP port on 127.0.0.1 below the kernel's ephemeral range (32768 and up), so the port cannot be taken
 * between this probe and its use by an outgoing connection's local port or another `listen(0)`; a random pick in
 * 20000-32767, probed by binding it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** The status code of one GET over HTTPS, verified against `ca`, with a bearer token. */
function httpsStatus(url: string, ca: Buffer, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = httpsGet(url, { ca, headers: { authorization: `Bearer ${token}` } }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.setTimeout(5000, () => request.destroy(new Error('no answer within 5 s')));
    request.on('error', reject);
  });
}

/**
 * One request to the API server of `kubeConfig` (its cluster CA and user token), `body` sent as JSON text under
 * `contentType` (JSON is also YAML, so `application/apply-patch+yaml` takes it too), with extra `headers` (e.g.
 * `Impersonate-User`: the test's user is in system:masters, which may impersonate anyone).
 * @returns the status code and the body, as UTF-8 text and as bytes (a pprof profile is binary), whatever the status.
 */
export function requestApi(
  kubeConfig: KubeConfig,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; bytes: Buffer }> {
  const cluster = kubeConfig.getCurrentCluster()!;
  const user = kubeConfig.getCurrentUser()!;
  return new Promise((resolve, reject) => {
    const request = httpsRequest(
      new URL(path, cluster.server),
      {
        method,
        ca: Buffer.from(cluster.caData!, 'base64'),
        headers: { authorization: `Bearer ${user.token}`, 'content-type': contentType, ...headers },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response
          .on('data', (chunk: Buffer) => chunks.push(chunk))
          .on('end', () => {
            const bytes = Buffer.concat(chunks);
            resolve({ status: response.statusCode ?? 0, text: bytes.toString('utf8'), bytes });
          });
      },
    );
    request.on('error', reject);
    request.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/**
 * POSTs `body` as JSON to the API server of `kubeConfig`.
 * @throws Error with the status and the API server's message when the answer is not 2xx.
 */
async function postJson(kubeConfig: KubeConfig, path: string, body: unknown): Promise<void> {
  const { status, text } = await requestApi(kubeConfig, 'POST', path, body);
  if (status < 200 || status > 299) throw new Error(`POST ${path} answered HTTP ${status}: ${text.slice(0, 500)}`);
}

/**
 * The helm binary that `scripts/control-plane.mjs build` puts beside kube-apiserver and etcd (the chart tests),
 * when they are built.
 */
export function helmBinary(availability: ControlPlaneAvailability): string | undefined {
  return availability.available ? join(availability.binDir, 'helm') : undefined;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

async function waitFor(what: string, child: ChildProcess, log: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `${what} exited (${child.exitCode ?? child.signalCode}); last log lines:\n${readFileSync(log, 'utf8').trim().split('\n').slice(-15).join('\n')}`,
      );
    }
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `${what} not ready within ${timeoutMs / 1000} s; last log lines:\n${readFileSync(log, 'utf8').trim().split('\n').slice(-15).join('\n')}`,
  );
}

/**
 * Starts etcd and kube-apiserver on free loopback ports and installs every CRD of `crds/` (waiting until each is
 * Established).
 * @throws Error when the binaries are not built (see {@link controlPlaneAvailability}) or a process does not
 *   become ready, with the last lines of its log.
 */
export async function startControlPlane(): Promise<ControlPlane> {
  const availability = controlPlaneAvailability();
  if (!availability.available) throw new Error(availability.reason);
  const bin = availability.binDir;
  const work = mkdtempSync(join(tmpdir(), 'punk-control-plane-'));
  const children: ChildProcess[] = [];
  const launch = (name: string, args: string[]) => {
    const logFile = join(work, `${name}.log`);
    const fd = openSync(logFile, 'w');
    const child = spawn(join(bin, name), args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    children.push(child);
    return { child, logFile };
  };
  const stop = async () => {
    for (const child of [...children].reverse()) await stopProcess(child);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const [etcdPort, peerPort, securePort] = [await freePort(), await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
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
    await waitFor('etcd', etcd.child, etcd.logFile, async () => (await fetch(`${etcdUrl}/health`)).ok, 30_000);

    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(work, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(join(work, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    const token = randomBytes(32).toString('hex');
    writeFileSync(join(work, 'tokens.csv'), `${token},punk-admin,punk-admin,system:masters\n`, { mode: 0o600 });
    const certDir = join(work, 'certs');
    const server = `https://127.0.0.1:${securePort}`;
    const apiserver = launch('kube-apiserver', [
      `--etcd-servers=${etcdUrl}`,
      `--cert-dir=${certDir}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      // The endpoint reconciler refuses a loopback advertise address; nothing here needs the `kubernetes` Service's endpoints.
      '--endpoint-reconciler-type=none',
      `--secure-port=${securePort}`,
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${join(work, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(work, 'sa.key')}`,
      // Room for 5,000 McpServers' Services and more (bench/operator.mjs): a /24 fills after 253.
      '--service-cluster-ip-range=10.0.0.0/16',
      '--authorization-mode=RBAC',
      `--token-auth-file=${join(work, 'tokens.csv')}`,
      '--allow-privileged=true',
    ]);
    const caFile = join(certDir, 'apiserver.crt');
    await waitFor(
      'kube-apiserver',
      apiserver.child,
      apiserver.logFile,
      async () => {
        if (!existsSync(caFile)) return false;
        return (await httpsStatus(`${server}/readyz`, readFileSync(caFile), token)) === 200;
      },
      120_000,
    );
    // Read once ready: the file may have been caught half-written before (the chain without its CA).
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'punk-test', server, caData: readFileSync(caFile).toString('base64') }],
      users: [{ name: 'punk-admin', token }],
      contexts: [{ name: 'punk-test', cluster: 'punk-test', user: 'punk-admin' }],
      currentContext: 'punk-test',
    });
    await installCrds(kubeConfig);
    return { kubeConfig, server, token, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The CRDs of `crds/` (the generated YAML). */
export function crdsOfRepository(): V1CustomResourceDefinition[] {
  const dir = join(repoRoot, 'crds');
  return readdirSync(dir)
    .filter((file) => file.endsWith('.yaml'))
    .sort()
    .flatMap((file) => parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => doc.toJS() as V1CustomResourceDefinition));
}

/**
 * Creates every CRD of `crds/` and waits until each is Established (its API is served).
 * @throws Error naming a CRD not Established within 30 s.
 */
export async function installCrds(kubeConfig: KubeConfig): Promise<void> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const crds = crdsOfRepository();
  // Not through the typed client: its serializer reads the TypeScript names of JSONSchemaProps (`_default`,
  // `_enum`, `xKubernetesValidations`) and would silently drop `default`, `enum` and every CEL rule.
  for (const body of crds) await postJson(kubeConfig, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', body);
  for (const crd of crds) {
    const name = crd.metadata!.name!;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const live = await api.readCustomResourceDefinition({ name });
      if (live.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established within 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
