// `punk credentials reencrypt` run as a child process (needs the cli package built: `tsc -b` builds it after the gateway).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '@punk/lib';
import { CredentialVault, migrateGateway } from '../index.js';
import { adminOf, assertNoSecrets, keyringOf, newKeySpec, newTenant, startVaultWorld, type VaultWorld } from './credentials-harness.js';

const punk = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../cli/dist/main.js');
const planted = ['PLANTED-reencrypt-value-1a2b', 'PLANTED-reencrypt-user-3c4d', 'PLANTED-reencrypt-pass-5e6f', 'PLANTED-orphan-7a8b'];

/** Working directory of the runs: an empty one, so the default data directory (.punk/data) holds no key file. */
let cwd: string;

/** Runs `punk credentials reencrypt …` with only the given PUNK_* settings. */
function reencrypt(env: Record<string, string>, args: string[] = []): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [punk, 'credentials', 'reencrypt', ...args],
      { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        done({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

let world: VaultWorld;
before(async () => {
  world = await startVaultWorld();
  cwd = await mkdtemp(join(tmpdir(), 'punk-reencrypt-cwd-'));
});
after(async () => {
  await world.close();
  await rm(cwd, { recursive: true, force: true });
});

test('punk credentials reencrypt moves a Postgres vault to the new key; the old key can then go', async () => {
  const tenant = newTenant();
  const a = newKeySpec('key-a');
  const b = newKeySpec('key-b');
  const underA = world.vault(keyringOf(a));
  await underA.create(tenant, adminOf(tenant), { id: 'one', data: { value: planted[0]! } });
  await underA.create(tenant, adminOf(tenant), { id: 'two', data: { username: planted[1]!, password: planted[2]! } });

  const missingKey = await reencrypt({ PUNK_DATABASE_URL: world.url });
  assert.equal(missingKey.code, 2);
  assert.match(missingKey.stderr, /needs PUNK_ENCRYPTION_KEY/);

  const first = await reencrypt({ PUNK_DATABASE_URL: world.url, PUNK_ENCRYPTION_KEY: b, PUNK_ENCRYPTION_PREVIOUS_KEYS: a });
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, 're-encrypted 2 credential(s) under key key-b; 0 already under it; 0 failed\n');
  const second = await reencrypt({ PUNK_DATABASE_URL: world.url, PUNK_ENCRYPTION_KEY: b, PUNK_ENCRYPTION_PREVIOUS_KEYS: a });
  assert.equal(second.stdout, 're-encrypted 0 credential(s) under key key-b; 2 already under it; 0 failed\n');

  const onlyB = world.vault(keyringOf(b));
  assert.deepEqual(
    (await onlyB.list(tenant)).map((c) => c.keyId),
    ['key-b', 'key-b'],
  );
  assert.equal((await onlyB.resolveValue(tenant, 'cred:two/password')).value, planted[2]);

  // A record under a key nobody configured is reported by key id, left alone, and fails the command.
  await world.vault(keyringOf(newKeySpec('key-lost'))).create(tenant, adminOf(tenant), { id: 'orphan', data: { value: planted[3]! } });
  const incomplete = await reencrypt({ PUNK_DATABASE_URL: world.url, PUNK_ENCRYPTION_KEY: b });
  assert.equal(incomplete.code, 2);
  assert.match(
    incomplete.stdout,
    /^re-encrypted 0 credential\(s\) under key key-b; 2 already under it; 1 failed\n {2}EncryptionKeyUnknown: credential orphan in tenant \S+ is encrypted under key id key-lost/,
  );
  assert.match(incomplete.stderr, /1 credential\(s\) could not be decrypted and stay as they are/);
  assertNoSecrets([...planted, a.slice(6), b.slice(6)], [missingKey, first, second, incomplete]);
});

test('punk credentials reencrypt works on the embedded database of punk up (--data)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-reencrypt-'));
  try {
    const data = join(dir, 'data');
    const a = newKeySpec('old');
    const b = newKeySpec('new');
    const tenant = newTenant();
    const db = await openDatabase({ dataDir: data, log: world.log });
    try {
      await migrateGateway(db, world.log);
      await new CredentialVault({ db, log: world.log, keyring: keyringOf(a) }).create(tenant, adminOf(tenant), {
        id: 'embedded',
        data: { value: planted[0]! },
      });
    } finally {
      await db.close();
    }
    const nowhere = await reencrypt({ PUNK_ENCRYPTION_KEY: b }, ['--data', join(dir, 'absent')]);
    assert.equal(nowhere.code, 2);
    assert.match(nowhere.stderr, /no embedded database in .*absent: pass --data DIR/);

    // punk up keeps its key in the data directory: it decrypts without PUNK_ENCRYPTION_PREVIOUS_KEYS, and then holds the new key.
    const keyFile = join(data, 'encryption.key');
    await writeFile(keyFile, `${a}\n`, { mode: 0o600 });
    const moved = await reencrypt({ PUNK_ENCRYPTION_KEY: b }, ['--data', data]);
    assert.equal(moved.code, 0, moved.stderr);
    assert.equal(
      moved.stdout,
      `re-encrypted 1 credential(s) under key new; 0 already under it; 0 failed\n${keyFile} now holds the new key: punk up and punk cluster use it without PUNK_ENCRYPTION_KEY\n`,
    );
    assert.equal((await readFile(keyFile, 'utf8')).trim(), b);
    const again = await reencrypt({ PUNK_ENCRYPTION_KEY: b }, ['--data', data]);
    assert.equal(again.stdout, 're-encrypted 0 credential(s) under key new; 1 already under it; 0 failed\n');
    const reopened = await openDatabase({ dataDir: data, log: world.log });
    try {
      const vault = new CredentialVault({ db: reopened, log: world.log, keyring: keyringOf(b) });
      assert.equal((await vault.resolveValue(tenant, 'cred:embedded')).value, planted[0]);
    } finally {
      await reopened.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with PUNK_DATABASE_URL (punk cluster), the key file in the data directory decrypts too and then holds the new key', async () => {
  // Its own database: re-encryption covers every tenant, and the other tests leave records under other keys.
  const cluster = await startVaultWorld();
  const dir = await mkdtemp(join(tmpdir(), 'punk-reencrypt-cluster-'));
  try {
    // `punk cluster` writes a bare key (no key id) to <data>/encryption.key and passes it as PUNK_ENCRYPTION_KEY.
    const a = newKeySpec();
    const b = newKeySpec('rotated');
    const tenant = newTenant();
    await cluster.vault(keyringOf(a)).create(tenant, adminOf(tenant), { id: 'clustered', data: { value: planted[0]! } });
    const keyFile = join(dir, 'encryption.key');
    await writeFile(keyFile, `${a}\n`, { mode: 0o600 });

    const moved = await reencrypt({ PUNK_DATABASE_URL: cluster.url, PUNK_DATA_DIR: dir, PUNK_ENCRYPTION_KEY: b });
    assert.equal(moved.code, 0, moved.stderr);
    assert.equal(
      moved.stdout,
      `re-encrypted 1 credential(s) under key rotated; 0 already under it; 0 failed\n${keyFile} now holds the new key: punk up and punk cluster use it without PUNK_ENCRYPTION_KEY\n`,
    );
    assert.equal((await readFile(keyFile, 'utf8')).trim(), b);
    assert.equal((await cluster.vault(keyringOf(b)).resolveValue(tenant, 'cred:clustered')).value, planted[0]);

    // No key file in the data directory (--data wins over PUNK_DATA_DIR): none is created.
    const empty = join(dir, 'empty');
    const again = await reencrypt({ PUNK_DATABASE_URL: cluster.url, PUNK_DATA_DIR: dir, PUNK_ENCRYPTION_KEY: b }, ['--data', empty]);
    assert.equal(again.stdout, 're-encrypted 0 credential(s) under key rotated; 1 already under it; 0 failed\n');
    await assert.rejects(readFile(join(empty, 'encryption.key')), { code: 'ENOENT' });
    assertNoSecrets([planted[0]!, a, b.slice(8)], [moved, again]);
  } finally {
    await rm(dir, { recursive: true, force: true });
    await cluster.close();
  }
});
