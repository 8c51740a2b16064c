/**
 * A credential's keys as stored: one JSON object encrypted under the keyring's current key, its AAD binding the
 * ciphertext to the credential's tenant and id, so a record copied to another tenant or id does not decrypt.
 */
import { PunkError } from '@punk/lib';
import type { EncryptedRecord, Keyring } from './keyring.js';

/** Version tag of the AAD layout, so a later layout cannot be confused with this one. */
const AAD_VERSION = 'punk.credential.v1';

/** The AAD of a credential: an unambiguous encoding of (version, tenant, id). */
export function credentialAad(tenant: string, id: string): Buffer {
  return Buffer.from(JSON.stringify([AAD_VERSION, tenant, id]));
}

/** Encrypts and decrypts the keys of credentials with one keyring. */
export class CredentialSealer {
  constructor(readonly keyring: Keyring) {}

  /** The keys of credential `id` of `tenant`, encrypted under the current key. */
  seal(tenant: string, id: string, data: Record<string, string>): EncryptedRecord {
    return this.keyring.encrypt(Buffer.from(JSON.stringify(data)), credentialAad(tenant, id));
  }

  /**
   * The keys of credential `id` of `tenant` from its stored record.
   * @throws PunkError `EncryptionKeyUnknown` or `DecryptionFailed` (see `Keyring.decrypt`), the message prefixed
   *   with the credential and tenant, never a value.
   */
  open(tenant: string, id: string, sealed: EncryptedRecord): Record<string, string> {
    let plaintext: Buffer;
    try {
      plaintext = this.keyring.decrypt(sealed, credentialAad(tenant, id));
    } catch (error) {
      if (!(error instanceof PunkError)) throw error;
      throw new PunkError(error.code, `credential ${id} in tenant ${tenant} is ${error.message}`, { ...error.details, id, tenant });
    }
    return JSON.parse(plaintext.toString('utf8')) as Record<string, string>;
  }
}
