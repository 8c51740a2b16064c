/**
 * The runtime of every distributed service process (`node services/<name>/dist/main.js`,
 * `punk <name>`): configuration, NATS, Postgres, health endpoints, signals.
 * A service's `main.ts` only names itself and says how to start.
 */
import { loadConfig, type PunkConfig } from '../config.js';
import { NatsBus } from '../bus/nats.js';
import { redactNatsUrl } from '../bus/nats-url.js';
import type { Bus, StreamConfig } from '../bus/bus.js';
import type { Database } from '../db/database.js';
import { PunkError, errorMessage } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { startTracing } from '../tracing/setup.js';
import { listenHealth, listenMetrics, listenOptionsOf, type HealthServer, type HttpHandler, type MetricsServer } from './health.js';
import { TrackedBus } from './tracked-bus.js';

/** What a service's `start` receives. */
export interface ServiceContext {
  /** Validated configuration (`loadConfig`). */
  config: PunkConfig;
  /** The NATS bus; responders started with `serve` are stopped and awaited on shutdown. */
  bus: Bus;
  /** The open Postgres database, when the service `needsDatabase`; undefined otherwise. */
  db: Database | undefined;
  /** Logger of the service (component = its name). */
  log: Logger;
}

/** What `start` returns: how to stop, and optionally HTTP routes beyond the health endpoints. */
export interface StartedService {
  /** Finishes or abandons the service's own work (consumers, child processes). Bus and database are closed after it by the runtime. */
  stop(): Promise<void>;
  /** Handler of every HTTP path other than `/healthz` and `/readyz` (an express app). */
  http?: HttpHandler;
}

/** A service as `runService` runs it. */
export interface ServiceDefinition {
  /** `gateway`, `governance`, `ledger`, `mcp-front`: logs, NATS connection name. */
  name: string;
  /** When true, `PUNK_DATABASE_URL` is required and the database must answer for readiness. */
  needsDatabase: boolean;
  /** Streams to create (idempotently) before `start`, e.g. the ledger stream the service appends to. */
  streams?: StreamConfig[];
  /** Starts the service (migrations included); the process is ready once it resolves. */
  start(context: ServiceContext): Promise<StartedService>;
}

/** Options of {@link runService}, for tests; a main passes none. */
export interface RunOptions {
  /** Environment to read (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Install SIGTERM/SIGINT handlers that shut down and exit the process (default true). */
  handleSignals?: boolean;
}

/** A running service process. */
export interface RunningService {
  /** Base URL of its HTTP listener (`/healthz`, `/readyz`, its routes). */
  url: string;
  /** Graceful shutdown (what SIGTERM does, without exiting). Idempotent. */
  shutdown(reason: string): Promise<void>;
}

const PING_TIMEOUT_MS = 2_000;

/** The handler of a service without routes of its own: every path but the listener's own is 404. */
const notFound: HttpHandler = (req, res) => {
  res.writeHead(404, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ error: { code: 'NotFound', message: `no route ${(req.url ?? '/').split('?')[0]} on this service` } }));
};

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms)),
  );
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs one service until SIGTERM or SIGINT:
 * 1. reads configuration; `PUNK_NATS_URL` is required, and `PUNK_DATABASE_URL` when `needsDatabase`;
 * 2. binds `PUNK_HOST:PUNK_PORT` first (`/healthz` answers from then on, `/readyz` says 503 until ready), and
 *    `PUNK_HOST:PUNK_METRICS_PORT` for `/metrics` when that is set (else `/metrics` is on `PUNK_PORT`);
 * 3. connects NATS, opens Postgres, ensures `streams`, runs `start`;
 * 4. `/readyz` is 200 only while NATS is connected, the database answers `SELECT 1`
 *    (within 2 s) and the service is started and not stopping.
 *
 * On the first signal: readiness goes false, the service's responders are
 * unsubscribed (no new work), requests in flight get up to
 * `PUNK_SHUTDOWN_TIMEOUT_MS` to finish, then the service's `stop()` runs (the same
 * deadline), the bus is drained and closed, the database closed, buffered spans exported (tracing is on when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set: tracing/settings.ts), and the process exits 0
 * (1 when a step failed). A second signal exits 1 at once.
 *
 * @throws PunkError `InvalidConfig` (bad or missing variable, named, `OTEL_*` ones included), `BusUnavailable`
 *   (NATS unreachable, naming the URL), `DatabaseUnavailable`, or what `start` throws;
 *   everything already opened is closed first.
 */
