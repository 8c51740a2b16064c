/**
 * What the credentials tests share: a migrated scratch database, a MemoryBus whose ledger stream they read, a
 * logger whose lines they keep, vaults over separate pools (as separate replicas would have), and the search of
 * every output for planted secrets.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { MemoryBus, openDatabase, streams, type Database, type LedgerEvent, type Logger, type Principal } from '@punk/lib';
import { createScratchDatabase } from '../../../lib/dist/test/pgtest.js';
import { CredentialVault, Keyring, migrateGateway, parseEncryptionKey, type CredentialVaultOptions } from '../index.js';

/** A fresh random key as `PUNK_ENCRYPTION_KEY` spells it, with an explicit key id when given. */
export function newKeySpec(keyId?: string): string {
  const key = randomBytes(32).toString('base64');
  return keyId === undefined ? key : `${keyId}:${key}`;
}

/** A keyring of a current key spec and previous ones. */
export function keyringOf(current: string, ...previous: string[]): Keyring {
  return new Keyring(
    parseEncryptionKey(current, 'PUNK_ENCRYPTION_KEY'),
    previous.map((spec) => parseEncryptionKey(spec, 'PUNK_ENCRYPTION_PREVIOUS_KEYS')),
  );
}

/** A unique tenant name for one test. */
export function newTenant(): string {
  return `t-${randomBytes(4).toString('hex')}`;
}

/** The admin principal of a tenant. */
export function adminOf(tenant: string): Principal {
  return { subject: 'alice@example.com', tenant, groups: ['admins'], scopes: ['punk:admin'] };
}

/** A migrated scratch database and everything a vault writes to. */
export interface VaultWorld {
  /** URL of the scratch database (for child processes). */
  url: string;
  db: Database;
  bus: MemoryBus;
  /** Ledger events appended so far. */
  events: LedgerEvent[];
  /** Log lines written by every vault of this world, as JSON text. */
  logs: string[];
  log: Logger;
  /** A vault on this world's database, bus and logger; `db` to give it its own pool. */
  vault(keyring: Keyring | undefined, options?: Partial<CredentialVaultOptions>): CredentialVault;
  /** Another pool on the same database, closed with the world. */
  openPool(): Promise<Database>;
  close(): Promise<void>;
}

/** Creates a scratch database, migrates the gateway schema, and starts a MemoryBus with the ledger stream. */
export async function startVaultWorld(): Promise<VaultWorld> {
  const scratch = await createScratchDatabase();
  const logs: string[] = [];
  const log = pino(
    { level: 'trace', base: { component: 'credentials-test' } },
    new Writable({
      write(chunk, _encoding, done) {
        logs.push(String(chunk));
        done();
      },
    }),
  );
  const pools: Database[] = [];
  const openPool = async () => {
    const db = await openDatabase({ url: scratch.url, log });
    pools.push(db);
    return db;
  };
  const db = await openPool();
  await migrateGateway(db, log);
  const bus = new MemoryBus(log);
  await bus.ensureStream(streams.ledger);
  const events: LedgerEvent[] = [];
  const consumer = await bus.consume(streams.ledger.name, 'credentials-test', async (batch) => {
    for (const message of batch) events.push(message.data as LedgerEvent);
  });
  return {
    url: scratch.url,
    db,
    bus,
    events,
    logs,
    log,
    vault: (keyring, options = {}) => new CredentialVault({ db, log, keyring, bus, ...options }),
    openPool,
    async close() {
      await consumer.stop();
      await bus.close();
      for (const pool of pools) await pool.close();
      await scratch.drop();
    },
  };
}

/** Runs `fn`, which must throw a PunkError with `code`; returns the error. */
export async function rejection(
  fn: () => Promise<unknown>,
  code: string,
): Promise<Error & { code: string; details?: Record<string, unknown> }> {
  try {
    await fn();
  } catch (error) {
    assert.equal((error as { code?: unknown }).code, code, `expected ${code}, got: ${String(error)}`);
    return error as Error & { code: string };
  }
  assert.fail(`expected a ${code} error, but it resolved`);
}

/**
 * Asserts that no secret appears in any output: error messages and details, API answers, ledger events, log
 * lines (each serialised as JSON, and errors also by message).
 */
export function assertNoSecrets(secrets: readonly string[], outputs: readonly unknown[]): void {
  const texts = outputs.map((output) =>
    output instanceof Error
      ? `${output.message} ${JSON.stringify(output)} ${JSON.stringify((output as { details?: unknown }).details ?? null)}`
      : typeof output === 'string'
        ? output
        : JSON.stringify(output),
  );
  secrets.forEach((secret, index) => {
    assert.ok(secret.length >= 8, 'a planted secret is long enough to be recognised');
    // The failure message shows where, with the secret itself masked.
    for (const text of texts)
      assert.ok(!text.includes(secret), `secret #${index} leaked into: ${text.split(secret).join('<secret>').slice(0, 300)}`);
  });
}
