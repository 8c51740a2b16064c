import { access, mkdir, readdir, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { LOCK_FILE, lockDataDirectory } from './lock.js';
import { makeOwnerOnly, OWNER_ONLY_DIRECTORY_MODE } from './owner-only.js';
import { copyPgliteTemplate, discardPgliteTemplate, pgliteTemplate } from './pglite-template.js';
import { PunkError, errorMessage } from '../errors.js';
import type { Logger } from '../log.js';
import { checkOut, keepClientsHeard, registerClient, type CheckedOutClient } from './pool.js';

/** Rows and count of one statement. `rowCount` is the rows returned or affected (0 when the server reports none). */
export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

/** Anything that runs parameterised SQL: a database or an open transaction. */
export interface Queryable {
  /**
   * Runs one statement with `$1…$n` parameters (values are sent separately, never interpolated).
   * @throws the server's error (a `pg` `DatabaseError` with its SQLSTATE `code`) for a failing statement;
   *   PunkError `DatabaseUnavailable` when the server cannot be reached.
   */
  query<T = Record<string, unknown>>(text: string, params?: unknown[]): Promise<QueryResult<T>>;
}

/** An open database: Postgres over the network, or embedded PGlite; callers see no difference. */
export interface Database extends Queryable {
  /** `postgres` for a server reached by URL, `pglite` for the embedded one. */
  readonly kind: 'postgres' | 'pglite';
  /**
   * Runs `fn` inside BEGIN … COMMIT on one connection; a throw rolls back and is rethrown.
   * Inside `fn`, use only `tx`: on PGlite the pool holds one connection, so `db.query` would wait for the transaction to end.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Resolves when the database answers `SELECT 1`. @throws PunkError `DatabaseUnavailable`. */
  ping(): Promise<void>;
  /** Closes every connection (PGlite: the database itself). Idempotent. */
  close(): Promise<void>;
}

/** How to open the database. */
export interface DatabaseOptions {
  /** A Postgres URL (`postgres://user:pass@host:port/db`); when absent, embedded PGlite is used. */
  url?: string;
  /** PGlite data directory (created if missing); `null` or absent for an ephemeral in-memory database. Ignored with `url`. */
  dataDir?: string | null;
  log: Logger;
}

/** Node network errors that mean "the server is not there", as opposed to a failing statement. */
const unreachableCodes = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
]);
/**
 * SQLSTATE classes meaning the connection itself failed: 08 connection exception, 28 invalid authorization, 3D invalid
 * catalog (no such database), 57P01 admin shutdown (`pg_terminate_backend`), 57P02 crash shutdown, 57P03 cannot connect now.
 */
function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  if (
    typeof code === 'string' &&
    (unreachableCodes.has(code) || code.startsWith('08') || code.startsWith('28') || code === '3D000' || /^57P0[1-3]$/.test(code))
  )
    return true;
  const message = errorMessage(error);
  return /Connection terminated|timeout expired|connect ECONN|not queryable/i.test(message);
}

/**
 * Opens the database: a `pg` pool against Postgres when `url` is given,
 * otherwise embedded PGlite, reached in process (its values read as `pg` reads
 * them), so every caller runs the same SQL and sees the same rows on both.
 *
 * @throws PunkError `DatabaseUnavailable` when the URL is malformed or the server cannot be reached or refuses the
 *   login; the message names the host, port and database, never the password.
 */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  if (options.url !== undefined) return openPostgres(options.url, options.log);
  return openPglite(options.dataDir ?? null, options.log);
}

/** `host:port/database` of a URL, without credentials; `(unparseable URL)` when it cannot be parsed. */
export function describeDatabaseUrl(url: string): string {
  try {
    const parsed = new URL(url);
    const database = parsed.pathname.replace(/^\//, '') || '(default database)';
    return `${parsed.hostname || '(no host)'}:${parsed.port || '5432'}/${database}`;
  } catch {
    return '(unparseable URL)';
  }
}

async function openPostgres(url: string, log: Logger): Promise<Database> {
  const where = describeDatabaseUrl(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new PunkError('DatabaseUnavailable', 'database URL is not a valid URL (expected postgres://user:password@host:port/database)');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new PunkError('DatabaseUnavailable', `database URL for ${where} must use postgres:// or postgresql://, not ${parsed.protocol}`);
  }
  const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 10_000 });
  const db = wrapPool(pool, 'postgres', where, log, async () => {});
  try {
    await db.ping();
  } catch (error) {
    await pool.end().catch(() => {});
    throw error;
  }
  log.debug({ database: where }, 'connected to postgres');
  return db;
}

/** Files Punk itself keeps in a data directory besides the database (its lock, `punk up`'s and `punk cluster`'s key file). */
const PUNK_FILES = new Set([LOCK_FILE, 'encryption.key']);

/**
 * Refuses a directory that holds files and no database (PGlite's `PG_VERSION`): Punk makes everything in its data
 * directory owner-only, so a mistyped `--data` (say, a home directory) must not be taken over.
 * @throws PunkError `DatabaseUnavailable` naming the directory and one of its files.
 */
