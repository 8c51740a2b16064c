import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase, type Database } from '../db/database.js';
import type { Logger } from '../log.js';

/** URL of the Postgres server tests use; each test file creates its own database on it. */
export const testServerUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A fresh, uniquely named database on the test server, dropped by `drop()`. */
export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Creates `punk_test_<random>` on the test server so test files run in parallel and leave nothing behind. */
export async function createScratchDatabase(): Promise<ScratchDatabase> {
  const name = `punk_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: testServerUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(testServerUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: testServerUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** A scratch database, open (e.g. for a gateway, which migrates its own schema). */
export interface ScratchDb {
  db: Database;
  url: string;
  /** Closes the connections and drops the database. */
  close(): Promise<void>;
}

/** Creates a scratch database ({@link createScratchDatabase}) and opens it. */
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
