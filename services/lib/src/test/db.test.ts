import test from 'node:test';
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../log.js';
import { PunkError } from '../errors.js';
import { openDatabase, type Database } from '../db/database.js';
import { migrate } from '../db/migrate.js';
import { createScratchDatabase, testServerUrl } from './pgtest.js';

const log = createLogger('db-test', 'silent');

/** A service's migration folder: two files, the second depending on the first. */
async function writeMigrations(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'punk-migrations-'));
  await writeFile(
    join(dir, '0001_notes.sql'),
    `-- Up Migration
CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);
-- Down Migration
DROP TABLE notes;
`,
  );
  await writeFile(
    join(dir, '0002_tags.sql'),
    `-- Up Migration
ALTER TABLE notes ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
INSERT INTO notes (body) VALUES ('seeded by migration');
-- Down Migration
ALTER TABLE notes DROP COLUMN tags;
`,
  );
  return dir;
}

/** The shared story every backend must tell the same way. */
async function migrationStory(db: Database, dir: string): Promise<void> {
  const first = await migrate(db, { schema: 'notes_svc', dir, log });
  assert.deepEqual(first, ['0001_notes', '0002_tags']);
  const second = await migrate(db, { schema: 'notes_svc', dir, log });
  assert.deepEqual(second, [], 'a second run applies nothing');

  const seeded = await db.query<{ body: string; tags: string[] }>('SELECT body, tags FROM notes_svc.notes');
  assert.deepEqual(seeded.rows, [{ body: 'seeded by migration', tags: [] }]);

  // search_path is restored after migrating: unqualified names do not resolve into the service schema.
  await assert.rejects(db.query('SELECT * FROM notes'), /does not exist/);

  await assert.rejects(
    db.transaction(async (tx) => {
      await tx.query('INSERT INTO notes_svc.notes (body) VALUES ($1)', ['lost']);
      throw new Error('changed my mind');
    }),
    /changed my mind/,
  );
  const committed = await db.transaction(async (tx) => {
    await tx.query('INSERT INTO notes_svc.notes (body) VALUES ($1)', ['kept']);
    return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM notes_svc.notes')).rows[0]!.n;
  });
  assert.equal(committed, 2);
  const bodies = await db.query<{ body: string }>('SELECT body FROM notes_svc.notes ORDER BY id');
  assert.deepEqual(
    bodies.rows.map((r) => r.body),
    ['seeded by migration', 'kept'],
    'the thrown transaction left nothing',
  );
  await db.ping();
}

