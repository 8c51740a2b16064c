/**
 * `punk credentials reencrypt`: after a key rotation (a new `PUNK_ENCRYPTION_KEY`, the old one moved to
 * `PUNK_ENCRYPTION_PREVIOUS_KEYS`), re-encrypts every stored credential under the new key, so the old key can
 * be removed. Runs against `PUNK_DATABASE_URL` (the `punk cluster` database), or the embedded database in
 * `--data` / `PUNK_DATA_DIR` (with `punk up` stopped: it holds that directory). Either way the key file
 * `punk up` and `punk cluster` keep in that data directory (encryption-key.ts), when it exists, is a previous key
 * too, and once every record moved it holds the new key, so they need no variable. Idempotent.
 */
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { PunkError, createLogger, loadConfig, openDatabase } from '@punk/lib';
import { CredentialVault, Keyring, migrateGateway, parseEncryptionKey } from '@punk/gateway';
import { KEY_FILE } from './encryption-key.js';

/** Help of `punk credentials`. */
export const CREDENTIALS_USAGE = `Usage: punk credentials reencrypt [--data DIR]

  Re-encrypts every stored credential under PUNK_ENCRYPTION_KEY, decrypting with
  PUNK_ENCRYPTION_PREVIOUS_KEYS; afterwards the previous keys can be removed.
  Database: PUNK_DATABASE_URL (as \`punk cluster\` uses), else the embedded one
  in --data DIR (default .punk/data, or PUNK_DATA_DIR) while \`punk up\` is
  stopped. Either way, when DIR/encryption.key exists (the key \`punk up\` and
  \`punk cluster\` keep), it also decrypts, and it is replaced by the new key
  once every record moved.
`;

/**
 * Runs `punk credentials <args>` and prints what it did.
 * @throws PunkError `UnknownCommand` / `UnknownOption`, `InvalidConfig` without PUNK_ENCRYPTION_KEY or without an
 *   embedded database in the data directory, `ReencryptIncomplete` when some records could not be decrypted
 *   (each is printed with its key id), database errors.
 */
export async function credentialsCommand(args: string[]): Promise<void> {
  const [subcommand, ...rest] = args;
  if (subcommand === undefined || subcommand === '-h' || subcommand === '--help') {
    process.stdout.write(CREDENTIALS_USAGE);
    return;
  }
  if (subcommand !== 'reencrypt')
    throw new PunkError('UnknownCommand', `unknown command "punk credentials ${subcommand}"; run \`punk credentials --help\``);
  const { values } = parseArgs({
    args: rest,
    options: { data: { type: 'string' }, help: { type: 'boolean', short: 'h', default: false } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(CREDENTIALS_USAGE);
    return;
  }
  const config = loadConfig(process.env, { dataDir: values.data }, { dataDir: '--data' });
  if (config.encryptionKey === undefined) {
    throw new PunkError(
      'InvalidConfig',
      'punk credentials reencrypt needs PUNK_ENCRYPTION_KEY (the new key) and PUNK_ENCRYPTION_PREVIOUS_KEYS (the keys the records are under now)',
    );
  }
  // Progress lines of the migration and the vault only with an explicit PUNK_LOG_LEVEL: the summary below says it all.
  const log = createLogger('punk', process.env.PUNK_LOG_LEVEL ? config.logLevel : 'warn');
  const dataPath = resolve(config.dataDir);
  const dataDir = config.databaseUrl === undefined ? dataPath : null;
  if (
    dataDir !== null &&
    !(await stat(dataDir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  ) {
    throw new PunkError(
      'InvalidConfig',
      `no embedded database in ${dataDir}: pass --data DIR (the directory \`punk up\` uses) or set PUNK_DATABASE_URL`,
    );
  }
  // The key file `punk up` and `punk cluster` keep in the data directory, whichever database holds the records
  // (`punk cluster` uses PUNK_DATABASE_URL with it): a previous key, when it exists.
  const keyPath = join(dataPath, KEY_FILE);
  const keyFileKey = (await readFile(keyPath, 'utf8').catch(() => undefined))?.trim();
  const keyFile = keyFileKey === undefined ? undefined : { path: keyPath, key: keyFileKey };
  const keyring = Keyring.fromConfig({
    ...config,
    encryptionPreviousKeys: [...config.encryptionPreviousKeys, ...(keyFile ? [keyFile.key] : [])],
  })!;
  const db = await openDatabase({ ...(config.databaseUrl !== undefined && { url: config.databaseUrl }), dataDir, log });
  try {
    await migrateGateway(db, log);
    const result = await new CredentialVault({ db, log, keyring }).reencryptAll();
    process.stdout.write(
      `re-encrypted ${result.reencrypted} credential(s) under key ${result.keyId}; ${result.alreadyCurrent} already under it; ${result.failed.length} failed\n`,
    );
    for (const failure of result.failed) process.stdout.write(`  ${failure.code}: ${failure.message}\n`);
    if (result.failed.length > 0) {
      throw new PunkError(
        'ReencryptIncomplete',
        `${result.failed.length} credential(s) could not be decrypted and stay as they are (listed above)`,
      );
    }
    if (keyFile && parseEncryptionKey(keyFile.key, keyFile.path).id !== result.keyId) {
      await writeFile(keyFile.path, `${config.encryptionKey}\n`, { mode: 0o600 });
      process.stdout.write(`${keyFile.path} now holds the new key: punk up and punk cluster use it without PUNK_ENCRYPTION_KEY\n`);
    }
  } finally {
    await db.close();
  }
}
