import { open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PunkError, errorMessage } from '../errors.js';

/** Name of the lock file inside a PGlite data directory. */
export const LOCK_FILE = 'punk.lock';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the data directory for this process: PGlite is one Postgres session
 * in one process, and two processes writing the same directory would fork the
 * ledger silently. A lock left by a process that no longer runs is taken over.
 *
 * @returns a function that releases the lock.
 * @throws PunkError `DatabaseLocked` naming the directory and the pid that holds it.
 */
export async function lockDataDirectory(directory: string): Promise<() => Promise<void>> {
  const path = join(directory, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      return async () => {
        await rm(path, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new PunkError('DatabaseUnavailable', `cannot lock data directory ${directory}: ${errorMessage(error)}`, undefined, {
          cause: error,
        });
      }
      const holder = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(holder) && holder > 0 && holder !== process.pid && alive(holder)) {
        throw new PunkError(
          'DatabaseLocked',
          `data directory ${directory} is in use by another Punk process (pid ${holder}); stop it, or start this one with --data DIR or --ephemeral`,
          { directory, pid: holder },
        );
      }
      await rm(path, { force: true });
    }
  }
  throw new PunkError('DatabaseLocked', `data directory ${directory} is being locked by another process; try again`, { directory });
}
