import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  adminOf,
  assertNoSecrets,
  keyringOf,
  newKeySpec,
  newTenant,
  rejection,
  startVaultWorld,
  type VaultWorld,
} from './credentials-harness.js';

let world: VaultWorld;
before(async () => {
  world = await startVaultWorld();
});
after(() => world.close());

/** Recognisable secret values planted in credentials; none may appear in any output. */
const planted = {
  api: 'PLANTED-api-key-7f3a9c1e',
  user: 'PLANTED-username-0b1d',
  password: 'PLANTED-password-c4e8a2',
  access: 'PLANTED-access-token-9d77',
};
const outputs: unknown[] = [];
/** Runs an operation that must fail with `code`, keeping the error for the leak search. */
const failing = async (fn: () => Promise<unknown>, code: string) => {
  const error = await rejection(fn, code);
  outputs.push(error);
  return error;
};

test('an admin stores, lists, reads and deletes credentials; answers and events carry key names, never values', async () => {
  const tenant = newTenant();
  const admin = adminOf(tenant);
  const vault = world.vault(keyringOf(newKeySpec('k1')));
  const created = await vault.create(tenant, admin, { id: 'github', data: { value: planted.api } });
  outputs.push(created);
  assert.equal(created.id, 'github');
  assert.equal(created.tenant, tenant);
  assert.equal(created.type, 'static');
  assert.deepEqual(created.keys, ['value']);
  assert.equal(created.keyId, 'k1');
  assert.equal(created.createdBy, 'alice@example.com');
  assert.ok(Date.parse(created.createdAt) > 0);
  const basic = await vault.create(tenant, admin, {
    id: 'db-login',
    type: 'static',
    data: { username: planted.user, password: planted.password },
  });
  const bearer = await vault.create(tenant, admin, {
    id: 'static-bearer',
    type: 'oauth2',
    data: { access_token: planted.access, expires_at: 4102444800000 },
  });
  assert.equal(bearer.type, 'oauth2');
  assert.equal(bearer.expiresAt, '2100-01-01T00:00:00.000Z');
  assert.deepEqual(basic.keys, ['password', 'username']);

  const listed = await vault.list(tenant);
  outputs.push(listed, await vault.get(tenant, 'db-login'));
  assert.deepEqual(
    listed.map((c) => c.id),
    ['db-login', 'github', 'static-bearer'],
  );
  assert.deepEqual(await vault.get(tenant, 'github'), created);

  // The stored row is ciphertext.
  const stored = await world.db.query<{ ciphertext: Buffer }>('SELECT ciphertext FROM gateway.credentials WHERE tenant = $1', [tenant]);
  for (const row of stored.rows) for (const secret of Object.values(planted)) assert.ok(!row.ciphertext.includes(Buffer.from(secret)));

  await failing(() => vault.create(tenant, admin, { id: 'github', data: { value: 'PLANTED-another-1234' } }), 'CredentialExists');
  await vault.delete(tenant, admin, 'github');
  const gone = await failing(() => vault.get(tenant, 'github'), 'CredentialNotFound');
  assert.equal(gone.message, `credential github not found in tenant ${tenant}`);
  await failing(() => vault.delete(tenant, admin, 'github'), 'CredentialNotFound');
  // An id that cannot be a credential id (a NUL, which Postgres refuses) is unknown, not a database error.
  const nul = await failing(() => vault.delete(tenant, admin, 'x\0y'), 'CredentialNotFound');
  assert.equal(nul.message, `credential x\0y not found in tenant ${tenant}`);
  await failing(() => vault.get(tenant, '\0'), 'CredentialNotFound');

  const mine = world.events.filter((e) => e.tenant === tenant);
  assert.deepEqual(
    mine.map((e) => e.type),
    ['credential.created', 'credential.created', 'credential.created', 'credential.deleted'],
  );
  assert.deepEqual(mine[1]!.data, { id: 'db-login', type: 'static', keys: ['password', 'username'] });
  assert.equal(mine[0]!.principal?.subject, 'alice@example.com');
  assert.equal(mine[3]!.runId, 'credential.github');
  outputs.push(...mine);
});