export async function runService(definition: ServiceDefinition, options: RunOptions = {}): Promise<RunningService> {
  const env = options.env ?? process.env;
  const config = loadConfig(env);
  const log = createLogger(definition.name, config.logLevel);
  if (!config.natsUrl) {
    throw new PunkError(
      'InvalidConfig',
      `PUNK_NATS_URL is required to run ${definition.name} as its own process (e.g. PUNK_NATS_URL=nats://127.0.0.1:4222)`,
      { variable: 'PUNK_NATS_URL' },
    );
  }
  if (definition.needsDatabase && !config.databaseUrl) {
    throw new PunkError(
      'InvalidConfig',
      `PUNK_DATABASE_URL is required to run ${definition.name} (e.g. PUNK_DATABASE_URL=postgres://postgres@127.0.0.1:5432/punk)`,
      { variable: 'PUNK_DATABASE_URL' },
    );
  }
  if (config.metricsPort !== undefined && config.metricsPort !== 0 && config.metricsPort === config.port) {
    throw new PunkError(
      'InvalidConfig',
      `PUNK_METRICS_PORT=${config.metricsPort}: must differ from PUNK_PORT (it is a second listener, for /metrics alone; unset it to serve /metrics on PUNK_PORT)`,
      { variable: 'PUNK_METRICS_PORT' },
    );
  }

  let bus: TrackedBus | undefined;
  let db: Database | undefined;
  let started: StartedService | undefined;
  let stopping = false;
  const ready = async () => {
    if (stopping) throw new Error('shutting down');
    if (!started) throw new Error('starting');
    if (!bus?.isConnected()) throw new Error(`NATS at ${redactNatsUrl(config.natsUrl ?? '')} is not connected`);
    if (db) await withTimeout(db.ping(), PING_TIMEOUT_MS, 'the database');
  };
  // The tracing SDK and exporters are loaded only when tracing is on (setup.ts).
  const tracing = await startTracing(definition.name, env);
  const separateMetrics = config.metricsPort !== undefined;
  const http: HealthServer = await listenHealth(config.host, config.port, ready, undefined, {
    ...listenOptionsOf(config),
    serveMetrics: !separateMetrics,
  });
  let metricsServer: MetricsServer | undefined;
  try {
    if (separateMetrics) metricsServer = await listenMetrics(config.host, config.metricsPort!);
  } catch (error) {
    await http.close();
    throw error;
  }

  let shutdownPromise: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> =>
    (shutdownPromise ??= (async () => {
      stopping = true;
      const deadline = Date.now() + config.shutdownTimeoutMs;
      const left = () => Math.max(0, deadline - Date.now());
      log.info({ reason, shutdownTimeoutMs: config.shutdownTimeoutMs }, `${definition.name} shutting down`);
      let failed = false;
      const step = async (what: string, fn: () => Promise<unknown>) => {
        try {
          await fn();
        } catch (error) {
          failed = true;
          log.error({ err: errorMessage(error) }, `shutdown: ${what} failed`);
        }
      };
      if (bus) {
        await step('stop serving', () => bus!.stopServing());
        if (!(await bus.idle(left()))) log.warn({ pending: bus.pending }, 'shutdown deadline passed with requests still in flight');
      }
      if (started) await step('service stop', () => withTimeout(started!.stop(), Math.max(left(), 1), `${definition.name} stop`));
      if (bus) await step('bus close', () => bus!.close());
      if (db) await step('database close', () => db!.close());
      await step('http close', () => http.close());
      if (metricsServer) await step('metrics listener close', () => metricsServer.close());
      await step('trace export', () => tracing.shutdown());
      log.info(`${definition.name} stopped`);
      if (failed) throw new Error(`${definition.name} did not shut down cleanly`);
    })());

  try {
    bus = new TrackedBus(
      await NatsBus.connect({
        url: config.natsUrl,
        name: `punk-${definition.name}-${config.instanceId}`,
        log: createLogger('bus', config.logLevel),
        maxPayloadBytes: config.maxResultBytes,
      }),
    );
    if (definition.needsDatabase)
      db = await (await import('../db/database.js')).openDatabase({ url: config.databaseUrl!, log: createLogger('db', config.logLevel) });
    for (const stream of definition.streams ?? []) await bus.ensureStream(stream);
    started = await definition.start({ config, bus, db, log });
    // A service without routes of its own answers other paths 404 once started (503 "starting" before).
    http.setHandler(started.http ?? notFound);
  } catch (error) {
    await shutdown('start failed').catch(() => undefined);
    throw error;
  }
  log.info(
    { url: http.url, ...(metricsServer && { metricsUrl: metricsServer.url }), instanceId: config.instanceId },
    `${definition.name} is ready`,
  );

  if (options.handleSignals ?? true) {
    const onSignal = (signal: NodeJS.Signals) => {
      if (shutdownPromise) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      shutdown(signal).then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  }
  return { url: http.url, shutdown };
}

/**
 * What a `main.ts` calls: `runService`, and on a start-up failure one line
 * `punk <name>: <message>` on stderr and exit code 2.
 */
export function runServiceMain(definition: ServiceDefinition): void {
  runService(definition).catch((error: unknown) => {
    process.stderr.write(`punk ${definition.name}: ${errorMessage(error)}\n`);
    process.exit(2);
  });
}
