/**
 * A new embedded database starts from the cached template of an initialised one: the first new database makes
 * it, the next ones (in memory or in a data directory) are loaded from it, and a template PGlite cannot load is
 * discarded with an error that says so.
 */
import { strict as assert } from 'node:assert';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createLogger } from '../log.js';
import { openDatabase } from '../db/database.js';
import { pgliteTemplateDirectoryPath, pgliteTemplatePath } from '../db/pglite-template.js';
import type { PunkError } from '../errors.js';

const log = createLogger('pglite-template-test', 'silent');
let cache: string;
const previous = process.env['XDG_CACHE_HOME'];

before(async () => {
  cache = await mkdtemp(join(tmpdir(), 'punk-template-cache-'));
  process.env['XDG_CACHE_HOME'] = cache;
});

after(async () => {
  if (previous === undefined) delete process.env['XDG_CACHE_HOME'];
  else process.env['XDG_CACHE_HOME'] = previous;
  await rm(cache, { recursive: true, force: true });
});

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

test('the first new database makes the template, the next are made from it', async () => {
  const template = pgliteTemplatePath();
  assert.ok(template.startsWith(join(cache, 'punk', 'pglite')), template);
  assert.equal(await exists(template), false);
  const first = await openDatabase({ dataDir: null, log });
  await first.close();
  assert.equal(await exists(template), true, 'kept in the cache');

  const dir = await mkdtemp(join(tmpdir(), 'punk-template-data-'));
  try {
    assert.equal(await exists(pgliteTemplateDirectoryPath()), false);
    const db = await openDatabase({ dataDir: join(dir, 'data'), log });
    // A new data directory is a copy of the template's directory form, made from the tarball once.
    assert.equal(await exists(join(pgliteTemplateDirectoryPath(), 'PG_VERSION')), true, 'directory form kept in the cache');
    await db.query('CREATE TABLE kept (n int)');
    await db.query('INSERT INTO kept VALUES (7)');
    await db.close();
    // Opened again, it is the database written above, not a new copy of the template.
    const again = await openDatabase({ dataDir: join(dir, 'data'), log });
    assert.deepEqual((await again.query<{ n: number }>('SELECT n FROM kept')).rows, [{ n: 7 }]);
    await again.close();
    // The next new data directory is a copy of the template, not of the database above.
    const other = await openDatabase({ dataDir: join(dir, 'other'), log });
    assert.deepEqual((await other.query("SELECT to_regclass('kept') AS kept")).rows, [{ kept: null }]);
    await other.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a template PGlite cannot load is discarded, and the next new database makes a fresh one', async () => {
  await rm(pgliteTemplateDirectoryPath(), { recursive: true, force: true });
  await writeFile(pgliteTemplatePath(), 'not a tarball');
  await assert.rejects(
    openDatabase({ dataDir: null, log }),
    (error: PunkError) => error.code === 'DatabaseUnavailable' && /template was discarded/.test(error.message),
  );
  assert.equal(await exists(pgliteTemplatePath()), false);
  assert.equal(await exists(pgliteTemplateDirectoryPath()), false);
  const db = await openDatabase({ dataDir: null, log });
  assert.equal((await db.query('SELECT 1 AS one')).rows.length, 1);
  await db.close();
  assert.equal(await exists(pgliteTemplatePath()), true);
});
