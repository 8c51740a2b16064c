import type pg from 'pg';
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
