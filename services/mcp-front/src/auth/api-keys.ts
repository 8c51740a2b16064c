/**
 * API keys: bearer tokens `pk_<id>_<secret>` (16 hex characters of id, 32 random bytes of secret in
 * base64url). Only the SHA-256 of a key is stored (the key has 256 bits of entropy, so a plain hash cannot be
 * reversed); a presented key is found by its id and its hash compared in constant time. The records live in
 * the NATS KV bucket `PUNK_API_KEYS` in the cluster (every front replica sees a key as soon as it is created
 * and stops accepting it as soon as it is revoked), or in the database (table `front.api_keys`) in `punk up`,
 * whose in-process bus keeps nothing across a restart.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  apiKeySchema,
  buckets,
  migrate,
  parseMessage,
  PunkError,
  type ApiKey,
  type Bus,
  type Database,
  type KvStore,
  type Logger,
} from '@punk/lib';

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
/** A key's id: 16 lower-case hex characters. */
const ID_PATTERN = /^[0-9a-f]{16}$/;

/** Whether a bearer token has the shape of an API key (`pk_…`); other tokens go to the OAuth verifier. */
export function looksLikeApiKey(token: string): boolean {
  return token.startsWith('pk_');
}

/** SHA-256 of a token, as bytes. */
export function sha256(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Where the key records are kept: one record per id, the hash and never the key. */
interface ApiKeyRecords {
  /** What the records are, for error messages (`bucket PUNK_API_KEYS`, `table front.api_keys`). */
  readonly where: string;
  /** Stores a new record. */
  create(record: ApiKey): Promise<void>;
  /** The record of `id`, as stored (not yet validated). */
  get(id: string): Promise<unknown>;
  /** Every record, as stored. */
  all(): Promise<unknown[]>;
  /** Removes the record of `id`; false when there was none. */
  delete(id: string): Promise<boolean>;
}

/** Postgres schema of the front's tables (the API keys of `punk up`). */
export const FRONT_SCHEMA = 'front';
/** The front's SQL migrations (the package's `migrations/` folder). */
export const FRONT_MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations', import.meta.url));

/** The API keys of every tenant, in bucket `PUNK_API_KEYS` or in the database. */
export class ApiKeyStore {
  private constructor(private readonly records: ApiKeyRecords) {}

  /**
   * Opens (creating if needed) the bucket `PUNK_API_KEYS`: the keys of every front replica of the cluster.
   * @throws PunkError from the bus when the bucket cannot be made.
   */
  static async open(bus: Bus): Promise<ApiKeyStore> {
    return new ApiKeyStore(kvRecords(await bus.keyValue(buckets.apiKeys)));
  }

  /**
   * The keys in table `front.api_keys` of `db` (migrated here): the keys of `punk up`, kept across restarts.
   * @throws PunkError `MigrationFailed`, `DatabaseUnavailable`.
   */
  static async inDatabase(db: Database, log: Logger): Promise<ApiKeyStore> {
    await migrate(db, { schema: FRONT_SCHEMA, dir: FRONT_MIGRATIONS_DIR, log });
    return new ApiKeyStore(databaseRecords(db));
  }

  /**
   * Creates a key; the returned `key` is the only copy of it anywhere.
   * @throws PunkError from the bus or the database when it cannot be stored.
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
    await this.records.create(apiKeySchema.parse(record));
    return { key, info: infoOf(record) };
  }

  /**
   * The stored key a presented token is, or undefined when it is malformed, unknown, revoked or wrong.
   * @throws PunkError from the bus or the database when the records cannot be read.
   */
  async verify(token: string): Promise<ApiKey | undefined> {
    const match = KEY_PATTERN.exec(token);
    if (!match?.[1]) return undefined;
    const stored = await this.records.get(match[1]);
    if (stored === undefined) return undefined;
    const record = parseMessage(apiKeySchema, this.records.where, stored);
    return timingSafeEqual(sha256(token), Buffer.from(record.sha256, 'hex')) ? record : undefined;
  }

  /**
   * The key of `id` without its hash, or undefined when there is none.
   * @throws PunkError from the bus or the database when the records cannot be read.
   */
  async find(id: string): Promise<ApiKeyInfo | undefined> {
    if (!ID_PATTERN.test(id)) return undefined;
    const stored = await this.records.get(id);
    return stored === undefined ? undefined : infoOf(parseMessage(apiKeySchema, this.records.where, stored));
  }

  /**
   * Every stored key (of one tenant when given), oldest first, without hashes.
   * @throws PunkError from the bus or the database when the records cannot be read.
   */
  async list(tenant?: string): Promise<ApiKeyInfo[]> {
    const records = (await this.records.all())
      .map((stored) => parseMessage(apiKeySchema, this.records.where, stored))
      .filter((record) => tenant === undefined || record.tenant === tenant);
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id)).map(infoOf);
  }

  /**
   * Revokes a key: every replica refuses it from the next request on.
   * @throws PunkError `ApiKeyNotFound` when no key has this id.
   */
  async revoke(id: string): Promise<void> {
    if (!ID_PATTERN.test(id) || !(await this.records.delete(id)))
      throw new PunkError('ApiKeyNotFound', `no API key with id ${JSON.stringify(id)}`, { id });
  }
}

/** The records in a KV bucket, by id. */
function kvRecords(kv: KvStore): ApiKeyRecords {
  return {
    where: `bucket ${buckets.apiKeys.name}`,
    create: async (record) => {
      await kv.create(record.id, record);
    },
    get: async (id) => (await kv.get(id))?.value,
    all: async () => {
      const values: unknown[] = [];
      for (const id of await kv.keys()) {
        const entry = await kv.get(id);
        if (entry) values.push(entry.value);
      }
      return values;
    },
    delete: async (id) => {
      if (!(await kv.get(id))) return false;
      await kv.delete(id);
      return true;
    },
  };
}

/** The records in table `front.api_keys`, each row the record as JSON. */
function databaseRecords(db: Database): ApiKeyRecords {
  return {
    where: `table ${FRONT_SCHEMA}.api_keys`,
    create: async (record) => {
      await db.query(`INSERT INTO ${FRONT_SCHEMA}.api_keys (id, tenant, record) VALUES ($1, $2, $3)`, [
        record.id,
        record.tenant,
        JSON.stringify(record),
      ]);
    },
    get: async (id) =>
      (await db.query<{ record: unknown }>(`SELECT record FROM ${FRONT_SCHEMA}.api_keys WHERE id = $1`, [id])).rows[0]?.record,
    all: async () => (await db.query<{ record: unknown }>(`SELECT record FROM ${FRONT_SCHEMA}.api_keys`)).rows.map((row) => row.record),
    delete: async (id) => (await db.query(`DELETE FROM ${FRONT_SCHEMA}.api_keys WHERE id = $1`, [id])).rowCount > 0,
  };
}

function infoOf(record: ApiKey): ApiKeyInfo {
  const { sha256: _hash, ...info } = record;
  return info;
}
