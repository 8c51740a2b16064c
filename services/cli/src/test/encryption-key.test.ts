import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '@punk/lib';
import { embeddedKeyring, KEY_FILE, localEncryptionKey } from '../encryption-key.js';

test('punk up keeps one credentials key in its data directory, created once with mode 0600', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'punk-key-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const config = loadConfig({});
  const dataDir = join(root, 'data');
  // Two processes starting at once end up with the same key.
  const [a, b] = await Promise.all([embeddedKeyring(config, dataDir), embeddedKeyring(config, dataDir)]);
  assert.deepEqual(a.keyIds(), b.keyIds());
  assert.equal((await stat(join(dataDir, KEY_FILE))).mode & 0o777, 0o600);
  assert.deepEqual((await embeddedKeyring(config, dataDir)).keyIds(), a.keyIds(), 'the next start reads the same key');
  // --ephemeral: a key of its own each time; PUNK_ENCRYPTION_KEY wins over the file.
  assert.notDeepEqual((await embeddedKeyring(config, null)).keyIds(), a.keyIds());
  const configured = loadConfig({ PUNK_ENCRYPTION_KEY: `ops-2026:${Buffer.alloc(32, 7).toString('base64')}` });
  assert.deepEqual((await embeddedKeyring(configured, dataDir)).keyIds(), ['ops-2026']);
});

test('a key file that does not hold a key stops start-up naming the file', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'punk-key-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  await writeFile(join(root, KEY_FILE), 'not a key\n');
  await assert.rejects(embeddedKeyring(loadConfig({}), root), new RegExp(`${KEY_FILE}.*32 bytes`));
  assert.equal(await localEncryptionKey(join(root, KEY_FILE)), 'not a key');
});
