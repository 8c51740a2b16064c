import type pg from 'pg';
import type { Logger } from '../log.js';
import type { Database } from './database.js';

/**
 * Internal: the `pg` pool behind each open `Database`, for tools that need a
 * raw client (the migration runner). Not exported from the package index.
 */
const pools = new WeakMap<Database, pg.Pool>();

/** Records the pool behind a database. */
export function registerPool(db: Database, pool: pg.Pool): void {
  pools.set(db, pool);
}

/** The pool behind a database opened by `openDatabase`. */
export function poolOf(db: Database): pg.Pool {
  const pool = pools.get(db);
  if (!pool) throw new Error('database was not opened by openDatabase');
  return pool;
}

/** A client checked out of a pool by {@link checkOut}. */
export interface CheckedOutClient {
  client: pg.PoolClient;
  /** Gives the client back; with `error`, or when the connection failed while it was out, the pool discards it. */
  release(error?: Error): void;
}

/**
 * Checks a client out of `pool` with an `'error'` listener for as long as it is out: `pg` emits an error on a
 * client whose connection drops (a terminated backend, a restarted server) and, unheard, that error ends the
 * process. The error is logged and the client is discarded on release. The pool listens again once it is back.
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