test('validation names the field and never echoes a value', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyringOf(newKeySpec()));
  const cases: Array<[unknown, RegExp]> = [
    ['PLANTED-body-as-string', /^\(body\): must be a JSON object/],
    [{ id: 'x', data: { value: 'PLANTED-v1-abcdef' }, secret: 'PLANTED-unknown-field' }, /^secret: unknown field/],
    [{ id: 'Not_A_Label', data: { value: 'PLANTED-v2-abcdef' } }, /^id: must be a DNS label/],
    [{ id: 'a'.repeat(64), data: { value: 'PLANTED-v3-abcdef' } }, /^id: must be a DNS label/],
    [{ id: 'x', type: 'PLANTED-type-abcdef', data: { value: 'PLANTED-v4-abcdef' } }, /^type: must be "static" or "oauth2"/],
    [{ id: 'x' }, /^data: must be an object/],
    [{ id: 'x', data: {} }, /^data: must hold at least one key/],
    [{ id: 'x', data: { value: 42 } }, /^data\.value: must be a non-empty string/],
    [{ id: 'x', data: { value: '' } }, /^data\.value: must be a non-empty string/],
    [{ id: 'x', data: { value: 'PLANTED-nul-abc\0def' } }, /^data\.value: must not contain a NUL character/],
    [{ id: 'x', type: 'oauth2', data: { access_token: 'PLANTED-at-abc\0def' } }, /^data\.access_token: must not contain a NUL character/],
    [{ id: 'x', data: { 'bad key': 'PLANTED-v5-abcdef' } }, /^data: key names must be/],
    [{ id: 'x', data: { refresh_token: 'PLANTED-rt-abcdef' } }, /^data\.token_url: is required with data\.refresh_token/],
    [{ id: 'x', type: 'oauth2', data: { client_id: 'c' } }, /^data\.access_token: is required unless/],
    [
      { id: 'x', type: 'oauth2', data: { access_token: 'PLANTED-at-abcdef', api_key: 'PLANTED-v6-abcdef' } },
      /^data\.api_key: is not a key of an oauth2 credential/,
    ],
    [
      { id: 'x', type: 'oauth2', data: { access_token: 'PLANTED-at-abcdef', expires_at: 'PLANTED-soon' } },
      /^data\.expires_at: must be the expiry time in epoch milliseconds/,
    ],
    [
      { id: 'x', data: { refresh_token: 'PLANTED-rt-abcdef', token_url: 'ftp://issuer.example/token' } },
      /^data\.token_url: must be an http or https URL/,
    ],
    [
      { id: 'x', data: { refresh_token: 'PLANTED-rt-abcdef', token_url: 'https://me:PLANTED-pw-abcdef@issuer.example/token' } },
      /^data\.token_url: must not carry user info/,
    ],
    [
      {
        id: 'x',
        data: { refresh_token: 'PLANTED-rt-abcdef', token_url: 'https://issuer.example/token', client_secret: 'PLANTED-cs-abcdef' },
      },
      /^data\.client_id: is required with data\.client_secret/,
    ],
  ];
  for (const [body, message] of cases) {
    const error = await failing(() => vault.create(tenant, adminOf(tenant), body), 'InvalidCredential');
    assert.match(error.message, message);
    assert.ok(!/PLANTED/.test(error.message) && !/PLANTED/.test(JSON.stringify(error.details)), `no value in: ${error.message}`);
  }
  assert.deepEqual(await vault.list(tenant), [], 'nothing was stored');
  // type defaults to oauth2 when the data holds a refresh_token or a token_url.
  const inferred = await vault.create(tenant, adminOf(tenant), {
    id: 'inferred',
    data: { refresh_token: 'PLANTED-rt-abcdef', token_url: 'https://issuer.example/token' },
  });
  assert.equal(inferred.type, 'oauth2');
});

