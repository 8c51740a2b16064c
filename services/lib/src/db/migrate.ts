import { runner } from 'node-pg-migrate';
import type pg from 'pg';
import { PunkError, errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import type { Database } from './database.js';
import { clientOf } from './pool.js';

/** Which migrations to run. */
export interface MigrateOptions {
  /** The service's Postgres schema (created if missing); its tables and its `pgmigrations` table live there. */
  schema: string;
  /** Directory of the service's `.sql` migration files (`0001_name.sql`, with `-- Up Migration` / `-- Down Migration` markers). */
  dir: string;
  log: Logger;
}

/**
 * Applies a service's pending SQL migrations with node-pg-migrate, in one
 * transaction, inside `schema`. Idempotent: applied files are recorded in
 * `<schema>.pgmigrations` and skipped. Safe across processes: the runner holds
 * node-pg-migrate's advisory lock and waits for it when another process migrates.
 *
 * @returns the names of the migrations applied by this call (empty when up to date)
 * @throws PunkError `MigrationFailed` naming the schema and the failing statement's error (nothing is applied).
 */
export async function migrate(db: Database, options: MigrateOptions): Promise<string[]> {
  const { schema, dir, log } = options;
  const checkedOut = await clientOf(db);
  const { client } = checkedOut;
  let broken: Error | undefined;
  try {
    const applied = await runner({
      dbClient: client as unknown as pg.ClientBase,
      dir,
      schema,
      createSchema: true,
      migrationsTable: 'pgmigrations',
      migrationsSchema: schema,
      direction: 'up',
      singleTransaction: true,
      checkOrder: true,
      advisoryLockMode: 'wait',
      logger: {
        debug: (message: string) => log.debug({ schema }, message),
        info: (message: string) => log.debug({ schema }, message),
        warn: (message: string) => log.warn({ schema }, message),
        error: (message: string) => log.error({ schema }, message),
      },
    });
    if (applied.length > 0) log.info({ schema, migrations: applied.map((m) => m.name) }, 'applied migrations');
    return applied.map((m) => m.name);
  } catch (error) {
    throw new PunkError(
      'MigrationFailed',
      `migrating schema ${schema} from ${dir} failed: ${errorMessage(error)}`,
      { schema, dir },
      { cause: error },
    );
  } finally {
    // The runner sets search_path on this session; PGlite keeps one session for every client, so restore it.
    await client.query('RESET search_path').catch((error: unknown) => (broken = error as Error));
    checkedOut.release(broken);
  }
}
