/**
 * API keys: bearer tokens `pk_<id>_<secret>` (16 hex characters of id, 32 random bytes of secret in
 * base64url), kept in the NATS KV bucket `PUNK_API_KEYS` so every front replica sees a key as soon as it
 * is created and stops accepting it as soon as it is revoked. Only the SHA-256 of a key is stored (the
 * key has 256 bits of entropy, so a plain hash cannot be reversed); a presented key is found by its id and
 * its hash compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { apiKeySchema, buckets, parseMessage, PunkError, type ApiKey, type Bus, type KvStore } from '@punk/lib';

/** What an admin gives to create a key. */
export interface NewApiKey {
  name: string;
  tenant: string;
  scopes: string[];
  groups: string[];
  /** Subject of the admin creating it. */
  createdBy: string;
}

/** A stored key as the admin API shows it: everything but the hash. */
export type ApiKeyInfo = Omit<ApiKey, 'sha256'>;

const KEY_PATTERN = /^pk_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$/;

/** Whether a bearer token has the shape of an API key (`pk_…`); other tokens go to the OAuth verifier. */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith('pk_');
}

/** SHA-256 of a token, as bytes. */
export function sha256(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** The API keys of every tenant, in bucket `PUNK_API_KEYS`. */
export class ApiKeyStore {
  private constructor(private readonly kv: KvStore) {}

  /**
   * Opens (creating if needed) the bucket `PUNK_API_KEYS`.
   * @throws PunkError from the bus when the bucket cannot be made.
   */
  static async open(bus: Bus): Promise<ApiKeyStore> {
    return new ApiKeyStore(await bus.keyValue(buckets.apiKeys));
  }

  /**
   * Creates a key; the returned `key` is the only copy of it anywhere.
   * @throws PunkError from the bus when it cannot be stored.
   */
  async create(request: NewApiKey): Promise<{ key: string; info: ApiKeyInfo }> {
    const id = randomBytes(8).toString('hex');
    const key = `pk_${id}_${randomBytes(32).toString('base64url')}`;
    const record: ApiKey = {
      id,
      name: request.name,
      tenant: request.tenant,
      scopes: [...request.scopes],
      groups: [...request.groups],
      sha256: sha256(key).toString('hex'),
      createdAt: new Date().toISOString(),
      createdBy: request.createdBy,
    };
    await this.kv.create(id, apiKeySchema.parse(record));
    return { key, info: infoOf(record) };
  }

  /**
   * The stored key a presented token is, or undefined when it is malformed, unknown, revoked or wrong.
   * @throws PunkError from the bus when the bucket cannot be read.
   */
  async verify(token: string): Promise<ApiKey | undefined> {
    const match = KEY_PATTERN.exec(token);
    if (!match) return undefined;
    const entry = await this.kv.get(match[1]!);
    if (!entry) return undefined;
    const record = parseMessage(apiKeySchema, buckets.apiKeys.name, entry.value);
    return timingSafeEqual(sha256(token), Buffer.from(record.sha256, 'hex')) ? record : undefined;
  }

  /**
   * Every stored key (of one tenant when given), oldest first, without hashes.
   * @throws PunkError from the bus when the bucket cannot be read.
   */
  async list(tenant?: string): Promise<ApiKeyInfo[]> {
    const records: ApiKey[] = [];
    for (const id of await this.kv.keys()) {
      const entry = await this.kv.get(id);
      if (!entry) continue;
      const record = parseMessage(apiKeySchema, buckets.apiKeys.name, entry.value);
      if (tenant === undefined || record.tenant === tenant) records.push(record);
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id)).map(infoOf);
  }

  /**
   * Revokes a key: every replica refuses it from the next request on.
   * @throws PunkError `ApiKeyNotFound` when no key has this id.
   */
  async revoke(id: string): Promise<void> {
    if (!/^[0-9a-f]{16}$/.test(id) || !(await this.kv.get(id)))
      throw new PunkError('ApiKeyNotFound', `no API key with id ${JSON.stringify(id)}`, { id });
    await this.kv.delete(id);
  }
}

function infoOf(record: ApiKey): ApiKeyInfo {
  const { sha256: _hash, ...info } = record;
  return info;
}
