// Measures the operator against a real kube-apiserver (scripts/control-plane.mjs build; a /16 Service range, so
// thousands of Services fit) and a nats-server of its own:
// 1. cold start: N McpServers (default 1,000) exist before the operator starts; the time from spawning the operator
//    process until every one has its Deployment and a status of its generation, the API requests it took (the API
//    server's apiserver_request_total per verb and resource, watches left out), and the operator's memory: RSS and
//    peak RSS, and what the V8 heap held at the sample of the highest RSS (sampled every 100 ms);
// 2. resync: over a window holding a resync of every server (the operator resyncs every 20 s here), the API requests
//    the operator made for the servers' kinds and the CPU time it used: an unchanged server should cost no request,
//    and the operator should be idle between events;
// 3. warm: M McpServers created one after another while the operator runs; the time from each create until its
//    Deployment is seen by a watch (p50/p95).
// `--runs R` repeats all of it R times, each on a fresh control plane and nats-server, and ends with each run's cold
// start figures and the worst of them. Prints figures; asserts nothing (these machines are noisy and shared). Gives
// up after the deadline (default 15 minutes, per run), printing what it measured so far. `workers` is the operator's
// PUNK_OPERATOR_WORKERS (default 4, the operator's own default). The operator runs with the NODE_OPTIONS of its image
// (the Dockerfile's operator stage), or BENCH_OPERATOR_NODE_OPTIONS when set (to try other V8 flags). With
// BENCH_APISERVER_PROFILE=<file> it also writes a Go CPU profile of the API server over the first 30 s after the
// operator's start (`go tool pprof -top <file>` reads it); with BENCH_HEAP_SNAPSHOT=<file> the operator writes a V8
// heap snapshot when half the servers are done (that run's memory figures then count the snapshot's own cost).
// Usage: npm run build && node bench/operator.mjs [--runs R] [servers=1000] [warm=20] [deadlineSeconds=900] [workers=4]
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import v8 from 'node:v8';
import { fmt, pct, root } from './common.mjs';

const { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig, makeInformer } = await import(
  join(root, 'node_modules/@kubernetes/client-node/dist/index.js')
);

