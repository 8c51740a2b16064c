/**
 * What the operator tests share: a nats-server of the test's own (so bucket names never collide with other
 * tests), an operator started against a control plane of `control-plane.ts`, namespaces, the fixture that starts
 * them together ({@link startOperatorFixture}), Punk's real gateway and governance for the end-to-end tests
 * ({@link startTestServices}), and a poll that waits for what the operator does (a deadline for waiting, never an
 * assertion about speed).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { destinationPolicyOf, Keyring, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, NatsBus, streams, type Bus } from '@punk/lib';
import { startPrivateNats } from '../../../services/lib/dist/test/natstest.js';
import { openScratchDb, type ScratchDb } from '../../../services/lib/dist/test/pgtest.js';
import { startOperator, type OperatorOptions, type RunningOperator } from '../index.js';
import { freePort, startControlPlane, type ControlPlane } from './control-plane.js';

export { freePort } from './control-plane.js';

/** A running nats-server of the test's own. */
export interface TestNats {
  url: string;
  /** A bus connection to it (closed by `stop`). */
  connect(name: string): Promise<Bus>;
  stop(): Promise<void>;
}

/** Starts a nats-server of the test's own (services/lib's startPrivateNats: its own port and store) and its bus connections. */
export async function startNats(): Promise<TestNats> {
  const nats = await startPrivateNats();
  const log = createLogger('test-bus', 'silent');
  const buses: Bus[] = [];
  return {
    url: nats.url,
    async connect(name: string) {
      const bus = await NatsBus.connect({ url: nats.url, name, log });
      buses.push(bus);
      return bus;
    },
    async stop() {
      for (const bus of buses) await bus.close().catch(() => undefined);
      await nats.stop();
    },
  };
}

/** Changes to a test operator's options; `server` is merged into the default one. */
export type OperatorOverrides = Omit<Partial<OperatorOptions>, 'server'> & { server?: Partial<OperatorOptions['server']> };

/** Options of a test's operator: the defaults below, with short lease timings so a hand-over is quick. */
export function testOperatorOptions(kubeConfig: KubeConfig, bus: Bus, overrides: OperatorOverrides = {}): OperatorOptions {
  const defaults: OperatorOptions = {
    kubeConfig,
    bus,
    log: createLogger('operator', process.env.PUNK_TEST_LOG_LEVEL ?? 'silent'),
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
  };
  return { ...defaults, ...overrides, server: { ...defaults.server, ...overrides.server } };
}

/** Starts an operator and waits until it leads. */
export async function startLeadingOperator(options: OperatorOptions): Promise<RunningOperator> {
  const operator = await startOperator(options);
  await until('the operator leads', () => operator.isLeader() || undefined);
  return operator;
}

/** A test's own control plane and nats-server, a namespace on it, and an operator once started. */
export interface OperatorFixture {
  plane: ControlPlane;
  nats: TestNats;
  crs: CustomResources;
  /** The test's namespace, `<prefix>-<random>`. */
  ns: string;
  /** The running operator; a test that stops it and starts another puts the new one here, so `stop` stops it. */
  operator: RunningOperator | undefined;
  /** Starts a leading operator on a bus connection of its own, as {@link operator}. */
  startOperator(overrides?: OperatorOverrides): Promise<RunningOperator>;
  /** Punk's gateway and governance, once started. */
  services: TestServices | undefined;
  /** Starts the gateway and governance on the fixture's nats-server ({@link startTestServices}), as {@link services}. */
  startServices(): Promise<TestServices>;
  /** Stops the operator, the services, the nats-server and the control plane, in that order. */
  stop(): Promise<void>;
}

/**
 * Starts a control plane, a nats-server and a namespace `<namespacePrefix>-<random>`, and a leading operator with
 * `options.operator` overrides (none when it is false: the test starts it later with `startOperator`). Stops what
 * it started when a step fails.
 */
export async function startOperatorFixture(
  namespacePrefix: string,
  options: { operator?: OperatorOverrides | false } = {},
): Promise<OperatorFixture> {
  const operator = options.operator ?? {};
  const plane = await startControlPlane();
  let nats: TestNats | undefined;
  try {
    nats = await startNats();
    const fixture: OperatorFixture = {
      plane,
      nats,
      crs: new CustomResources(plane.kubeConfig),
      ns: await createNamespace(plane.kubeConfig, namespacePrefix),
      operator: undefined,
      async startOperator(overrides = {}) {
        fixture.operator = await startLeadingOperator(testOperatorOptions(plane.kubeConfig, await nats!.connect('operator'), overrides));
        return fixture.operator;
      },
      services: undefined,
      async startServices() {
        fixture.services = await startTestServices(nats!);
        return fixture.services;
      },
      async stop() {
        await fixture.operator?.stop();
        await fixture.services?.stop();
        await nats!.stop();
        await plane.stop();
      },
    };
    if (operator !== false) await fixture.startOperator(operator);
    return fixture;
  } catch (error) {
    await nats?.stop();
    await plane.stop();
    throw error;
  }
}