test('a value no HTTP header can carry is refused when it is stored, naming the key and the character, never the value', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyringOf(newKeySpec()));
  const cases: Array<[Record<string, string>, string]> = [
    // The README's own example, copied as it is.
    [
      { value: 'Bearer ghp_…' },
      'data.value: holds U+2026 at character 12, a character no HTTP header can carry (RFC 9110 §5.5: visible ASCII, spaces, tabs and Latin-1 letters); "…" marks a placeholder in examples: put the real value there',
    ],
    [
      { token: 'PLANTED-pasted-abcdef\n' },
      'data.token: ends with a line break, which no HTTP header can carry (pasted with the newline of a file?): remove it',
    ],
    [
      { value: 'PLANTED-bell\u0007-abcdef' },
      'data.value: holds the control character U+0007 at character 13, which no HTTP header can carry: remove it',
    ],
    [
      { value: 'PLANTED-\u{1F511}-key' },
      'data.value: holds U+1F511 at character 9, a character no HTTP header can carry (RFC 9110 §5.5: visible ASCII, spaces, tabs and Latin-1 letters)',
    ],
  ];
  for (const [data, message] of cases) {
    const error = await failing(() => vault.create(tenant, adminOf(tenant), { id: 'gh', data }), 'InvalidCredential');
    assert.equal(error.message, message);
    assert.ok(!/PLANTED/.test(error.message), 'no value in the message');
  }
  const oauth = await failing(
    () => vault.create(tenant, adminOf(tenant), { id: 'gh', type: 'oauth2', data: { access_token: 'gho_…' } }),
    'InvalidCredential',
  );
  assert.match(oauth.message, /^data\.access_token: holds U\+2026 at character 5/);
  assert.deepEqual(await vault.list(tenant), [], 'nothing was stored');
  // Accepted: tabs and Latin-1 letters on one line; a PEM key of several lines (for env), with its final newline.
  await vault.create(tenant, adminOf(tenant), { id: 'latin', data: { value: 'caf\u00e9\tbar' } });
  await vault.create(tenant, adminOf(tenant), { id: 'pem', data: { value: '-----BEGIN KEY-----\nab\u2026c\n-----END KEY-----\n' } });
});

test('a credential is replaced in place: every reader sees the old value or the new one, never none', async () => {
  const tenant = newTenant();
  const admin = adminOf(tenant);
  const vault = world.vault(keyringOf(newKeySpec()));
  await vault.create(tenant, admin, { id: 'rotated', data: { value: 'PLANTED-rotation-0' } });
  // Readers resolve the reference without pause while the value is rotated 20 times.
  const rotation = { running: true };
  const seen = new Set<string>();
  const reader = (async () => {
    while (rotation.running) seen.add((await vault.resolveValue(tenant, 'cred:rotated')).value);
  })();
  for (let i = 1; i <= 20; i++) {
    const replaced = await vault.replace(tenant, admin, 'rotated', { data: { value: `PLANTED-rotation-${String(i)}` } });
    outputs.push(replaced);
    assert.equal(replaced.id, 'rotated');
    assert.equal(replaced.createdBy, 'alice@example.com');
  }
  rotation.running = false;
  await reader;
  assert.ok(
    [...seen].every((v) => /^PLANTED-rotation-\d+$/.test(v)),
    'every read found a value',
  );
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:rotated'), { value: 'PLANTED-rotation-20' });
  // Keys and type change with the body; `id`, when given, must be the path's.
  const typed = await vault.replace(tenant, admin, 'rotated', { id: 'rotated', type: 'oauth2', data: { access_token: planted.access } });
  assert.equal(typed.type, 'oauth2');
  assert.deepEqual(typed.keys, ['access_token']);
  const renamed = await failing(() => vault.replace(tenant, admin, 'rotated', { id: 'other', data: { value: 'x' } }), 'InvalidCredential');
  assert.equal(renamed.message, 'id: must be "rotated", the credential named in the path (a credential cannot be renamed)');
  const bad = await failing(() => vault.replace(tenant, admin, 'rotated', { data: { value: 'Bearer ghp_…' } }), 'InvalidCredential');
  assert.match(bad.message, /^data\.value: holds U\+2026/);
  const missing = await failing(() => vault.replace(tenant, admin, 'absent', { data: { value: 'x' } }), 'CredentialNotFound');
  assert.equal(missing.message, `credential absent not found in tenant ${tenant}; create it with POST /api/v1/credentials`);
  // One applied from a Kubernetes Secret belongs to the operator.
  await vault.apply(tenant, admin, { id: 'from-secret', data: { value: 'x' } }, 'sha256:abc');
  const managed = await failing(() => vault.replace(tenant, admin, 'from-secret', { data: { value: 'y' } }), 'CredentialManaged');
  assert.match(
    managed.message,
    /is applied from a Kubernetes Secret by the operator \(McpCredential from-secret\); change the Secret instead/,
  );
  const replacedEvents = world.events.filter((e) => e.tenant === tenant && e.type === 'credential.replaced');
  assert.equal(replacedEvents.length, 21);
  assert.deepEqual(replacedEvents[0]?.data, { id: 'rotated', type: 'static', keys: ['value'], source: 'api' });
  outputs.push(...replacedEvents);
});

