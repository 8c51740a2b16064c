/**
 * The keys that encrypt credentials at rest, and AES-256-GCM with them (NIST SP 800-38D): a random 96-bit IV per
 * record, a 128-bit tag checked on decryption, and additional authenticated data (AAD) that binds a ciphertext to
 * where it belongs, so a record copied to another tenant or id does not decrypt.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { PunkError, type PunkConfig } from '@punk/lib';

/** AES-256 key length in bytes. */
const KEY_BYTES = 32;
/** GCM IV length in bytes: 96 bits, the size SP 800-38D recommends. */
const IV_BYTES = 12;
/** GCM tag length in bytes: the full 128 bits. */
const TAG_BYTES = 16;
const keyIdPattern = /^[A-Za-z0-9._-]{1,64}$/;

/** One encryption key: its id (stored with every record it encrypts) and its 32 bytes. */
export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/** A value encrypted with AES-256-GCM: the id of the key, the 12-byte IV, the ciphertext and the 16-byte tag. */
export interface EncryptedRecord {
  keyId: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

/**
 * Parses one key as `PUNK_ENCRYPTION_KEY` spells it: `[<keyId>:]<32 bytes in base64 or base64url>`. Without a
 * key id, the id is the first 16 hex digits of the SHA-256 of the key bytes (not secret: it identifies the key,
 * and 64 bits of a hash reveal nothing usable about 256 bits of key).
 *
 * @param spec - the key as written
 * @param variable - the setting it came from, named in errors (e.g. `PUNK_ENCRYPTION_KEY`)
 * @throws PunkError `InvalidConfig` naming `variable` (never the value) when the id or the key is malformed.
 */
export function parseEncryptionKey(spec: string, variable: string): EncryptionKey {
  const colon = spec.lastIndexOf(':');
  const id = colon >= 0 ? spec.slice(0, colon) : undefined;
  const encoded = spec.slice(colon + 1);
  if (id !== undefined && !keyIdPattern.test(id)) {
    throw new PunkError('InvalidConfig', `${variable}: the key id before ":" must be 1-64 letters, digits, ".", "_" or "-"`, { variable });
  }
  const key = /^[A-Za-z0-9+/_-]+={0,2}$/.test(encoded) ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
  if (key.length !== KEY_BYTES) {
    throw new PunkError(
      'InvalidConfig',
      `${variable}: a key must be 32 bytes in base64 or base64url (e.g. the output of \`openssl rand -base64 32\`), optionally prefixed "<keyId>:"`,
      { variable },
    );
  }
  return { id: id ?? createHash('sha256').update(key).digest('hex').slice(0, 16), key };
}

/**
 * The current key, which encrypts, and previous keys, which still decrypt records written before a rotation
 * (`punk credentials reencrypt` then moves those records to the current key).
 */
export class Keyring {
  /** The key new records are encrypted under. */
  readonly current: EncryptionKey;
  private readonly keys = new Map<string, Buffer>();

  /**
   * @param current - the encrypting key
   * @param previous - keys that only decrypt; a key equal to the current one (or repeated) is ignored
   * @throws PunkError `InvalidConfig` when two different keys share one id (a record would be ambiguous).
   */
  constructor(current: EncryptionKey, previous: readonly EncryptionKey[] = []) {
    this.current = current;
    for (const key of [current, ...previous]) {
      const known = this.keys.get(key.id);
      if (known && !known.equals(key.key)) {
        throw new PunkError(
          'InvalidConfig',
          `PUNK_ENCRYPTION_KEY / PUNK_ENCRYPTION_PREVIOUS_KEYS: two different keys have the key id ${key.id}`,
          { keyId: key.id },
        );
      }
      this.keys.set(key.id, key.key);
    }
  }

  /**
   * The keyring of a configuration (`PUNK_ENCRYPTION_KEY`, `PUNK_ENCRYPTION_PREVIOUS_KEYS`), or `undefined` when no
   * key is set (the vault is then unavailable).
   * @throws PunkError `InvalidConfig` for a malformed key or two different keys with one id.
   */
  static fromConfig(config: Pick<PunkConfig, 'encryptionKey' | 'encryptionPreviousKeys'>): Keyring | undefined {
    if (config.encryptionKey === undefined) return undefined;
    const previous = config.encryptionPreviousKeys.map((spec) => parseEncryptionKey(spec, 'PUNK_ENCRYPTION_PREVIOUS_KEYS'));
    return new Keyring(parseEncryptionKey(config.encryptionKey, 'PUNK_ENCRYPTION_KEY'), previous);
  }

  /** Ids of every key that decrypts, the current one first. */
  keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /**
   * Encrypts `plaintext` under the current key with a fresh random IV; `aad` is authenticated, not stored, and
   * must be given again to decrypt.
   */
  encrypt(plaintext: Buffer, aad: Buffer): EncryptedRecord {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad);
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { keyId: this.current.id, iv, ciphertext, tag: cipher.getAuthTag() };
  }

  /**
   * Decrypts a record with the key its id names, checking the tag over the ciphertext and `aad`.
   * @throws PunkError `EncryptionKeyUnknown` naming the key id when no key of the keyring has it (set
   *   `PUNK_ENCRYPTION_PREVIOUS_KEYS`); `DecryptionFailed` when the tag does not match (the ciphertext, IV or tag
   *   was altered, or the record was moved to another place than `aad` describes). Neither names any value.
   */
  decrypt(record: EncryptedRecord, aad: Buffer): Buffer {
    const key = this.keys.get(record.keyId);
    if (!key) {
      throw new PunkError(
        'EncryptionKeyUnknown',
        `encrypted under key id ${record.keyId}, which is neither PUNK_ENCRYPTION_KEY nor in PUNK_ENCRYPTION_PREVIOUS_KEYS (known key ids: ${this.keyIds().join(', ')}); add that key to PUNK_ENCRYPTION_PREVIOUS_KEYS`,
        { keyId: record.keyId },
      );
    }
    if (record.iv.length !== IV_BYTES || record.tag.length !== TAG_BYTES) {
      throw new PunkError(
        'DecryptionFailed',
        `not decryptable: the stored IV or tag has the wrong length (expected ${IV_BYTES} and ${TAG_BYTES} bytes)`,
        { keyId: record.keyId },
      );
    }
    const decipher = createDecipheriv('aes-256-gcm', key, record.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(record.tag);
    try {
      return Buffer.concat([decipher.update(record.ciphertext), decipher.final()]);
    } catch {
      throw new PunkError(
        'DecryptionFailed',
        `not decryptable: it failed its integrity check under key id ${record.keyId} (the record was altered, or copied from another tenant or id)`,
        { keyId: record.keyId },
      );
    }
  }
}