if (process.argv[2] === '--child') {
  // The operator process: started from the kubeconfig and NATS URL the parent gives, answers memory questions.
  const { startOperator } = await import(join(root, 'operator/dist/index.js'));
  const { createLogger, NatsBus } = await import(join(root, 'services/lib/dist/controller.js'));
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
    resyncMs: Number(process.env.BENCH_RESYNC_MS),
    workers: Number(process.env.BENCH_WORKERS),
    reconcileTimeoutMs: 60_000,
    server: {
      bridgeImage: 'ghcr.io/punk-dev/punk-bridge:bench',
      runnerImages: { npm: 'npm:bench', pypi: 'pypi:bench' },
      gateway: { namespace: 'punk-system', podLabels: { app: 'gateway' } },
    },
  });
  // RSS sampled every 100 ms, keeping the sample of the highest with what the V8 heap held then (VmHWM is the exact
  // peak; the sample says what made it).
  let peak = { rss: 0 };
  const sample = () => {
    const usage = process.memoryUsage();
    if (usage.rss <= peak.rss) return;
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((space) => [space.space_name, space.space_used_size]));
    peak = { ...usage, spaces };
  };
  setInterval(sample, 100).unref();
  process.on('message', async (message) => {
    if (message === 'memory') {
      sample();
      const status = await readFile('/proc/self/status', 'utf8');
      const kib = (name) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
      const cpu = process.cpuUsage();
      process.send({
        ...process.memoryUsage(),
        vmRssKiB: kib('VmRSS'),
        vmHwmKiB: kib('VmHWM'),
        cpuMs: (cpu.user + cpu.system) / 1000,
        leader: operator.isLeader(),
        peak,
      });
    } else if (message?.snapshot) {
      process.send({ snapshot: v8.writeHeapSnapshot(message.snapshot) });
    } else if (message === 'stop') {
      await operator.stop();
      await bus.close();
      process.exit(0);
    }
  });
  process.send('started');
} else {
  const USAGE = 'usage: node bench/operator.mjs [--runs R] [servers=1000] [warm=20] [deadlineSeconds=900] [workers=4]';
  const given = process.argv.slice(2);
  const runsAt = given.indexOf('--runs');
  const runsGiven = runsAt === -1 ? undefined : given.splice(runsAt, 2)[1];
  /** `value` (an argument as given, `name` for the error) as an integer from `min` to `max` (`fallback` when absent); else the usage, and exit 2. */
  const argument = (value, name, fallback, min, max) => {
    const number = value === undefined ? fallback : Number(value);
    if (Number.isInteger(number) && number >= min && number <= max) return number;
    console.error(`bench/operator.mjs: ${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(value)}\n${USAGE}`);
    process.exit(2);
  };
  if (given.length > 4) {
    console.error(`bench/operator.mjs: at most 4 arguments besides --runs, not ${given.length} (${given.join(' ')})\n${USAGE}`);
    process.exit(2);
  }
  const runs = argument(runsAt === -1 ? '1' : runsGiven, '--runs', 1, 1, 100);
  const servers = argument(given[0], 'servers', 1000, 1, 100_000);
  const warm = argument(given[1], 'warm', 20, 0, 10_000);
  const deadlineSeconds = argument(given[2], 'deadlineSeconds', 900, 1, 86_400);
  // PUNK_OPERATOR_WORKERS's range.
  const workers = argument(given[3], 'workers', 4, 1, 64);
  // Stopped by a signal, it still stops what it started (the control plane, NATS, the operator) before it exits.
  let interrupted;
  const interruption = new Promise((resolve) => {
    for (const signal of ['SIGINT', 'SIGTERM'])
      process.once(signal, () => {
        interrupted = signal;
        resolve();
      });
  });
  const resyncMs = 20_000;
  const { startControlPlane, requestApi } = await import(join(root, 'operator/dist/test/control-plane.js'));
  const { startNats } = await import(join(root, 'operator/dist/test/harness.js'));
  // The operator runs with the NODE_OPTIONS its image sets (Dockerfile, the operator stage: V8's heap sizes), unless
  // BENCH_OPERATOR_NODE_OPTIONS names others.
  const stage = (await readFile(join(root, 'Dockerfile'), 'utf8')).split('\nFROM ').find((text) => / AS operator\n/.test(text));
  const image = /^ENV NODE_OPTIONS="?([^"\n]+)"?$/m.exec(stage ?? '');
  if (!image && process.env.BENCH_OPERATOR_NODE_OPTIONS === undefined) {
    console.error("bench/operator.mjs: the Dockerfile's operator stage sets no NODE_OPTIONS (set BENCH_OPERATOR_NODE_OPTIONS)");
    process.exit(2);
  }
  const nodeOptions = process.env.BENCH_OPERATOR_NODE_OPTIONS ?? image[1];
  const group = { group: 'mcp.punk.dev', version: 'v1alpha1', plural: 'mcpservers' };
  const server = (name) => ({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/s:1', command: ['s'] },
  });
  const sleep = (ms) => Promise.race([new Promise((resolve) => setTimeout(resolve, ms)), interruption]);
  const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
  const load = () => loadavg()[0].toFixed(1);

  /**
   * One run on a control plane and nats-server of its own: prints its lines and returns the cold start's figures
   * (`coldMs` undefined when it did not finish).
   */
  const run = async (index) => {
    const deadline = Date.now() + deadlineSeconds * 1000;
    /** Throws when the run's deadline passed or a signal stops it, naming the step. */
    const inTime = (step) => {
      if (interrupted) throw new Error(`${interrupted} during ${step}`);
      if (Date.now() > deadline) throw new Error(`deadline passed during ${step}`);
    };
    const loadBefore = load();
    const plane = await startControlPlane();
    const nats = await startNats();
    const work = await mkdtemp(join(tmpdir(), 'punk-bench-operator-'));
    const kubeconfigPath = join(work, 'kubeconfig.json');
    await writeFile(kubeconfigPath, plane.kubeConfig.exportConfig(), { mode: 0o600 });
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    const apps = plane.kubeConfig.makeApiClient(AppsV1Api);
    const custom = plane.kubeConfig.makeApiClient(CustomObjectsApi);
    const namespace = async (prefix) => {
      const name = `${prefix}-${randomBytes(3).toString('hex')}`;
      await core.createNamespace({ body: { metadata: { name } } });
      return name;
    };
    /**
     * Requests the API server answered for the servers' kinds and their Events (`VERB resource` → count), watches left
     * out, and under `cpu` the CPU-seconds the API server process used so far (a figure of work done, which the other
     * loads of a shared machine change far less than they change durations).
     */
    const requestCounts = async () => {
      const kinds = new Set(['deployments', 'services', 'serviceaccounts', 'networkpolicies', 'mcpservers', 'pods', 'secrets', 'events']);
      const counts = new Map();
      const metrics = (await requestApi(plane.kubeConfig, 'GET', '/metrics')).text.split('\n');
      counts.cpu = Number(metrics.find((line) => line.startsWith('process_cpu_seconds_total '))?.split(' ')[1]);
      for (const line of metrics) {
        if (!line.startsWith('apiserver_request_total{')) continue;
        const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
        if (!kinds.has(labels.resource) || labels.verb === 'WATCH') continue;
        const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
        counts.set(key, (counts.get(key) ?? 0) + Number(line.split(' ').at(-1)));
      }
      return counts;
    };
    /** The requests counted between `before` and `after` (two {@link requestCounts}), as `VERB resource n, …`. */
    const requestsMade = (before, after) =>
      [...after]
        .filter(([key, n]) => n !== (before.get(key) ?? 0))
        .map(([key, n]) => `${key} ${n - (before.get(key) ?? 0)}`)
        .join(', ');
    /** Writes the API server's CPU profile over the next `seconds` (its /debug/pprof/profile, pprof's gzipped protobuf) to `file`. */
    const profileApiServer = async (file, seconds) => {
      const path = `/debug/pprof/profile?seconds=${seconds}`;
      const { status, bytes } = await requestApi(plane.kubeConfig, 'GET', path);
      if (status !== 200) throw new Error(`${path} answered HTTP ${status}`);
      await writeFile(file, bytes);
    };
    const lines = [
      `operator bench${runs > 1 ? ` run ${index} of ${runs}` : ''} (kube-apiserver ${plane.server}, ${servers} cold servers, ${warm} warm creates, resync every ${resyncMs / 1000} s, ${workers} workers, NODE_OPTIONS=${nodeOptions}; load average ${loadBefore} before it on ${availableParallelism()} cores)`,
    ];
    const figures = { index, loadBefore };
    let child;
    try {
      // 1. Cold start.
      const cold = await namespace('cold');
      const names = Array.from({ length: servers }, (_, i) => `server-${i}`);
      const creating = performance.now();
      for (let i = 0; i < names.length; i += 20) {
        inTime('the creates');
        await Promise.all(
          names.slice(i, i + 20).map((name) => custom.createNamespacedCustomObject({ ...group, namespace: cold, body: server(name) })),
        );
      }
      lines.push(`${servers} McpServers created (before the operator starts) in ${fmt(performance.now() - creating)}`);
      const beforeCold = await requestCounts();
      const started = performance.now();
      child = fork(new URL(import.meta.url).pathname, ['--child'], {
        env: {
          ...process.env,
          NODE_OPTIONS: nodeOptions,
          BENCH_KUBECONFIG: kubeconfigPath,
          BENCH_NATS_URL: nats.url,
          BENCH_RESYNC_MS: String(resyncMs),
          BENCH_WORKERS: String(workers),
        },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      await new Promise((resolve, reject) => {
        child.once('message', resolve);
        child.once('exit', (code) => reject(new Error(`the operator exited with ${code}`)));
      });
      const profiled = process.env.BENCH_APISERVER_PROFILE
        ? profileApiServer(process.env.BENCH_APISERVER_PROFILE, 30).then(
            () => `API server CPU profile of the first 30 s written to ${process.env.BENCH_APISERVER_PROFILE}`,
            (error) => `API server CPU profile not written: ${error.message}`,
          )
        : undefined;
      const startedMs = performance.now() - started;
      lines.push(`cold start: operator process ready (lists done, Lease contested) after ${fmt(startedMs)}`);
      // Watched, not listed again and again: a list of 1,000 Deployments every moment would load the API server the
      // operator is measured against.
      const done = { deployments: new Set(), statuses: new Set() };
      const watchCold = async (path, list, onObject) => {
        const informer = makeInformer(plane.kubeConfig, path, list);
        informer.on('add', onObject);
        informer.on('update', onObject);
        await informer.start();
        return informer;
      };
      const coldWatches = [
        await watchCold(
          `/apis/apps/v1/namespaces/${cold}/deployments`,
          () => apps.listNamespacedDeployment({ namespace: cold }),
          (d) => done.deployments.add(d.metadata.name),
        ),
        await watchCold(
          `/apis/mcp.punk.dev/v1alpha1/namespaces/${cold}/mcpservers`,
          () => custom.listNamespacedCustomObject({ ...group, namespace: cold }),
          (o) => o.status?.observedGeneration === o.metadata.generation && done.statuses.add(o.metadata.name),
        ),
      ];
      let snapshot = process.env.BENCH_HEAP_SNAPSHOT;
      while (done.deployments.size < servers || done.statuses.size < servers) {
        inTime('the cold start');
        if (snapshot && done.statuses.size >= servers / 2) {
          const written = new Promise((resolve) => child.once('message', resolve));
          child.send({ snapshot });
          lines.push(`heap snapshot at ${done.statuses.size} statuses written to ${(await written).snapshot}`);
          snapshot = undefined;
        }
        await sleep(100);
      }
      const coldMs = performance.now() - started;
      for (const informer of coldWatches) await informer.stop();
      const afterCold = await requestCounts();
      const coldRequests = requestsMade(beforeCold, afterCold);
      const ask = () => new Promise((resolve) => (child.once('message', resolve), child.send('memory')));
      const memory = await ask();
      Object.assign(figures, { coldMs, peakKiB: memory.vmHwmKiB, loadAfter: load(), requests: coldRequests });
      lines.push(
        `cold start: ${servers} McpServers reconciled (every Deployment and status of its generation) ${fmt(coldMs)} after spawning the operator`,
      );
      lines.push(`cold start API requests (the operator's, the bench's own watches' lists among them): ${coldRequests}`);
      lines.push(
        `cold start CPU: operator ${fmt(memory.cpuMs)}, API server ${fmt((afterCold.cpu - beforeCold.cpu) * 1000)} (load average ${figures.loadAfter} on ${availableParallelism()} cores)`,
      );
      lines.push(
        `memory after the cold start: RSS ${mib(memory.vmRssKiB * 1024)} (peak ${mib(memory.vmHwmKiB * 1024)}), V8 heap used ${mib(memory.heapUsed)} of ${mib(memory.heapTotal)}`,
      );
      const { peak } = memory;
      const spaces = Object.entries(peak.spaces)
        .filter(([, used]) => used >= 1024 * 1024)
        .map(([space, used]) => `${space} ${mib(used)}`)
        .join(', ');
      lines.push(
        `at the highest RSS sampled (${mib(peak.rss)}): V8 heap ${mib(peak.heapTotal)} (used ${mib(peak.heapUsed)}: ${spaces}), external ${mib(peak.external)} (array buffers ${mib(peak.arrayBuffers)}), the rest (code, native) ${mib(peak.rss - peak.heapTotal - peak.external)}`,
      );
      if (profiled) lines.push(await profiled);

      // 2. Resync: let the reconciles the cold start's own child events queued drain (a resync period), and the Events
      // it queued be written (the operator writes them behind the reconciles), then watch a window of a little more
      // than one resync period: every server is reconciled once in it.
      await sleep(resyncMs);
      const events = (counts) => [...counts].filter(([key]) => key.endsWith(' events')).reduce((n, [, count]) => n + count, 0);
      let written = events(await requestCounts());
      for (let last = -1; written !== last; last = written, written = events(await requestCounts())) {
        inTime('the Events of the cold start');
        await sleep(2_000);
      }
      lines.push(`Events written for the cold start (once they stopped): ${written - events(beforeCold)}`);
      inTime('the resync');
      const before = await requestCounts();
      const cpuBefore = (await ask()).cpuMs;
      const windowMs = resyncMs + 5_000;
      await sleep(windowMs);
      inTime('the resync');
      const after = await requestCounts();
      const atResync = await ask();
      figures.runPeakKiB = atResync.vmHwmKiB;
      const made = requestsMade(before, after);
      const cpu = atResync.cpuMs - cpuBefore;
      lines.push(
        `resync of ${servers} unchanged servers (a ${windowMs / 1000} s window holding one): ${made === '' ? 'no API request' : `API requests ${made} (the bench's own /metrics and list reads excluded: none in the window)`}`,
      );
      lines.push(`operator CPU in that window: ${fmt(cpu)} (${((cpu / windowMs) * 100).toFixed(2)}% of one core, the resync included)`);
      lines.push(
        `memory after the Events and the resync: RSS ${mib(atResync.vmRssKiB * 1024)} (peak ${mib(atResync.vmHwmKiB * 1024)}), V8 heap used ${mib(atResync.heapUsed)}`,
      );

      // 3. Warm: one create at a time, the Deployment seen by a watch.
      const hot = await namespace('warm');
      const seen = new Map();
      const informer = makeInformer(plane.kubeConfig, `/apis/apps/v1/namespaces/${hot}/deployments`, () =>
        apps.listNamespacedDeployment({ namespace: hot }),
      );
      informer.on('add', (d) => seen.set(d.metadata.name, performance.now()));
      await informer.start();
      const latencies = [];
      for (let i = 0; i < warm; i++) {
        inTime('the warm creates');
        const name = `warm-${i}`;
        const at = performance.now();
        await custom.createNamespacedCustomObject({ ...group, namespace: hot, body: server(name) });
        while (!seen.has(name)) {
          inTime('the warm creates');
          await sleep(2);
        }
        latencies.push(seen.get(name) - at);
      }
      await informer.stop();
      const end = await ask();
      latencies.sort((a, b) => a - b);
      if (warm > 0)
        lines.push(
          `create -> Deployment present (warm operator, ${warm} servers one at a time): p50 ${fmt(pct(latencies, 50))}, p95 ${fmt(pct(latencies, 95))}, max ${fmt(latencies.at(-1))}`,
        );
      lines.push(
        `memory at the end (${servers + warm} servers): RSS ${mib(end.vmRssKiB * 1024)} (peak ${mib(end.vmHwmKiB * 1024)}), V8 heap used ${mib(end.heapUsed)}`,
      );
    } catch (error) {
      lines.push(`STOPPED: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    } finally {
      console.log(lines.join('\n'));
      if (child && child.exitCode === null) {
        child.send('stop');
        await new Promise((resolve) => child.once('exit', resolve));
      }
      await nats.stop();
      await plane.stop();
      await rm(work, { recursive: true, force: true });
    }
    return figures;
  };

  const results = [];
  for (let index = 1; index <= runs && !interrupted; index++) {
    results.push(await run(index));
    if (runs > 1) console.log('');
  }
  if (runs > 1) {
    const finished = results.filter((result) => result.coldMs !== undefined);
    const lines = [`${servers} McpServers from cold, ${runs} runs (${finished.length} finished):`];
    for (const r of results)
      lines.push(
        r.coldMs === undefined
          ? `  run ${r.index}: did not finish (load average ${r.loadBefore} before it)`
          : `  run ${r.index}: ${(r.coldMs / 1000).toFixed(1)} s, peak RSS ${mib(r.peakKiB * 1024)} during it${r.runPeakKiB ? `, ${mib(r.runPeakKiB * 1024)} with the Events and the resync after it` : ''} (load average ${r.loadBefore} before, ${r.loadAfter} at its end); ${r.requests}`,
      );
    if (finished.length > 0) {
      const worst = (field) => Math.max(...finished.map((r) => r[field] ?? 0));
      lines.push(
        `  worst: ${(worst('coldMs') / 1000).toFixed(1)} s, peak RSS ${mib(worst('peakKiB') * 1024)} during the cold start, ${mib(worst('runPeakKiB') * 1024)} over the run`,
      );
    }
    console.log(lines.join('\n'));
  }
}
