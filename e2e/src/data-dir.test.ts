/**
 * What `punk up` keeps in its data directory: the PGlite database (the ledger, the encrypted credentials, the
 * API keys' hashes) and, beside it, the servers' working directories. Only their owner may read them, running
 * and stopped; API keys made through the API are still there after a restart, and so is a manifest server's last
 * test (until its manifest changes).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmod, copyFile, lstat, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, listAllTools } from './clients.js';
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

  test("a manifest server's last test is still its last test after a restart, and is forgotten once its manifest changes", async () => {
    const tally = (extraEnv: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: tally }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/fixtures/tally.mjs'))}]
  env:
    - { name: TALLY_FILE, value: ${JSON.stringify(join(dir, 'tally.log'))} }${extraEnv}
`;
    await writeFile(join(dir, 'tally.yaml'), tally(''));
    const server = async () => {
      const answer = await fetch(`${punk!.baseUrl}/api/v1/mcp/servers/tally`);
      assert.equal(answer.status, 200, await answer.clone().text());
      return ((await answer.json()) as { server: { status: string; toolCount: number; testedAt?: string; latencyMs?: number } }).server;
    };
    try {
      punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir] });
      assert.equal((await server()).status, 'unknown', 'never tested');
      const tested = await fetch(`${punk.baseUrl}/api/v1/mcp/servers/tally/test`, { method: 'POST' });
      assert.equal(tested.status, 200, await tested.clone().text());
      assert.equal(((await tested.json()) as { ok: boolean }).ok, true);
      const before = await server();
      assert.equal(before.status, 'ok');
      assert.ok(before.testedAt, 'the test has a time');
      assert.equal(await punk.stop(), 0, punk.output().slice(-2000));

      punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir] });
      const after = await server();
      assert.deepEqual(
        { status: after.status, toolCount: after.toolCount, testedAt: after.testedAt, latencyMs: after.latencyMs },
        { status: 'ok', toolCount: 3, testedAt: before.testedAt, latencyMs: before.latencyMs },
        'the same last test after the restart',
      );
      assert.equal(await punk.stop(), 0, punk.output().slice(-2000));

      // Another definition: the test described the old one.
      await writeFile(join(dir, 'tally.yaml'), tally('\n    - { name: MODE, value: changed }'));
      punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir] });
      const changed = await server();
      assert.equal(changed.status, 'unknown', 'the changed server was not tested');
      assert.equal(changed.testedAt, undefined);
    } finally {
      await punk?.stop();
      punk = undefined;
      await rm(join(dir, 'tally.yaml'), { force: true });
    }
  });

  test('a directory that holds other files and no Punk database is refused, and nothing in it is touched', async () => {
    const foreign = join(dir, 'not-a-data-dir');
    await mkdir(join(foreign, 'sub'), { recursive: true });
    await writeFile(join(foreign, 'notes.txt'), 'mine\n');
    await chmod(join(foreign, 'notes.txt'), 0o644);
    await chmod(join(foreign, 'sub'), 0o755);
    await assert.rejects(
      startPunk({ manifestDir: dir, args: ['--data', foreign] }),
      /is not empty and holds no Punk database \(it has "(notes\.txt|sub)", and no PG_VERSION\): pass a new or empty directory/,
    );
    assert.equal((await stat(join(foreign, 'notes.txt'))).mode & 0o777, 0o644, 'notes.txt keeps its mode');
    assert.equal((await stat(join(foreign, 'sub'))).mode & 0o777, 0o755, 'sub/ keeps its mode');
    assert.deepEqual((await readdir(foreign)).sort(), ['notes.txt', 'sub'], 'no file was added');
  });

  test('--ephemeral with --data is refused before anything starts, and the directory is not made', async () => {
    const unused = join(dir, 'never-made');
    await assert.rejects(
      startPunk({ manifestDir: dir, args: ['--ephemeral', '--data', unused] }),
      /exited with 2 before it was ready:\npunk: --ephemeral keeps nothing, so it takes no --data \(got --data .*never-made\): pass one of them/,
    );
    await assert.rejects(stat(unused), { code: 'ENOENT' });
  });

  test('an API key made through the API survives a restart, a revoked one stays revoked, and the admin needs no bootstrap key after', async () => {
    const bootstrap = randomBytes(24).toString('base64url');
    const auth = { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'https://punk.example.test' };
    punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir], env: { ...auth, PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: bootstrap } });
    const first = punk.baseUrl;
    const create = async (name: string, scopes: string[]) => {
      const created = await fetch(`${first}/api/v1/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bootstrap}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name, scopes }),
      });
      assert.equal(created.status, 201, await created.clone().text());
      return (await created.json()) as { key: string; id: string };
    };
    const admin = await create('admin laptop', ['punk:admin']);
    const client = await create('client laptop', []);
    const revoked = await create('lost laptop', []);
    const revoke = await fetch(`${punk.baseUrl}/api/v1/api-keys/${revoked.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${bootstrap}` },
    });
    assert.equal(revoke.status, 204);
    assert.equal(await punk.stop(), 0, punk.output().slice(-2000));

    // As the README advises once there is an admin key: the bootstrap key unset.
    punk = await startPunk({ manifestDir: dir, args: ['--data', dataDir], env: { ...auth, PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: '' } });
    const listed = await fetch(`${punk.baseUrl}/api/v1/api-keys`, { headers: { authorization: `Bearer ${admin.key}` } });
    assert.equal(listed.status, 200, await listed.clone().text());
    const { apiKeys } = (await listed.json()) as { apiKeys: Array<{ id: string; name: string }> };
    assert.deepEqual(
      apiKeys.map((k) => k.name),
      ['admin laptop', 'client laptop'],
      'the keys made before the restart, without the revoked one',
    );
    const mcp = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { Authorization: `Bearer ${client.key}` });
    try {
      assert.ok((await listAllTools(mcp)).some((t) => t.name === 'memory__read_graph'));
    } finally {
      await mcp.close();
    }
    await assert.rejects(connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { Authorization: `Bearer ${revoked.key}` }));
    const old = await fetch(`${punk.baseUrl}/api/v1/api-keys`, { headers: { authorization: `Bearer ${bootstrap}` } });
    assert.equal(old.status, 401, 'the bootstrap key, unset, is no key any more');
  });
});
