/** A scratch Postgres database for one test's gateway (the registry's schema `gateway` is migrated by the gateway itself). */
import { openDatabase, type Database, type Logger } from '@punk/lib';
import { createScratchDatabase } from '../../../lib/dist/test/pgtest.js';

/** An open scratch database and its removal. */
export interface ScratchDb {
  db: Database;
  url: string;
  /** Closes the connections and drops the database. */
  close(): Promise<void>;
}

/** Creates `punk_test_<random>` on the test server and opens it. */
export async function openScratchDb(log: Logger): Promise<ScratchDb> {
  const scratch = await createScratchDatabase();
  const db = await openDatabase({ url: scratch.url, log });
  return {
    db,
    url: scratch.url,
    async close() {
      await db.close();
      await scratch.drop();
    },
  };
}