test("another tenant's credential is indistinguishable from a missing one", async () => {
  const owner = newTenant();
  const intruder = newTenant();
  const vault = world.vault(keyringOf(newKeySpec()));
  await vault.create(owner, adminOf(owner), { id: 'shared-name', data: { value: planted.api } });
  const existing = await failing(() => vault.resolveValue(intruder, 'cred:shared-name'), 'CredentialNotFound');
  const missing = await failing(() => vault.resolveValue(intruder, 'cred:never-created'), 'CredentialNotFound');
  assert.equal(existing.message, `credential shared-name not found in tenant ${intruder}`);
  assert.equal(missing.message, `credential never-created not found in tenant ${intruder}`);
  assert.deepEqual(Object.keys(existing.details!), Object.keys(missing.details!));
  for (const op of [
    () => vault.get(intruder, 'shared-name'),
    () => vault.delete(intruder, adminOf(intruder), 'shared-name'),
    () => vault.renewAfterUnauthorized(intruder, 'shared-name', 'Bearer x'),
  ]) {
    const error = await failing(op, 'CredentialNotFound');
    assert.equal(error.message, `credential shared-name not found in tenant ${intruder}`);
  }
  assert.deepEqual(await vault.list(intruder), []);
  // The owner still has it.
  assert.equal((await vault.resolveValue(owner, 'cred:shared-name')).value, planted.api);
  // The intruder may create its own of that name: ids are per tenant.
  await vault.create(intruder, adminOf(intruder), { id: 'shared-name', data: { value: 'PLANTED-intruder-own' } });
  assert.equal((await vault.resolveValue(intruder, 'cred:shared-name')).value, 'PLANTED-intruder-own');
  assert.equal((await vault.resolveValue(owner, 'cred:shared-name')).value, planted.api);
});

test('cred: references resolve to the named key, the value key, or the only key; literals pass through', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyringOf(newKeySpec()));
  const admin = adminOf(tenant);
  await vault.create(tenant, admin, { id: 'only', data: { token: planted.api } });
  await vault.create(tenant, admin, { id: 'with-value', data: { value: planted.password, user: planted.user } });
  await vault.create(tenant, admin, { id: 'pair', data: { username: planted.user, password: planted.password } });
  await vault.create(tenant, admin, { id: 'bearer', type: 'oauth2', data: { access_token: planted.access } });
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:only'), { value: planted.api });
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:with-value'), { value: planted.password });
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:with-value/user'), { value: planted.user });
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:pair/password'), { value: planted.password });
  // An oauth2 credential without expiry or refresh token is a bearer value as it is.
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:bearer'), { value: `Bearer ${planted.access}`, oauth2: 'bearer' });
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:bearer/access_token'), { value: planted.access });
  assert.deepEqual(await vault.resolveValue(tenant, 'plain literal'), { value: 'plain literal' });
  assert.deepEqual(
    await vault.resolveValue(tenant, 'Bearer cred:only'),
    { value: 'Bearer cred:only' },
    'only a whole value is a reference',
  );

  const ambiguous = await failing(() => vault.resolveValue(tenant, 'cred:pair'), 'CredentialKeyAmbiguous');
  assert.match(
    ambiguous.message,
    /credential pair in tenant \S+ has several keys \(password, username\) and none named value: reference one as cred:pair\/<key>/,
  );
  const noKey = await failing(() => vault.resolveValue(tenant, 'cred:pair/token'), 'CredentialKeyNotFound');
  assert.match(noKey.message, /has no key token \(its keys: password, username\)/);
  for (const bad of ['cred:', 'cred:Upper', 'cred:pair/', 'cred:pair/a/b'])
    await failing(() => vault.resolveValue(tenant, bad), 'InvalidCredentialReference');
  await failing(() => vault.renewAfterUnauthorized(tenant, 'only', `Bearer ${planted.api}`), 'CredentialNotRefreshable');
  const cannot = await failing(() => vault.renewAfterUnauthorized(tenant, 'bearer', `Bearer ${planted.access}`), 'CredentialRefreshFailed');
  assert.match(cannot.message, /cannot be refreshed \(it has no refresh_token and token_url\)/);
});

