/**
 * The credentials key of `punk up` and `punk cluster` when `PUNK_ENCRYPTION_KEY` is not set: one machine, one
 * user, so the key is kept with the database (in the data directory), created once with mode 0600, and reused
 * at every start.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { errorMessage, OWNER_ONLY_DIRECTORY_MODE, PunkError, type PunkConfig } from '@punk/lib';
import { Keyring, parseEncryptionKey } from '@punk/gateway';

/** Name of the key file, in the data directory (`.punk/data/encryption.key` by default). */
export const KEY_FILE = 'encryption.key';

/**
 * The key ring of the all-in-one process: `PUNK_ENCRYPTION_KEY` (and `PUNK_ENCRYPTION_PREVIOUS_KEYS`) when set;
 * else the key in `<dataDir>/encryption.key` ({@link localEncryptionKey}); with no data directory
 * (`--ephemeral`), a random key that lives as long as the process (and its temporary database).
 * @throws PunkError `InvalidConfig` when the key file cannot be read or written, or does not hold a key.
 */
export async function embeddedKeyring(config: PunkConfig, dataDir: string | null): Promise<Keyring> {
  const configured = Keyring.fromConfig(config);
  if (configured) return configured;
  if (dataDir === null) return new Keyring(parseEncryptionKey(randomBytes(32).toString('base64'), 'a random key'), []);
  const path = join(dataDir, KEY_FILE);
  return new Keyring(parseEncryptionKey(await localEncryptionKey(path), path), []);
}

/**
 * The key in the file `path` (base64 of 32 bytes), created with a fresh random key when missing.
 * @throws PunkError `InvalidConfig` when the file cannot be read or written.
 */
export async function localEncryptionKey(path: string): Promise<string> {
  try {
    const stored = (
      await readFile(path, 'utf8').catch((error: unknown) =>
        (error as NodeJS.ErrnoException).code === 'ENOENT' ? undefined : Promise.reject(error as Error),
      )
    )?.trim();
    if (stored !== undefined) return stored;
    const fresh = randomBytes(32).toString('base64');
    await mkdir(dirname(path), { recursive: true, mode: OWNER_ONLY_DIRECTORY_MODE });
    // `wx`: two processes starting at once must not each write a key of their own; the loser reads the winner's.
    await writeFile(path, `${fresh}\n`, { mode: 0o600, flag: 'wx' }).catch((error: unknown) =>
      (error as NodeJS.ErrnoException).code === 'EEXIST' ? undefined : Promise.reject(error as Error),
    );
    return (await readFile(path, 'utf8')).trim();
  } catch (error) {
    throw new PunkError(
      'InvalidConfig',
      `the credentials key file ${path} cannot be used: ${errorMessage(error)}; set PUNK_ENCRYPTION_KEY instead`,
    );
  }
}
