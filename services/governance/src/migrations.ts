/** Where governance's tables live (tenant settings) and how they are created. */
import { fileURLToPath } from 'node:url';
import { migrate, type Database, type Logger } from '@punk/lib';

/** Postgres schema of governance. */
export const GOVERNANCE_SCHEMA = 'governance';
/** Governance's SQL migrations (the package's `migrations/` folder). */
export const GOVERNANCE_MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * Applies governance's pending migrations (schema `governance`).
 * @returns the names of the migrations applied
 * @throws PunkError `MigrationFailed`, `DatabaseUnavailable`.
 */
export function migrateGovernance(db: Database, log: Logger): Promise<string[]> {
  return migrate(db, { schema: GOVERNANCE_SCHEMA, dir: GOVERNANCE_MIGRATIONS_DIR, log });
}
