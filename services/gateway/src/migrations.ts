/** Where the gateway's tables live (registry, credentials, tool pins) and how they are created. */
import { fileURLToPath } from 'node:url';
import { migrate, type Database, type Logger } from '@punk/lib';

/** Postgres schema of the gateway (registry, credentials, tool pins). */
export const GATEWAY_SCHEMA = 'gateway';
/** The gateway's SQL migrations (the package's `migrations/` folder). */
export const GATEWAY_MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * Applies the gateway's pending migrations (schema `gateway`).
 * @returns the names of the migrations applied
 * @throws PunkError `MigrationFailed`, `DatabaseUnavailable`.
 */
export function migrateGateway(db: Database, log: Logger): Promise<string[]> {
  return migrate(db, { schema: GATEWAY_SCHEMA, dir: GATEWAY_MIGRATIONS_DIR, log });
}
