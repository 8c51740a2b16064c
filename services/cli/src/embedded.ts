import { once } from 'node:events';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import express from 'express';
import {
  MemoryBus,
  createLogger,
  formatManifestError,
  loadManifestDirectory,
  openDatabase,
  streams,
  type Database,
  type Logger,
  type ManifestError,
  type McpServer,
  type PunkConfig,
} from '@punk/lib';
import { startGateway } from '@punk/gateway';
import { startGovernance } from '@punk/governance';
import { startLedger } from '@punk/ledger';
import { createFront } from '@punk/mcp-front';
import { healthRouter } from './health.js';
import { serversRouter } from './servers-api.js';

/** Options of the all-in-one process, beyond the shared configuration. */
export interface EmbeddedOptions {
  config: PunkConfig;
  /** PGlite directory; `null` keeps the database in memory (`--ephemeral`). Ignored with `config.databaseUrl`. */
  dataDir: string | null;
  log?: Logger;
}

/** A running all-in-one Punk. */
export interface EmbeddedPunk {
  /** Base URL of the HTTP listener, such as `http://127.0.0.1:4100`. */
  baseUrl: string;
  /** Servers loaded from the manifests. */
  servers: McpServer[];
  /** Problems found in the manifests (those documents are not served). */
  manifestErrors: ManifestError[];
  /** Stops everything, in the order that loses nothing: HTTP, gateway (and its children), governance, ledger (after it drained), database, bus. */
  close(): Promise<void>;
}

/**
 * Starts Punk in one process on embedded defaults: the in-process bus, PGlite
 * (or Postgres with `PUNK_DATABASE_URL`), and the example MCP servers as local
 * child processes. The same service code runs distributed over NATS.
 *
 * @throws Error when the manifest directory cannot be read, the database cannot
 *   be opened, or the HTTP port cannot be bound (with the address in the message).
 */
export async function startEmbedded(options: EmbeddedOptions): Promise<EmbeddedPunk> {
  const { config } = options;
  const log = options.log ?? createLogger('punk', config.logLevel);
  const manifestDir = resolve(config.manifests);
  const loaded = await loadManifestDirectory(manifestDir, config.tenant);
  for (const error of loaded.errors) log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
  const servers = loaded.servers.map(entry => entry.server);

  const bus = new MemoryBus(log.child({ component: 'bus' }));
  await bus.ensureStream(streams.ledger);

  const dataDir = config.databaseUrl ? undefined : options.dataDir === null ? null : resolve(options.dataDir);
  if (typeof dataDir === 'string') await mkdir(dataDir, { recursive: true });
  const db: Database = await openDatabase({ ...(config.databaseUrl && { url: config.databaseUrl }), dataDir: dataDir ?? null, log: log.child({ component: 'db' }) });

  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        log.error({ err: error }, 'error while stopping');
      }
    }
    stops.length = 0;
  };
  stops.push(async () => bus.close(), async () => db.close());
  try {
    const ledger = await startLedger({ bus, db, log: log.child({ component: 'ledger' }) });
    stops.push(() => ledger.stop());
    const governance = await startGovernance({ bus, log: log.child({ component: 'governance' }) });
    stops.push(() => governance.stop());
    const workDir = typeof dataDir === 'string' ? resolve(dataDir, '..', 'servers') : resolve('.punk', 'servers');
    const gateway = await startGateway({
      bus,
      log: log.child({ component: 'gateway' }),
      servers,
      workDir,
      startTimeoutMs: config.serverStartTimeoutMs,
      callTimeoutMs: config.callTimeoutMs,
      env: { PUNK_MANIFEST_DIR: manifestDir },
    });
    stops.push(() => gateway.stop());
    const front = await createFront({
      bus,
      log: log.child({ component: 'mcp-front' }),
      tenant: config.tenant,
      maxBodyBytes: config.maxBodyBytes,
      callTimeoutMs: config.callTimeoutMs,
    });
    stops.push(() => front.close());

    await gateway.ready();
    const app = express();
    app.disable('x-powered-by');
    app.use(healthRouter({ ready: async () => { await db.ping(); if (!bus.isConnected()) throw new Error('bus is closed'); } }));
    app.use('/api/v1', serversRouter(bus, config.tenant));
    app.use('/api/v1', ledger.router);
    app.use(front.router);
    const http: HttpServer = app.listen(config.port, config.host);
    await Promise.race([
      once(http, 'listening'),
      once(http, 'error').then(([error]) => {
        throw new Error(`cannot listen on ${config.host}:${config.port}: ${(error as Error).message}`);
      }),
    ]);
    stops.push(async () => {
      http.closeAllConnections();
      await new Promise<void>(done => http.close(() => done()));
    });
    const address = http.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return { baseUrl: `http://${host}:${address.port}`, servers, manifestErrors: loaded.errors, close: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