async function refuseForeignDirectory(directory: string): Promise<void> {
  const entries = await readdir(directory);
  if (entries.includes('PG_VERSION')) return;
  const foreign = entries.find((name) => !PUNK_FILES.has(name));
  if (foreign === undefined) return;
  throw new PunkError(
    'DatabaseUnavailable',
    `data directory ${directory} is not empty and holds no Punk database (it has ${JSON.stringify(foreign)}, and no PG_VERSION): pass a new or empty directory, or one Punk made`,
  );
}

/**
 * PGlite's start parameters: its defaults with a 4 MB shared buffer pool instead of Postgres's 128 MB, and the shared
 * memory of one backend (PGlite is single-user: `max_connections=1`, no WAL senders, replication slots or more than
 * one autovacuum worker slot). Postgres touches its whole shared memory at start, so in WebAssembly it is resident from
 * the first moment (measured on an idle `punk up`: PGlite's memory held 30 MiB with 16 MB of buffers and the default
 * slots, 14 MiB with these; with 128 MB, about 140 MiB more); pages beyond the pool are read back from the data
 * directory's files, which the operating system caches.
 */
const PGLITE_START_PARAMS = [
  ...PGlite.defaultStartParams,
  '-c',
  'shared_buffers=4MB',
  '-c',
  'max_connections=1',
  '-c',
  'max_wal_senders=0',
  '-c',
  'max_replication_slots=0',
  '-c',
  'autovacuum_max_workers=1',
];

async function openPglite(dataDir: string | null, log: Logger): Promise<Database> {
  let directory: string | undefined;
  let unlock = async () => {};
  if (dataDir !== null) {
    directory = resolve(dataDir);
    try {
      await makeDirectory(directory);
    } catch (error) {
      throw new PunkError('DatabaseUnavailable', `cannot create data directory ${directory}: ${errorMessage(error)}`, undefined, {
        cause: error,
      });
    }
    await refuseForeignDirectory(directory);
    unlock = await lockDataDirectory(directory);
  }
  const where = directory ? `pglite ${directory}` : 'pglite (in memory)';
  // The ledger and the encrypted credentials are in there: owner-only before PGlite writes and after (it writes
  // the files of a new database 0666 whatever the umask); at close too, for the files it wrote while running.
  const restrict = async () => {
    if (directory === undefined) return;
    await makeOwnerOnly(directory).catch((error: unknown) => {
      throw new PunkError(
        'DatabaseUnavailable',
        `cannot make data directory ${directory} owner-only (directories 0700, files 0600): ${errorMessage(error)}; run Punk as the directory's owner`,
        undefined,
        { cause: error },
      );
    });
  };
  let lite: PGlite;
  try {
    await restrict();
    // A new database starts from the template of an initialised one (pglite-template.ts) rather than running initdb.
    const fresh =
      directory === undefined ||
      !(await access(join(directory, 'PG_VERSION')).then(
        () => true,
        () => false,
      ));
    // In memory, PGlite loads the tarball; a new data directory is a copy of the template's directory form (what
    // PGlite would unpack, without unpacking it in this process's memory).
    const template = fresh && directory === undefined ? await pgliteTemplate(PGLITE_START_PARAMS, log) : undefined;
    const create = async () => {
      if (fresh && directory !== undefined) await copyPgliteTemplate(directory, PGLITE_START_PARAMS, log);
      return PGlite.create(directory, {
        startParams: PGLITE_START_PARAMS,
        parsers: PG_COMPATIBLE_PARSERS,
        ...(template && { loadDataDir: template }),
      });
    };
    lite = await create().catch(async (error: unknown) => {
      if (!fresh) throw error;
      await discardPgliteTemplate();
      throw new PunkError(
        'DatabaseUnavailable',
        `cannot create embedded database ${where} from the cached template (${errorMessage(error)}); the template was discarded: start again${directory ? ` with a new or empty data directory` : ''}`,
        undefined,
        { cause: error },
      );
    });
  } catch (error) {
    await unlock();
    if (error instanceof PunkError) throw error;
    throw new PunkError('DatabaseUnavailable', `cannot open embedded database ${where}: ${errorMessage(error)}`, undefined, {
      cause: error,
    });
  }
  try {
    await restrict();
  } catch (error) {
    await lite.close().catch(() => {});
    await unlock();
    throw error;
  }
  const db = wrapPglite(lite, where, async () => {
    await restrict().catch((error: unknown) => {
      log.warn({ err: error, database: where }, 'could not make the data directory owner-only');
    });
    await unlock();
  });
  log.debug({ database: where }, 'opened embedded database');
  return db;
}

/**
 * How PGlite reads values where `pg` reads them otherwise, so that callers see the same values on both: `int8` as a
 * string (also in arrays), `bytea` as a Buffer.
 */
const PG_COMPATIBLE_PARSERS = {
  20: (text: string) => text,
  17: (text: string) => Buffer.from(text.slice(2), 'hex'),
};

