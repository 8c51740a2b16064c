/**
 * The credentials key of `punk up` when `PUNK_ENCRYPTION_KEY` is not set: one machine, one user, so the key is
 * kept next to the data directory (as the database is), created once with mode 0600, and reused at every start.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { errorMessage, PunkError, type PunkConfig } from '@punk/lib';
import { Keyring, parseEncryptionKey } from '@punk/gateway';

/** Name of the key file, in the parent of the data directory (`.punk/encryption.key` by default). */
export const KEY_FILE = 'encryption.key';

/**
 * The key ring of the all-in-one process: `PUNK_ENCRYPTION_KEY` (and `PUNK_ENCRYPTION_PREVIOUS_KEYS`) when set;
 * else the key in `<parent of dataDir>/encryption.key`, created when missing; with no data directory
 * (`--ephemeral`), a random key that lives as long as the process (and its in-memory database).
 * @throws PunkError `InvalidConfig` when the key file cannot be read or written, or does not hold a key.
 */
export async function embeddedKeyring(config: PunkConfig, dataDir: string | null): Promise<Keyring> {
  const configured = Keyring.fromConfig(config);
  if (configured) return configured;
  const fresh = randomBytes(32).toString('base64');
  if (dataDir === null) return new Keyring(parseEncryptionKey(fresh, 'a random key'), []);
  const path = join(dirname(dataDir), KEY_FILE);
  try {
    const stored = (await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? undefined : Promise.reject(error))))?.trim();
    if (stored !== undefined) return new Keyring(parseEncryptionKey(stored, path), []);
    await mkdir(dirname(path), { recursive: true });
    // `wx`: two processes starting at once must not each write a key of their own.
    await writeFile(path, `${fresh}\n`, { mode: 0o600, flag: 'wx' });
    return new Keyring(parseEncryptionKey(fresh, path), []);
  } catch (error) {
    if (error instanceof PunkError) throw error;
    throw new PunkError('InvalidConfig', `the credentials key file ${path} cannot be used: ${errorMessage(error)}; set PUNK_ENCRYPTION_KEY instead`);
  }
}
