import type pg from 'pg';
import type { Logger } from '../log.js';
import type { Database } from './database.js';

/**
 * Internal: a client of each open `Database` for tools that need one of their own (the migration runner, which takes
 * any object with pg's `query`). Not exported from the package index.
 */
const clients = new WeakMap<Database, () => Promise<MigrationClient>>();

/** A client for a tool, and how to give it back (with the error that broke it, if one did). */
export interface MigrationClient {
  client: { query(text: string, values?: unknown[]): Promise<unknown> };
  release(error?: Error): void;
}

/** Records how to get a client of a database. */
export function registerClient(db: Database, checkOut: () => Promise<MigrationClient>): void {
  clients.set(db, checkOut);
}

/** A client of a database opened by `openDatabase`. @throws Error for another database, or what checking out throws. */
export function clientOf(db: Database): Promise<MigrationClient> {
  const checkOut = clients.get(db);
  if (!checkOut) throw new Error('database was not opened by openDatabase');
  return checkOut();
}

/** A client checked out of a pool by {@link checkOut}. */
export interface CheckedOutClient {
  client: pg.PoolClient;
  /** Gives the client back; with `error`, or when the connection failed while it was out, the pool discards it. */
  release(error?: Error): void;
}

/**
 * Checks a client out of `pool` and notes whether its connection fails while it is out (`pg` emits an `'error'` on a
 * client whose connection drops: a terminated backend, a restarted server); such a client is discarded on release.
 * The pool must come from {@link keepClientsHeard}, which keeps every client heard so no such error ends the process.
 *
 * @throws what `pool.connect()` throws.
 */
export async function checkOut(pool: pg.Pool, log: Logger, where: string): Promise<CheckedOutClient> {
  const client = await pool.connect();
  let failed: Error | undefined;
  const onError = (error: Error) => {
    if (failed) return;
    failed = error;
    log.warn({ err: error, database: where }, 'database connection failed while in use; it is discarded');
  };
  client.on('error', onError);
  return {
    client,
    release(error) {
      client.removeListener('error', onError);
      client.release(error ?? failed);
    },
  };
}

/**
 * Gives every client of `pool` an `'error'` listener for its whole life. `pg-pool` listens only while a client is
 * idle, and a backend terminated just after its start-up sends its FATAL error in the same read as the start-up's
 * end: the pool has handed the client out by then, and the one who asked has not run yet to listen. Unheard, that
 * error ends the process; heard, the client is no longer queryable and its next query fails as unavailable.
 */
export function keepClientsHeard(pool: pg.Pool, log: Logger, where: string): void {
  pool.on('connect', (client) => {
    client.on('error', (error) => log.debug({ err: error, database: where }, 'database connection failed'));
  });
}