/**
 * The embedded database, reached in process (no socket, no wire client): PGlite runs one statement at a time, a
 * transaction holds it (its other queries wait, as behind the one connection of a pool). A statement without
 * parameters runs in the simple protocol (several statements in one text), as `pg` runs it.
 */
function wrapPglite(lite: PGlite, where: string, afterClose: () => Promise<void>): Database {
  const run = async <T>(on: Pick<PGlite, 'query' | 'exec'>, text: string, params?: unknown[]): Promise<QueryResult<T>> => {
    if (lite.closed) throw new PunkError('DatabaseUnavailable', `database ${where} is closed`, { database: where });
    const result =
      params === undefined || params.length === 0
        ? (await on.exec(text)).at(-1)
        : await on.query(
            text,
            params.map((value) => value ?? null),
          );
    const rows = (result?.rows ?? []) as T[];
    return { rows, rowCount: Math.max(result?.affectedRows ?? 0, rows.length) };
  };
  let closing: Promise<void> | undefined;
  const db: Database = {
    kind: 'pglite',
    query: (text, params) => run(lite, text, params),
    transaction: (fn) => lite.transaction((tx) => fn({ query: (text, params) => run(tx, text, params) })),
    async ping() {
      await run(lite, 'SELECT 1');
    },
    close() {
      closing ??= (async () => {
        await lite.close();
        await afterClose();
      })();
      return closing;
    },
  };
  registerClient(db, async () => ({
    // What node-pg-migrate needs of a client: `query(text | { text, values }, values?)` resolving with `{ rows }`.
    client: {
      query: (query: string | { text: string; values?: unknown[] }, values?: unknown[]) =>
        typeof query === 'string' ? run(lite, query, values) : run(lite, query.text, query.values ?? values),
    },
    release: () => undefined,
  }));
  return db;
}

/**
 * Creates a directory and its missing parents one level at a time, each owner-only (0700). Node's
 * recursive mkdir never returns on some special file systems (a `--data`
 * under /proc hung instead of failing); this fails with the real error.
 */
async function makeDirectory(directory: string): Promise<void> {
  const parent = dirname(directory);
  if (parent !== directory) {
    await mkdir(directory, OWNER_ONLY_DIRECTORY_MODE).catch(async (error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') return;
      if (code !== 'ENOENT' || (await isDirectory(parent))) throw error;
      await makeDirectory(parent);
      await mkdir(directory, OWNER_ONLY_DIRECTORY_MODE).catch((again: unknown) => {
        if ((again as NodeJS.ErrnoException).code !== 'EEXIST') throw again;
      });
    });
  }
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

function wrapPool(pool: pg.Pool, kind: Database['kind'], where: string, log: Logger, afterEnd: () => Promise<void>): Database {
  pool.on('error', (error) => log.warn({ err: error, database: where }, 'idle database connection failed'));
  keepClientsHeard(pool, log, where);
  const unavailable = (error: unknown): never => {
    if (isUnavailable(error)) {
      throw new PunkError(
        'DatabaseUnavailable',
        `database ${where} is unavailable: ${errorMessage(error)}`,
        { database: where },
        { cause: error },
      );
    }
    throw error;
  };
  const run = async <T>({ client }: CheckedOutClient, text: string, params?: unknown[]): Promise<QueryResult<T>> => {
    try {
      const result = await client.query(text, params);
      return { rows: result.rows as T[], rowCount: result.rowCount ?? 0 };
    } catch (error) {
      return unavailable(error);
    }
  };
  const connect = async (): Promise<CheckedOutClient> => {
    try {
      return await checkOut(pool, log, where);
    } catch (error) {
      return unavailable(error);
    }
  };
  // Not `pool.query`: it discards the connection after any failing statement, and PGlite
  // is one session behind one connection; only a broken connection is discarded here.
  const once = async <T>(text: string, params?: unknown[]): Promise<QueryResult<T>> => {
    const connection = await connect();
    let broken: Error | undefined;
    try {
      return await run<T>(connection, text, params);
    } catch (error) {
      if (error instanceof PunkError) broken = error;
      throw error;
    } finally {
      connection.release(broken);
    }
  };
  let closing: Promise<void> | undefined;
  const db: Database = {
    kind,
    query: once,
    async transaction(fn) {
      const connection = await connect();
      let broken: Error | undefined;
      try {
        await run(connection, 'BEGIN');
        const result = await fn({ query: (text, params) => run(connection, text, params) });
        await run(connection, 'COMMIT');
        return result;
      } catch (error) {
        await connection.client.query('ROLLBACK').catch((rollbackError: unknown) => (broken = rollbackError as Error));
        throw error;
      } finally {
        connection.release(broken);
      }
    },
    async ping() {
      await once('SELECT 1');
    },
    close() {
      closing ??= (async () => {
        await pool.end();
        await afterEnd();
      })();
      return closing;
    },
  };
  registerClient(db, () => checkOut(pool, log, where));
  return db;
}