/** Punk's real gateway and governance on a bus of their own, with a scratch Postgres database and a work directory. */
export interface TestServices {
  /** Their bus connection (the gateway's admin subject answers on it). */
  bus: Bus;
  gateway: Gateway;
  governance: GovernanceService;
  /** Stops the gateway and governance, drops the database, removes the work directory. */
  stop(): Promise<void>;
}

/**
 * Starts governance and the gateway on `nats` (the ledger stream made, for the gateway's audit events), the gateway
 * with authentication off so it may reach upstreams on loopback, and 20 s start and call timeouts.
 */
export async function startTestServices(nats: TestNats): Promise<TestServices> {
  const log = createLogger('test-services', process.env.PUNK_TEST_LOG_LEVEL ?? 'silent');
  const bus = await nats.connect('services');
  const database: ScratchDb = await openScratchDb(log);
  const workDir = await mkdtemp(join(tmpdir(), 'punk-operator-services-'));
  let governance: GovernanceService | undefined;
  let gateway: Gateway | undefined;
  const stop = async () => {
    await gateway?.stop();
    await governance?.stop();
    await database.close();
    await rm(workDir, { recursive: true, force: true });
  };
  try {
    await bus.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log, db: database.db });
    gateway = await startTestGateway(bus, database, workDir, log);
    return { bus, gateway, governance, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** The real gateway on `bus` and `db`: no servers of its own, authentication off (upstreams on loopback are allowed), a fresh keyring. */
export function startTestGateway(bus: Bus, db: ScratchDb, workDir: string, log = createLogger('test-gateway', 'silent')): Promise<Gateway> {
  return startGateway({
    bus,
    log,
    db: db.db,
    servers: [],
    egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
    keyring: Keyring.fromConfig({ encryptionKey: randomBytes(32).toString('base64'), encryptionPreviousKeys: [] }),
    workDir,
    startTimeoutMs: 20_000,
    callTimeoutMs: 20_000,
  });
}

/** A real MCP server of the test's own: server-everything over Streamable HTTP on a free port. */
export interface TestMcpServer {
  /** `http://127.0.0.1:<port>/mcp`: an McpServer's `spec.url`. */
  url: string;
  /** Kills the process. */
  stop(): void;
}

const everythingBin = fileURLToPath(
  new URL('../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
);

/** Starts server-everything (`streamableHttp`) on a free port and waits until it listens. */
export async function startEverything(): Promise<TestMcpServer> {
  const port = await freePort();
  const child = spawn(process.execPath, [everythingBin, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  const stop = () => void child.kill();
  try {
    await until(
      'server-everything listening',
      () =>
        new Promise<boolean>((resolve) => {
          const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
          socket.once('error', () => resolve(false));
        }),
    );
  } catch (error) {
    stop();
    throw error;
  }
  return { url: `http://127.0.0.1:${port}/mcp`, stop };
}

/**
 * Polls `probe` every 100 ms until it returns something other than undefined (or false), and returns that.
 * @throws Error naming `what` and the last probe error when `timeoutMs` passes.
 */
export async function until<T>(
  what: string,
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(
        `${what}: not seen within ${timeoutMs / 1000} s${last ? ` (last error: ${last instanceof Error ? last.message : String(last)})` : ''}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
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
  /** Changes the object with the JSON merge patch `body`. */
  async patch(plural: string, namespace: string, name: string, body: object): Promise<Record<string, any>> {
    const { setHeaderOptions, PatchStrategy } = await import('@kubernetes/client-node');
    return this.api.patchNamespacedCustomObject(
      { group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural, name, body },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
  /** Replaces the object's spec with a JSON merge patch of `spec`. */
  patchSpec(plural: string, namespace: string, name: string, spec: object): Promise<Record<string, any>> {
    return this.patch(plural, namespace, name, { spec });
  }
  /** The objects of `plural` in `namespace`. */
  async list(plural: string, namespace: string): Promise<Record<string, any>[]> {
    const list = (await this.api.listNamespacedCustomObject({ group: 'mcp.punk.dev', version: 'v1alpha1', namespace, plural })) as {
      items: Record<string, any>[];
    };
    return list.items;
  }
}

/** The condition of `type` in an object's status, if any. */
export function conditionOf(
  object: Record<string, any>,
  type: string,
): { status: string; reason: string; message: string; lastTransitionTime: string; observedGeneration?: number } | undefined {
  return (
    object.status?.conditions as
      | { type: string; status: string; reason: string; message: string; lastTransitionTime: string; observedGeneration?: number }[]
      | undefined
  )?.find((c) => c.type === type);
}
