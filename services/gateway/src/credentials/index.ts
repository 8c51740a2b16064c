export {
  CredentialVault,
  type CredentialVaultOptions,
  type CredentialInfo,
  type ApplyResult,
  type ResolvedValue,
  type ReencryptResult,
} from './vault.js';
export { Keyring, parseEncryptionKey, type EncryptionKey, type EncryptedRecord } from './keyring.js';
export {
  parseCredentialInput,
  parseReference,
  isCredentialReference,
  OAUTH2_KEYS,
  type CredentialInput,
  type CredentialReference,
  type CredentialType,
} from './input.js';
export { REFRESH_AHEAD_MS } from './refresh.js';
export { referencesCredential } from './references.js';
