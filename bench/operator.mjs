// Measures the operator against a real kube-apiserver (scripts/control-plane.mjs build) and a nats-server of its own:
// 1. cold start: 200 McpServers exist before the operator starts; the time from spawning the operator process until
//    every one has its Deployment and a status of its generation, and the operator's memory then (RSS, peak RSS,
//    V8 heap used);
// 2. warm: N McpServers created one after another while the operator runs; the time from each create until its
//    Deployment is seen by a watch (p50/p95).
// Prints figures; asserts nothing (these machines are noisy and shared).
// Usage: npm run build && node bench/operator.mjs [servers=200] [warm=50]
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, pct, root } from './common.mjs';

const { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, makeInformer } = await import(
  join(root, 'node_modules/@kubernetes/client-node/dist/index.js')
);

if (process.argv[2] === '--child') {
  // The operator process: started from the kubeconfig and NATS URL the parent gives, answers memory questions.
  const { startOperator } = await import(join(root, 'operator/dist/index.js'));
  const { createLogger, NatsBus } = await import(join(root, 'services/lib/dist/index.js'));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(process.env.BENCH_KUBECONFIG);
  const log = createLogger('operator', 'warn');
  const bus = await NatsBus.connect({ url: process.env.BENCH_NATS_URL, name: 'bench-operator', log });
  const operator = await startOperator({
    kubeConfig,
    bus,
    log,
    namespaces: [],
    identity: `bench-${process.pid}`,
    lease: { namespace: 'default', name: 'punk-operator' },
    resyncMs: 10 * 60_000,
    workers: 4,
    reconcileTimeoutMs: 60_000,
    server: {
      bridgeImage: 'ghcr.io/punk-dev/punk-bridge:bench',
      runnerImages: { npm: 'npm:bench', pypi: 'pypi:bench' },
      gateway: { namespace: 'punk-system', podLabels: { app: 'gateway' } },
    },
  });
  process.on('message', async (message) => {
    if (message === 'memory') {
      const status = await readFile('/proc/self/status', 'utf8');
      const kib = (name) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
      process.send({ ...process.memoryUsage(), vmRssKiB: kib('VmRSS'), vmHwmKiB: kib('VmHWM'), leader: operator.isLeader() });
    } else if (message === 'stop') {
      await operator.stop();
      await bus.close();
      process.exit(0);
    }
  });
  process.send('started');
} else {
  const servers = Number(process.argv[2] ?? 200);
  const warm = Number(process.argv[3] ?? 50);
  const { startControlPlane } = await import(join(root, 'operator/dist/test/control-plane.js'));
  const { startNats } = await import(join(root, 'operator/dist/test/harness.js'));
  const plane = await startControlPlane();
  const nats = await startNats();
  const work = await mkdtemp(join(tmpdir(), 'punk-bench-operator-'));
  const kubeconfigPath = join(work, 'kubeconfig.json');
  await writeFile(kubeconfigPath, plane.kubeConfig.exportConfig(), { mode: 0o600 });
  const core = plane.kubeConfig.makeApiClient(CoreV1Api);
  const apps = plane.kubeConfig.makeApiClient(AppsV1Api);
  const custom = plane.kubeConfig.makeApiClient(CustomObjectsApi);
  const group = { group: 'mcp.punk.dev', version: 'v1alpha1', plural: 'mcpservers' };
  const server = (name) => ({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/s:1', command: ['s'] },
  });
  const namespace = async (prefix) => {
    const name = `${prefix}-${randomBytes(3).toString('hex')}`;
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  };
  let child;
  try {
    // 1. Cold start.
    const cold = await namespace('cold');
    const names = Array.from({ length: servers }, (_, i) => `server-${i}`);
    for (let i = 0; i < names.length; i += 20)
      await Promise.all(
        names.slice(i, i + 20).map((name) => custom.createNamespacedCustomObject({ ...group, namespace: cold, body: server(name) })),
      );
    const started = performance.now();
    child = fork(new URL(import.meta.url).pathname, ['--child'], {
      env: { ...process.env, BENCH_KUBECONFIG: kubeconfigPath, BENCH_NATS_URL: nats.url },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`the operator exited with ${code}`)));
    });
    const startedMs = performance.now() - started;
    for (;;) {
      const list = await custom.listNamespacedCustomObject({ ...group, namespace: cold });
      const deployments = (await apps.listNamespacedDeployment({ namespace: cold })).items.length;
      if (deployments === servers && list.items.every((o) => o.status?.observedGeneration === o.metadata.generation)) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const coldMs = performance.now() - started;
    const ask = () => new Promise((resolve) => (child.once('message', resolve), child.send('memory')));
    const memory = await ask();

    // 2. Warm: one create at a time, the Deployment seen by a watch. First let the reconciles that the cold start's
    // own Deployment events queued (no-ops, each server's second pass) drain, so each create is measured alone.
    await new Promise((resolve) => setTimeout(resolve, 15_000));
    const hot = await namespace('warm');
    const seen = new Map();
    const informer = makeInformer(plane.kubeConfig, `/apis/apps/v1/namespaces/${hot}/deployments`, () =>
      apps.listNamespacedDeployment({ namespace: hot }),
    );
    informer.on('add', (d) => seen.set(d.metadata.name, performance.now()));
    await informer.start();
    const latencies = [];
    for (let i = 0; i < warm; i++) {
      const name = `warm-${i}`;
      const at = performance.now();
      await custom.createNamespacedCustomObject({ ...group, namespace: hot, body: server(name) });
      while (!seen.has(name)) await new Promise((resolve) => setTimeout(resolve, 2));
      latencies.push(seen.get(name) - at);
    }
    await informer.stop();
    const after = await ask();
    latencies.sort((a, b) => a - b);

    const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
    console.log(`operator bench (kube-apiserver ${plane.server}, ${servers} cold servers, ${warm} warm creates)`);
    console.log(`cold start: operator process ready (lists done, Lease contested) after ${fmt(startedMs)}`);
    console.log(
      `cold start: ${servers} McpServers reconciled (every Deployment and status of its generation) ${fmt(coldMs)} after spawning the operator`,
    );
    console.log(
      `memory after the cold start: RSS ${mib(memory.vmRssKiB * 1024)} (peak ${mib(memory.vmHwmKiB * 1024)}), V8 heap used ${mib(memory.heapUsed)} of ${mib(memory.heapTotal)}`,
    );
    console.log(
      `create -> Deployment present (warm operator, ${warm} servers one at a time): p50 ${fmt(pct(latencies, 50))}, p95 ${fmt(pct(latencies, 95))}, max ${fmt(latencies.at(-1))}`,
    );
    console.log(
      `memory at the end (${servers + warm} servers): RSS ${mib(after.vmRssKiB * 1024)} (peak ${mib(after.vmHwmKiB * 1024)}), V8 heap used ${mib(after.heapUsed)}`,
    );
  } finally {
    if (child && child.exitCode === null) {
      child.send('stop');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    await nats.stop();
    await plane.stop();
    await rm(work, { recursive: true, force: true });
  }
}
