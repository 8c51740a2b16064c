import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { loadConfig, PunkError } from '@punk/lib';
import { Keyring, parseEncryptionKey } from '../index.js';
import { keyringOf, newKeySpec } from './credentials-harness.js';

const aad = (tenant: string, id: string) => Buffer.from(JSON.stringify([tenant, id]));

test('a key without an id gets the first 16 hex digits of its SHA-256; base64url works too; an explicit id wins', () => {
  const bytes = randomBytes(32);
  const expected = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  assert.equal(parseEncryptionKey(bytes.toString('base64'), 'PUNK_ENCRYPTION_KEY').id, expected);
  assert.equal(parseEncryptionKey(bytes.toString('base64url'), 'PUNK_ENCRYPTION_KEY').id, expected);
  const named = parseEncryptionKey(`2026-11:${bytes.toString('base64')}`, 'PUNK_ENCRYPTION_KEY');
  assert.equal(named.id, '2026-11');
  assert.ok(named.key.equals(bytes));
});

test('a malformed key is refused naming the variable, never the value', () => {
  const short = randomBytes(16).toString('base64');
  for (const bad of [short, `bad id!:${randomBytes(32).toString('base64')}`, 'not base64 at all']) {
    try {
      parseEncryptionKey(bad, 'PUNK_ENCRYPTION_PREVIOUS_KEYS');
      assert.fail('accepted a malformed key');
    } catch (e) {
      assert.ok(e instanceof PunkError);
      assert.equal(e.code, 'InvalidConfig');
      assert.match(e.message, /^PUNK_ENCRYPTION_PREVIOUS_KEYS: /);
      assert.ok(!e.message.includes(bad.slice(bad.indexOf(':') + 1)), 'the key is not echoed');
    }
  }
});

test('the keyring of a configuration: unset key means no vault; previous keys decrypt', () => {
  assert.equal(Keyring.fromConfig(loadConfig({})), undefined);
  const a = newKeySpec('a');
  const b = newKeySpec('b');
  const keyring = Keyring.fromConfig(loadConfig({ PUNK_ENCRYPTION_KEY: b, PUNK_ENCRYPTION_PREVIOUS_KEYS: ` ${a} ` }))!;
  assert.equal(keyring.current.id, 'b');
  assert.deepEqual(keyring.keyIds(), ['b', 'a']);
  const underA = keyringOf(a).encrypt(Buffer.from('old secret'), aad('t', 'x'));
  assert.equal(keyring.decrypt(underA, aad('t', 'x')).toString(), 'old secret');
});

test('two different keys with one id are refused', () => {
  assert.throws(() => keyringOf(newKeySpec('same'), newKeySpec('same')), /two different keys have the key id same/);
  // The same key twice is harmless.
  const spec = newKeySpec('k');
  assert.deepEqual(keyringOf(spec, spec).keyIds(), ['k']);
});

test('AES-256-GCM round trip: a fresh 12-byte IV per record and a 16-byte tag', () => {
  const keyring = keyringOf(newKeySpec());
  const first = keyring.encrypt(Buffer.from('s3cret'), aad('t', 'x'));
  const second = keyring.encrypt(Buffer.from('s3cret'), aad('t', 'x'));
  assert.equal(first.iv.length, 12);
  assert.equal(first.tag.length, 16);
  assert.equal(first.keyId, keyring.current.id);
  assert.ok(!first.iv.equals(second.iv), 'IVs are random');
  assert.ok(!first.ciphertext.equals(second.ciphertext));
  assert.ok(!first.ciphertext.includes(Buffer.from('s3cret')));
  assert.equal(keyring.decrypt(first, aad('t', 'x')).toString(), 's3cret');
});

test('a tampered ciphertext, IV or tag, or another AAD, fails the integrity check', () => {
  const keyring = keyringOf(newKeySpec());
  const record = keyring.encrypt(Buffer.from('{"value":"s3cret-value"}'), aad('t', 'x'));
  const flip = (buffer: Buffer, at: number) => {
    const copy = Buffer.from(buffer);
    copy[at]! ^= 0x01;
    return copy;
  };
  const cases = {
    ciphertext: { ...record, ciphertext: flip(record.ciphertext, 3) },
    iv: { ...record, iv: flip(record.iv, 0) },
    tag: { ...record, tag: flip(record.tag, 15) },
    'truncated tag': { ...record, tag: record.tag.subarray(0, 12) },
  };
  for (const [what, altered] of Object.entries(cases)) {
    assert.throws(
      () => keyring.decrypt(altered, aad('t', 'x')),
      (e: unknown) => e instanceof PunkError && e.code === 'DecryptionFailed',
      what,
    );
  }
  assert.throws(() => keyring.decrypt(record, aad('other', 'x')), /failed its integrity check/);
  assert.throws(() => keyring.decrypt(record, aad('t', 'y')), /failed its integrity check/);
});

test('a record under a key the keyring lacks names the key id and PUNK_ENCRYPTION_PREVIOUS_KEYS', () => {
  const old = newKeySpec('retired-2025');
  const record = keyringOf(old).encrypt(Buffer.from('x'), aad('t', 'x'));
  const current = keyringOf(newKeySpec('current'));
  assert.throws(
    () => current.decrypt(record, aad('t', 'x')),
    (e: unknown) =>
      e instanceof PunkError &&
      e.code === 'EncryptionKeyUnknown' &&
      /key id retired-2025/.test(e.message) &&
      /PUNK_ENCRYPTION_PREVIOUS_KEYS/.test(e.message) &&
      !e.message.includes(old.slice(old.indexOf(':') + 1)),
  );
  // A different key under the same id is not "unknown": its tag does not match.
  const impostor = keyringOf(newKeySpec('retired-2025'));
  assert.throws(
    () => impostor.decrypt(record, aad('t', 'x')),
    (e: unknown) => e instanceof PunkError && e.code === 'DecryptionFailed',
  );
});
