import { randomBytes } from 'node:crypto';
import { createLogger, openDatabase } from '@punk/lib';

/** URL of the Postgres server tests use; each test creates its own database on it. */
export const testServerUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A fresh, uniquely named database on the test server, dropped by `drop()`. */
export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

async function onServer(sql: string): Promise<void> {
  const admin = await openDatabase({ url: testServerUrl, log: createLogger('pgtest', 'silent') });
  try {
    await admin.query(sql);
  } finally {
    await admin.close();
  }
}

/** Creates `punk_test_<random>` on the test server so tests run in parallel and leave nothing behind. */
export async function createScratchDatabase(): Promise<ScratchDatabase> {
  const name = `punk_test_${randomBytes(6).toString('hex')}`;
  await onServer(`CREATE DATABASE ${name}`);
  const url = new URL(testServerUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
