/**
 * Owner-only file modes for what Punk keeps on disk (the PGlite data directory, the servers' working
 * directories): directories 0700, files 0600. PGlite writes the files of its initial database with mode 0666
 * whatever the process umask, so the modes are set after it writes, not only through the umask.
 */
import { chmod, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Mode of a directory only its owner may read, write or enter. */
export const OWNER_ONLY_DIRECTORY_MODE = 0o700;
/** Mode of a file only its owner may read or write. */
export const OWNER_ONLY_FILE_MODE = 0o600;

/**
 * Makes `directory` and everything in it owner-only: each directory 0700, each regular file 0600 (an
 * executable file keeps its owner's execute bit: 0700). Symbolic links are not followed. Entries that vanish
 * while it runs (a database removing a temporary file) are skipped.
 * @throws the file system's error when a mode cannot be set (not the owner, a read-only file system).
 */
export async function makeOwnerOnly(directory: string): Promise<void> {
  const stats = await lstat(directory).catch(ignoreMissing);
  if (!stats?.isDirectory()) return;
  if ((stats.mode & 0o7777) !== OWNER_ONLY_DIRECTORY_MODE) await chmod(directory, OWNER_ONLY_DIRECTORY_MODE).catch(ignoreMissing);
  const entries = await readdir(directory, { withFileTypes: true }).catch(ignoreMissing);
  for (const entry of entries ?? []) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      await makeOwnerOnly(path);
    } else if (entry.isFile()) {
      const mode = (await lstat(path).catch(ignoreMissing))?.mode;
      if (mode === undefined) continue;
      const wanted = OWNER_ONLY_FILE_MODE | (mode & 0o100);
      if ((mode & 0o7777) !== wanted) await chmod(path, wanted).catch(ignoreMissing);
    }
  }
}

/** Undefined for ENOENT (the entry went away), the error otherwise. */
function ignoreMissing(error: NodeJS.ErrnoException): undefined {
  if (error.code === 'ENOENT') return undefined;
  throw error;
}
