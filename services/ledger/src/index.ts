import { fileURLToPath } from 'node:url';
import { migrate, streams, type Bus, type Database, type Logger } from '@punk/lib';
import type express from 'express';
import { createLedgerRouter } from './api.js';
import { startLedgerConsumer } from './consumer.js';
import { LedgerStore } from './store.js';

export { GENESIS_HASH, hashLink, chainEvent, type ChainLink } from './chain.js';
export { LedgerStore, type AppendResult, type ListRunsOptions, type RejectedMessage } from './store.js';
export type { StoredEvent } from './rows.js';
export type { RunSummary } from './runs.js';
export type { VerifyResult, VerifyOptions, BreakReason, ChainBreak, ChainPosition } from './verify.js';
export { DEFAULT_VERIFY_MAX_EVENTS, DEFAULT_VERIFY_MAX_MS } from './verify.js';
export { createLedgerRouter, MAX_RUNS_LIMIT } from './api.js';

/** Postgres schema of the ledger. */
export const LEDGER_SCHEMA = 'ledger';
/** The ledger's SQL migrations (the package's `migrations/` folder). */
export const LEDGER_MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

/** A running ledger. */
export interface Ledger {
  /** JSON API, to be mounted at `/api/v1` (see `createLedgerRouter`). */
  router: express.Router;
  /** The store behind it. */
  store: LedgerStore;
  /** Stops the stream consumer (after the batch in progress). Does not close the bus or the database. */
  stop(): Promise<void>;
}

/**
 * Starts the ledger: applies its migrations (schema `ledger`), ensures the
 * ledger stream exists, starts the durable `ledger-writer` consumer (at most
 * `maxBatch` events per transaction, default `LEDGER_BATCH_SIZE`) and
 * returns its HTTP router (`confinedTenant`: see `createLedgerRouter`).
 * @throws PunkError `MigrationFailed` or `DatabaseUnavailable` from the database; bus errors from `ensureStream`/`consume`.
 */
export async function startLedger(options: {
  bus: Bus;
  db: Database;
  log: Logger;
  confinedTenant?: (res: express.Response) => string | undefined;
  maxBatch?: number;
  /** Awaited before each read of the API: resolves once every event appended so far is stored (see `createLedgerRouter`). */
  caughtUp?: () => Promise<void>;
}): Promise<Ledger> {
  const { bus, db, log } = options;
  await migrate(db, { schema: LEDGER_SCHEMA, dir: LEDGER_MIGRATIONS_DIR, log });
  await bus.ensureStream(streams.ledger);
  const store = new LedgerStore(db);
  const consumer = await startLedgerConsumer(bus, store, log, options.maxBatch);
  log.info('ledger started');
  return {
    router: createLedgerRouter(store, log, { confinedTenant: options.confinedTenant, caughtUp: options.caughtUp }),
    store,
    stop: () => consumer.stop(),
  };
}
export { ledgerService } from './definition.js';