test('migrations, idempotence and transactions on real Postgres', async () => {
  const scratch = await createScratchDatabase();
  const dir = await writeMigrations();
  const db = await openDatabase({ url: scratch.url, log });
  try {
    assert.equal(db.kind, 'postgres');
    await migrationStory(db, dir);
  } finally {
    await db.close();
    await scratch.drop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('a connection terminated while checked out fails its transaction with DatabaseUnavailable and the pool carries on', async () => {
  const scratch = await createScratchDatabase();
  const db = await openDatabase({ url: scratch.url, log });
  try {
    // Given a transaction whose connection is terminated between two statements (no query running on it),
    const failed = await db
      .transaction(async (tx) => {
        const { pid } = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!;
        await db.query('SELECT pg_terminate_backend($1)', [pid]);
        await new Promise((r) => setTimeout(r, 300));
        await tx.query('SELECT 1');
      })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    // then the transaction fails with DatabaseUnavailable (the process did not die of an unheard 'error' event),
    assert.ok(failed instanceof PunkError, `a PunkError, got ${String(failed)}`);
    assert.equal(failed.code, 'DatabaseUnavailable');
    // and the next statements get fresh connections.
    for (let i = 0; i < 12; i++) await db.ping();
  } finally {
    await db.close();
    await scratch.drop();
  }
});

test('backends terminated again and again under load, just after start-up included, never end the process', async () => {
  const scratch = await createScratchDatabase();
  const db = await openDatabase({ url: scratch.url, log });
  const database = new URL(scratch.url).pathname.slice(1);
  const admin = await openDatabase({ url: testServerUrl, log });
  try {
    // Given twenty callers of statements and transactions while every backend of the database is terminated
    // every few milliseconds (so some die between their start-up and their first statement),
    let loading = true;
    let terminated = 0;
    const terminator = (async () => {
      while (loading) {
        const { rows } = await admin.query<{ n: number }>(
          'SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1',
          [database],
        );
        terminated += rows[0]!.n;
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 30));
      }
    })();
    const outcomes = { ok: 0, unavailable: 0, other: [] as unknown[] };
    const until = Date.now() + 6_000;
    const caller = async () => {
      while (Date.now() < until) {
        const work =
          Math.random() < 0.5
            ? db.query('SELECT 1')
            : db.transaction(async (tx) => {
                await tx.query('SELECT 1');
                await new Promise((r) => setTimeout(r, Math.random() * 5));
                await tx.query('SELECT 2');
              });
        await work.then(
          () => outcomes.ok++,
          (error: unknown) =>
            error instanceof PunkError && error.code === 'DatabaseUnavailable' ? outcomes.unavailable++ : outcomes.other.push(error),
        );
      }
    };
    await Promise.all(Array.from({ length: 20 }, caller));
    loading = false;
    await terminator;
    // then the process is still here (an unheard 'error' event would have ended it), every failure was
    // DatabaseUnavailable, and once the terminations stop the next statements succeed.
    assert.ok(terminated > 20, `backends were terminated (${terminated})`);
    assert.deepEqual(outcomes.other, []);
    assert.ok(outcomes.unavailable > 0 && outcomes.ok > 0, `some failed and some succeeded (${JSON.stringify(outcomes)})`);
    for (let i = 0; i < 12; i++) await db.ping();
  } finally {
    await db.close();
    await admin.close();
    await scratch.drop();
  }
});

test('two processes migrating the same database at once apply each file once', async () => {
  const scratch = await createScratchDatabase();
  const dir = await writeMigrations();
  const a = await openDatabase({ url: scratch.url, log });
  const b = await openDatabase({ url: scratch.url, log });
  try {
    const [ranA, ranB] = await Promise.all([migrate(a, { schema: 'notes_svc', dir, log }), migrate(b, { schema: 'notes_svc', dir, log })]);
    assert.deepEqual([...ranA, ...ranB].sort(), ['0001_notes', '0002_tags']);
    const seeded = await a.query<{ n: number }>('SELECT count(*)::int AS n FROM notes_svc.notes');
    assert.equal(seeded.rows[0]!.n, 1);
  } finally {
    await a.close();
    await b.close();
    await scratch.drop();
    await rm(dir, { recursive: true, force: true });
  }
});

test('the same migrations on ephemeral PGlite', async () => {
  const dir = await writeMigrations();
  const db = await openDatabase({ dataDir: null, log });
  try {
    assert.equal(db.kind, 'pglite');
    await migrationStory(db, dir);
  } finally {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test('PGlite with a data directory keeps its data across close and reopen', async () => {
  const dir = await writeMigrations();
  const dataDir = join(await mkdtemp(join(tmpdir(), 'punk-pglite-')), 'nested', 'data');
  try {
    const first = await openDatabase({ dataDir, log });
    await migrationStory(first, dir);
    await first.close();
    await first.close(); // idempotent

    const reopened = await openDatabase({ dataDir, log });
    try {
      assert.deepEqual(await migrate(reopened, { schema: 'notes_svc', dir, log }), [], 'nothing to apply after reopening');
      const bodies = await reopened.query<{ body: string }>('SELECT body FROM notes_svc.notes ORDER BY id');
      assert.deepEqual(
        bodies.rows.map((r) => r.body),
        ['seeded by migration', 'kept'],
      );
    } finally {
      await reopened.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
    await rm(join(dataDir, '..', '..'), { recursive: true, force: true });
  }
});

test('an unreachable server gives DatabaseUnavailable naming the host, never the password', async () => {
  const error = await openDatabase({ url: 'postgres://punk:s3cret-pw@127.0.0.1:1/nowhere', log }).then(
    () => assert.fail('expected openDatabase to fail'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PunkError);
  assert.equal(error.code, 'DatabaseUnavailable');
  assert.match(error.message, /127\.0\.0\.1:1\/nowhere/);
  assert.doesNotMatch(error.message, /s3cret/);
});

test('a malformed URL gives DatabaseUnavailable without echoing it', async () => {
  const error = await openDatabase({ url: 'not a url with s3cret', log }).then(
    () => assert.fail('expected openDatabase to fail'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PunkError);
  assert.equal(error.code, 'DatabaseUnavailable');
  assert.doesNotMatch(error.message, /s3cret/);
});

test('a database that does not exist gives DatabaseUnavailable naming the host', async () => {
  const url = new URL(process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  url.pathname = '/punk_missing_database';
  await assert.rejects(openDatabase({ url: url.toString(), log }), (e: unknown) => {
    assert.ok(e instanceof PunkError);
    assert.equal(e.code, 'DatabaseUnavailable');
    assert.match(e.message, new RegExp(`${url.hostname}:${url.port || '5432'}/punk_missing_database`));
    return true;
  });
});

test('a PGlite data directory held by another live process is refused; a stale lock is taken over', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-lock-'));
  const holder = spawn('sleep', ['30']);
  t.after(async () => {
    holder.kill();
    await rm(dir, { recursive: true, force: true });
  });
  await writeFile(join(dir, 'punk.lock'), `${holder.pid}\n`);
  await assert.rejects(openDatabase({ dataDir: dir, log }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'DatabaseLocked');
    assert.match(error.message, new RegExp(`in use by another Punk process \\(pid ${holder.pid}\\)`));
    return true;
  });
  holder.kill();
  await new Promise((resolve) => holder.once('exit', resolve));
  const db = await openDatabase({ dataDir: dir, log });
  await db.ping();
  await db.close();
});

test('a data directory that cannot be created is an error, not a hang', async () => {
  await assert.rejects(openDatabase({ dataDir: '/proc/punk-cannot-exist/data', log }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'DatabaseUnavailable');
    assert.match(error.message, /cannot create data directory/);
    return true;
  });
});
