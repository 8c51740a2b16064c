/**
 * What the operator tests share: a nats-server of the test's own (so bucket names never collide with other
 * tests), an operator started against a control plane of `control-plane.ts`, namespaces, and a poll that waits
 * for what the operator does (a deadline for waiting, never an assertion about speed).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { createLogger, NatsBus, type Bus } from '@punk/lib';
import { startOperator, type OperatorOptions, type RunningOperator } from '../index.js';

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise(resolve => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** A running nats-server of the test's own. */
export interface TestNats {
  url: string;
  /** A bus connection to it (closed by `stop`). */
  connect(name: string): Promise<Bus>;
  stop(): Promise<void>;
}

/** Starts a nats-server with JetStream on a free port and a temporary store; resolves once it accepts connections. */
export async function startNats(): Promise<TestNats> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'punk-operator-nats-'));
  const child: ChildProcess = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
  const url = `nats://127.0.0.1:${port}`;
  const log = createLogger('test-bus', 'silent');
  const buses: Bus[] = [];
  const connect = async (name: string) => {
    const bus = await NatsBus.connect({ url, name, log });
    buses.push(bus);
    return bus;
  };
  for (let i = 0; ; i++) {
    try {
      await (await NatsBus.connect({ url, name: 'probe', log })).close();
      break;
    } catch (error) {
      if (i > 100) throw error;
      await new Promise(resolve => setTimeout(resolve, 100));
    }
  }
  return {
    url,
    connect,
    async stop() {
      for (const bus of buses) await bus.close().catch(() => undefined);
      child.kill('SIGTERM');
      await new Promise(resolve => child.once('exit', resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Options of a test's operator: the defaults below, with short lease timings so a hand-over is quick. */
export function testOperatorOptions(kubeConfig: KubeConfig, bus: Bus, overrides: Partial<OperatorOptions> = {}): OperatorOptions {
  return {
    kubeConfig,
    bus,
    log: createLogger('operator', (process.env.PUNK_TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent'),
    namespaces: [],
    identity: `operator-${randomBytes(3).toString('hex')}`,
    lease: { namespace: 'default', name: 'punk-operator', durationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 },
    resyncMs: 60_000,
    workers: 4,
    reconcileTimeoutMs: 20_000,
    maxRetryDelayMs: 2_000,
    server: {
      bridgeImage: 'ghcr.io/punk-dev/punk-bridge:test',
      runnerImages: { npm: 'ghcr.io/punk-dev/punk-runner-npm:test', pypi: 'ghcr.io/punk-dev/punk-runner-pypi:test' },
      gateway: { namespace: 'punk-system', podLabels: { 'app.kubernetes.io/name': 'punk-gateway' } },
    },
    ...overrides,
  };
}

/** Starts an operator and waits until it leads. */
export async function startLeadingOperator(options: OperatorOptions): Promise<RunningOperator> {
  const operator = await startOperator(options);
  await until('the operator leads', () => operator.isLeader() || undefined);
  return operator;
}

/**
 * Polls `probe` every 100 ms until it returns something other than undefined (or false), and returns that.
 * @throws Error naming `what` and the last probe error when `timeoutMs` passes.
 */
export async function until<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not seen within ${timeoutMs / 1000} s${last ? ` (last error: ${last instanceof Error ? last.message : String(last)})` : ''}`);
    await new Promise(resolve => setTimeout(resolve, 100));
  }
}

/** Creates a namespace `<prefix>-<random>` and returns its name. */
export async function createNamespace(kubeConfig: KubeConfig, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

/** The custom resources of group mcp.punk.dev, as a test reads and writes them. */
export class CustomResources {
  readonly api: CustomObjectsApi;
  constructor(kubeConfig: KubeConfig) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }
  create(plural: string, namespace: string, body: object): Promise<Record<string, any>> {
    return this.api.createNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural, body });
  }
  get(plural: string, namespace: string, name: string): Promise<Record<string, any>> {
    return this.api.getNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural, name });
  }
  delete(plural: string, namespace: string, name: string): Promise<unknown> {
    return this.api.deleteNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural, name });
  }
  /** Replaces the object's spec with a JSON merge patch of `spec`. */
  async patchSpec(plural: string, namespace: string, name: string, spec: object): Promise<Record<string, any>> {
    const { setHeaderOptions, PatchStrategy } = await import('@kubernetes/client-node');
    return this.api.patchNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural, name, body: { spec } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  }
}

/** The condition of `type` in an object's status, if any. */
export function conditionOf(object: Record<string, any>, type: string): { status: string; reason: string; message: string; lastTransitionTime: string } | undefined {
  return (object.status?.conditions as { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[] | undefined)?.find(c => c.type === type);
}