test('a record copied to another tenant or id does not decrypt (the AAD binds it)', async () => {
  const tenant = newTenant();
  const other = newTenant();
  const vault = world.vault(keyringOf(newKeySpec()));
  await vault.create(tenant, adminOf(tenant), { id: 'source', data: { value: planted.api } });
  await world.db.query(
    `INSERT INTO gateway.credentials (tenant, id, type, key_names, key_id, iv, ciphertext, tag, created_by)
     SELECT tenant, 'copied', type, key_names, key_id, iv, ciphertext, tag, created_by FROM gateway.credentials WHERE tenant = $1 AND id = 'source'
     UNION ALL
     SELECT $2, 'source', type, key_names, key_id, iv, ciphertext, tag, created_by FROM gateway.credentials WHERE tenant = $1 AND id = 'source'`,
    [tenant, other],
  );
  const copied = await failing(() => vault.resolveValue(tenant, 'cred:copied'), 'DecryptionFailed');
  assert.match(copied.message, new RegExp(`^credential copied in tenant ${tenant} is not decryptable: it failed its integrity check`));
  await failing(() => vault.resolveValue(other, 'cred:source'), 'DecryptionFailed');
  // Altering one byte of the stored ciphertext is detected too.
  await world.db.query(
    `UPDATE gateway.credentials SET ciphertext = set_byte(ciphertext, 0, get_byte(ciphertext, 0) # 1) WHERE tenant = $1 AND id = 'source'`,
    [tenant],
  );
  await failing(() => vault.resolveValue(tenant, 'cred:source'), 'DecryptionFailed');
});

test('without PUNK_ENCRYPTION_KEY the vault is unavailable, and literals still resolve', async () => {
  const tenant = newTenant();
  const vault = world.vault(undefined);
  for (const op of [
    () => vault.create(tenant, adminOf(tenant), { id: 'x', data: { value: planted.api } }),
    () => vault.list(tenant),
    () => vault.get(tenant, 'x'),
    () => vault.resolveValue(tenant, 'cred:x'),
    () => vault.reencryptAll(),
  ]) {
    const error = await failing(op, 'CredentialsUnavailable');
    assert.match(error.message, /needs PUNK_ENCRYPTION_KEY/);
  }
  assert.deepEqual(await vault.resolveValue(tenant, 'literal'), { value: 'literal' });
});

test('key rotation: records under A still decrypt with A previous, re-encryption moves them to B, then A can go', async () => {
  const tenant = newTenant();
  const a = newKeySpec('key-a');
  const b = newKeySpec('key-b');
  const underA = world.vault(keyringOf(a));
  await underA.create(tenant, adminOf(tenant), { id: 'one', data: { value: planted.api } });
  await underA.create(tenant, adminOf(tenant), { id: 'two', data: { username: planted.user, password: planted.password } });

  // Rotated to B without A: the records name their key id and the fix.
  const withoutA = world.vault(keyringOf(b));
  const unknown = await failing(() => withoutA.resolveValue(tenant, 'cred:one'), 'EncryptionKeyUnknown');
  assert.match(
    unknown.message,
    /^credential one in tenant \S+ is encrypted under key id key-a, which is neither PUNK_ENCRYPTION_KEY nor in PUNK_ENCRYPTION_PREVIOUS_KEYS .*add that key to PUNK_ENCRYPTION_PREVIOUS_KEYS/,
  );
  // A wrong key under the right id fails the integrity check instead of decrypting garbage.
  await failing(() => world.vault(keyringOf(newKeySpec('key-a'))).resolveValue(tenant, 'cred:one'), 'DecryptionFailed');

  const rotated = world.vault(keyringOf(b, a));
  assert.equal((await rotated.resolveValue(tenant, 'cred:one')).value, planted.api);
  // New records go under B at once.
  await rotated.create(tenant, adminOf(tenant), { id: 'three', data: { value: 'PLANTED-three-abcdef' } });
  assert.equal((await rotated.get(tenant, 'three')).keyId, 'key-b');

  const result = await rotated.reencryptAll();
  // Other tests' records share the database; those of this tenant are what this test checks.
  assert.equal(result.keyId, 'key-b');
  assert.ok(result.reencrypted >= 2);
  assert.deepEqual(
    (await rotated.list(tenant)).map((c) => c.keyId),
    ['key-b', 'key-b', 'key-b'],
  );
  const again = await rotated.reencryptAll();
  assert.equal(again.reencrypted, 0, 'idempotent');

  // A removed: everything still decrypts under B alone.
  const onlyB = world.vault(keyringOf(b));
  assert.equal((await onlyB.resolveValue(tenant, 'cred:one')).value, planted.api);
  assert.equal((await onlyB.resolveValue(tenant, 'cred:two/password')).value, planted.password);
  outputs.push(result, again);
});

test('no planted value appears in any error, answer, ledger event or log line of these tests', () => {
  const secrets = [...Object.values(planted), 'PLANTED-another-1234', 'PLANTED-three-abcdef'];
  assertNoSecrets(secrets, [...outputs, ...world.events, ...world.logs]);
  assert.ok(world.logs.length > 0 && world.events.length > 0, 'there was output to search');
});
