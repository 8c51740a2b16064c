/**
 * What `punk up` keeps in its data directory: the PGlite database (the ledger, the encrypted credentials, the
 * API keys' hashes) and, beside it, the servers' working directories. Only their owner may read them, running
 * and stopped.
 */
import assert from 'node:assert/strict';
import { copyFile, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

/** Every path under `root` (itself included) whose mode is not 0700 for a directory or 0600 for a file, as `<mode> <path>`. */
async function notOwnerOnly(root: string, options: { directoriesOnly?: boolean } = {}): Promise<string[]> {
  const loose: string[] = [];
  const visit = async (path: string) => {
    const stats = await lstat(path);
    const mode = stats.mode & 0o7777;
    if (stats.isDirectory()) {
      if (mode !== 0o700) loose.push(`${mode.toString(8)} ${path}/`);
      for (const name of await readdir(path)) await visit(join(path, name));
    } else if (stats.isFile() && !options.directoriesOnly && mode !== 0o600) {
      loose.push(`${mode.toString(8)} ${path}`);
    }
  };
  await visit(root);
  return loose;
}

describe('punk up on a data directory', () => {
  let dir: string;
  let dataDir: string;
  let punk: RunningPunk | undefined;

  before(async () => {
    dir = await manifestDir('data-dir', {});
    await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
    dataDir = join(dir, '.punk/data');
  });
  after(async () => {
    await punk?.stop();
    await removeDir(dir);
  });

  test('the database files are 0600 and every directory 0700 (servers working directories too), while it runs and once it stopped', async () => {
    punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir] });
    assert.match(punk.output(), /servers: memory\b/, 'the memory server started (its working directory exists)');
    assert.deepEqual(await notOwnerOnly(dataDir), [], 'data directory while punk up runs');
    // The servers' own files are theirs to make; the directories holding them are owner-only.
    assert.deepEqual(await notOwnerOnly(join(dir, '.punk/servers'), { directoriesOnly: true }), [], 'servers working directories');
    assert.equal(await punk.stop(), 0, punk.output().slice(-2000));
    punk = undefined;
    assert.deepEqual(await notOwnerOnly(dataDir), [], 'data directory once punk up stopped');
  });
});
