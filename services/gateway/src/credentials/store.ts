/**
 * SQL of the credentials vault (table `gateway.credentials`, migrations/0002_credentials.sql). Every statement
 * is one autocommit round trip: no transaction is held across the network call of a refresh (PGlite has one
 * connection).
 */
import type { Queryable } from '@punk/lib';
import type { EncryptedRecord } from './keyring.js';
import type { CredentialType } from './input.js';

/** One stored credential as read from the table. */
export interface CredentialRow {
  tenant: string;
  id: string;
  type: CredentialType;
  keyNames: string[];
  sealed: EncryptedRecord;
  expiresAt: Date | null;
  lastRefreshAt: Date | null;
  refreshError: string | null;
  /** `api`: made through the credentials API; `secret`: applied from a Kubernetes Secret (`credentials.apply`). */
  source: CredentialSource;
  /** `secret`: checksum of the Secret content it was applied from. */
  sourceChecksum: string | null;
  /** Decimal string of the `bigint` version. */
  version: string;
  createdAt: Date;
  updatedAt: Date;
  createdBy: string;
  /** A connection whose refresh token was refused: its principal must connect again. */
  needsReconnect: boolean;
}

/**
 * Where a credential came from (migrations/0004_credential_source.sql): `connection` is a principal's per-user
 * connection to a server (migrations/0008_connections.sql), which the credentials API never shows or changes.
 */
export type CredentialSource = 'api' | 'secret' | 'connection';

interface SqlRow {
  tenant: string;
  id: string;
  type: CredentialType;
  key_names: string[];
  key_id: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
  expires_at: Date | null;
  last_refresh_at: Date | null;
  refresh_error: string | null;
  source: CredentialSource;
  source_checksum: string | null;
  version: string;
  created_at: Date;
  updated_at: Date;
  created_by: string;
  needs_reconnect: boolean;
}

const COLUMNS =
  'tenant, id, type, key_names, key_id, iv, ciphertext, tag, expires_at, last_refresh_at, refresh_error, source, source_checksum, version, created_at, updated_at, created_by, needs_reconnect';

function rowOf(row: SqlRow): CredentialRow {
  return {
    tenant: row.tenant,
    id: row.id,
    type: row.type,
    keyNames: row.key_names,
    sealed: { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
    expiresAt: row.expires_at,
    lastRefreshAt: row.last_refresh_at,
    refreshError: row.refresh_error,
    source: row.source,
    sourceChecksum: row.source_checksum,
    // PGlite reads int8 as a bigint, pg as a string.
    version: String(row.version as unknown),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    createdBy: row.created_by,
    needsReconnect: row.needs_reconnect,
  };
}

/** What a create writes. */
export interface NewCredentialRow {
  tenant: string;
  id: string;
  type: CredentialType;
  keyNames: string[];
  sealed: EncryptedRecord;
  expiresAt: Date | null;
  createdBy: string;
}

/** Reads and writes `gateway.credentials`. */
export class CredentialStore {
  constructor(private readonly db: Queryable) {}

  /** Inserts a credential; `undefined` when the tenant already has one with that id (nothing written). */
  async insert(row: NewCredentialRow): Promise<CredentialRow | undefined> {
    const result = await this.db.query<SqlRow>(
      `INSERT INTO gateway.credentials (tenant, id, type, key_names, key_id, iv, ciphertext, tag, expires_at, created_by)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (tenant, id) DO NOTHING
       RETURNING ${COLUMNS}`,
      [
        row.tenant,
        row.id,
        row.type,
        row.keyNames,
        row.sealed.keyId,
        row.sealed.iv,
        row.sealed.ciphertext,
        row.sealed.tag,
        row.expiresAt,
        row.createdBy,
      ],
    );
    const inserted = result.rows[0];
    return inserted && rowOf(inserted);
  }

  /**
   * Creates or replaces credential `(tenant, id)` as applied from a Secret whose content has checksum
   * `sourceChecksum`, in one statement: a replace resets the refresh state (expiry from the new keys, no refresh
   * time or error, lease dropped so a refresh in flight cannot store over it) and keeps `created_by`. Nothing is
   * written when the stored credential was applied from the same checksum.
   * @returns the row written and whether it was `created` or `replaced`, or `unchanged` with no row.
   */
  async apply(
    row: NewCredentialRow,
    sourceChecksum: string,
  ): Promise<{ outcome: 'created' | 'replaced'; row: CredentialRow } | { outcome: 'unchanged' }> {
    const result = await this.db.query<SqlRow & { inserted: boolean }>(
      `INSERT INTO gateway.credentials AS c (tenant, id, type, key_names, key_id, iv, ciphertext, tag, expires_at, created_by, source, source_checksum)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'secret', $11)
       ON CONFLICT (tenant, id) DO UPDATE SET type = EXCLUDED.type, key_names = EXCLUDED.key_names, key_id = EXCLUDED.key_id,
         iv = EXCLUDED.iv, ciphertext = EXCLUDED.ciphertext, tag = EXCLUDED.tag, expires_at = EXCLUDED.expires_at,
         last_refresh_at = NULL, refresh_error = NULL, refresh_lease_holder = NULL, refresh_lease_until = NULL,
         source = 'secret', source_checksum = EXCLUDED.source_checksum, version = c.version + 1, updated_at = now()
       WHERE c.source <> 'connection' AND (c.source <> 'secret' OR c.source_checksum IS DISTINCT FROM EXCLUDED.source_checksum)
       RETURNING ${COLUMNS.split(', ')
         .map((column) => `c.${column}`)
         .join(', ')}, (xmax = 0) AS inserted`,
      [
        row.tenant,
        row.id,
        row.type,
        row.keyNames,
        row.sealed.keyId,
        row.sealed.iv,
        row.sealed.ciphertext,
        row.sealed.tag,
        row.expiresAt,
        row.createdBy,
        sourceChecksum,
      ],
    );
    const written = result.rows[0];
    if (!written) return { outcome: 'unchanged' };
    return { outcome: written.inserted ? 'created' : 'replaced', row: rowOf(written) };
  }

  /**
   * Replaces the keys of credential `(tenant, row.id)` made through the API, in one UPDATE: a reader sees the old
   * keys or the new ones, never no credential. The refresh state is reset as {@link apply} does; `created_by`
   * and `created_at` are kept.
   * @returns the row written; `undefined` when there is no such credential or it was applied from a Secret (nothing written).
   */
  async replace(row: NewCredentialRow): Promise<CredentialRow | undefined> {
    const result = await this.db.query<SqlRow>(
      `UPDATE gateway.credentials SET type = $3, key_names = $4, key_id = $5, iv = $6, ciphertext = $7, tag = $8, expires_at = $9,
         last_refresh_at = NULL, refresh_error = NULL, refresh_lease_holder = NULL, refresh_lease_until = NULL,
         version = version + 1, updated_at = now()
       WHERE tenant = $1 AND id = $2 AND source = 'api'
       RETURNING ${COLUMNS}`,
      [row.tenant, row.id, row.type, row.keyNames, row.sealed.keyId, row.sealed.iv, row.sealed.ciphertext, row.sealed.tag, row.expiresAt],
    );
    const written = result.rows[0];
    return written && rowOf(written);
  }

  /** The tenant's credentials, by id. */
  async list(tenant: string): Promise<CredentialRow[]> {
    const result = await this.db.query<SqlRow>(
      `SELECT ${COLUMNS} FROM gateway.credentials WHERE tenant = $1 AND source <> 'connection' ORDER BY id`,
      [tenant],
    );
    return result.rows.map(rowOf);
  }

  /** One credential of the tenant, or `undefined`. */
  async get(tenant: string, id: string): Promise<CredentialRow | undefined> {
    const result = await this.db.query<SqlRow>(`SELECT ${COLUMNS} FROM gateway.credentials WHERE tenant = $1 AND id = $2`, [tenant, id]);
    const row = result.rows[0];
    return row && rowOf(row);
  }

  /** Deletes one credential of the tenant (not a connection); `false` when there was none. */
  async delete(tenant: string, id: string): Promise<boolean> {
    const result = await this.db.query("DELETE FROM gateway.credentials WHERE tenant = $1 AND id = $2 AND source <> 'connection'", [
      tenant,
      id,
    ]);
    return result.rowCount === 1;
  }

  /**
   * Stores the tokens of `principal`'s connection to `server` as credential `row.id` (source `connection`): a new
   * connection, or a reconnect replacing the old tokens and refresh state in one statement.
   */
  async putConnection(row: NewCredentialRow, principal: string, server: string): Promise<void> {
    await this.db.query(
      `INSERT INTO gateway.credentials AS c (tenant, id, type, key_names, key_id, iv, ciphertext, tag, expires_at, created_by, source, principal, server)
       VALUES ($1, $2, 'oauth2', $3, $4, $5, $6, $7, $8, $9, 'connection', $9, $10)
       ON CONFLICT (tenant, id) DO UPDATE SET key_names = EXCLUDED.key_names, key_id = EXCLUDED.key_id, iv = EXCLUDED.iv,
         ciphertext = EXCLUDED.ciphertext, tag = EXCLUDED.tag, expires_at = EXCLUDED.expires_at, last_refresh_at = NULL,
         refresh_error = NULL, refresh_lease_holder = NULL, refresh_lease_until = NULL, needs_reconnect = false,
         version = c.version + 1, created_at = now(), updated_at = now()
       WHERE c.source = 'connection'`,
      [
        row.tenant,
        row.id,
        row.keyNames,
        row.sealed.keyId,
        row.sealed.iv,
        row.sealed.ciphertext,
        row.sealed.tag,
        row.expiresAt,
        principal,
        server,
      ],
    );
  }

  /** The connections of `principal` in `tenant`: server, when connected, whether it needs a reconnect. */
  async connectionsOf(tenant: string, principal: string): Promise<Array<{ server: string; connectedAt: Date; needsReconnect: boolean }>> {
    const result = await this.db.query<{ server: string; created_at: Date; needs_reconnect: boolean }>(
      "SELECT server, created_at, needs_reconnect FROM gateway.credentials WHERE tenant = $1 AND principal = $2 AND source = 'connection'",
      [tenant, principal],
    );
    return result.rows.map((r) => ({ server: r.server, connectedAt: r.created_at, needsReconnect: r.needs_reconnect }));
  }

  /** Marks connection credential `id` as needing a reconnect (its refresh token was refused); `false` when already marked or gone. */
  async markNeedsReconnect(tenant: string, id: string): Promise<boolean> {
    const result = await this.db.query(
      "UPDATE gateway.credentials SET needs_reconnect = true, updated_at = now() WHERE tenant = $1 AND id = $2 AND source = 'connection' AND NOT needs_reconnect",
      [tenant, id],
    );
    return result.rowCount === 1;
  }

  /** Deletes connection credential `id`; `false` when there was none. */
  async deleteConnection(tenant: string, id: string): Promise<boolean> {
    const result = await this.db.query("DELETE FROM gateway.credentials WHERE tenant = $1 AND id = $2 AND source = 'connection'", [
      tenant,
      id,
    ]);
    return result.rowCount === 1;
  }

  /**
   * Claims the refresh lease of a credential for `holder` until `leaseMs` from now (database time, so replicas'
   * clocks do not matter), in one atomic UPDATE that succeeds only when the lease is free or expired.
   * @returns the row as it is once claimed (its latest committed state), or `undefined` when another holder has
   *   the lease or the credential does not exist.
   */
  async claimLease(tenant: string, id: string, holder: string, leaseMs: number): Promise<CredentialRow | undefined> {
    const result = await this.db.query<SqlRow>(
      `UPDATE gateway.credentials SET refresh_lease_holder = $3, refresh_lease_until = now() + $4 * interval '1 millisecond'
       WHERE tenant = $1 AND id = $2 AND (refresh_lease_until IS NULL OR refresh_lease_until < now())
       RETURNING ${COLUMNS}`,
      [tenant, id, holder, leaseMs],
    );
    const row = result.rows[0];
    return row && rowOf(row);
  }

  /** Gives the lease back without changing the credential (nothing to refresh after all). */
  async releaseLease(tenant: string, id: string, holder: string): Promise<void> {
    await this.db.query(
      'UPDATE gateway.credentials SET refresh_lease_holder = NULL, refresh_lease_until = NULL WHERE tenant = $1 AND id = $2 AND refresh_lease_holder = $3',
      [tenant, id, holder],
    );
  }

  /**
   * Stores refreshed keys and releases the lease, if `holder` still holds it; bumps the version and clears the
   * refresh error.
   * @returns `false` when the lease is no longer `holder`'s (it expired and was claimed again, or the credential
   *   was deleted): nothing is written.
   */
  async storeRefreshed(
    tenant: string,
    id: string,
    holder: string,
    keyNames: string[],
    sealed: EncryptedRecord,
    expiresAt: Date | null,
  ): Promise<boolean> {
    const result = await this.db.query(
      `UPDATE gateway.credentials SET key_names = $4, key_id = $5, iv = $6, ciphertext = $7, tag = $8, expires_at = $9,
         last_refresh_at = now(), refresh_error = NULL, refresh_lease_holder = NULL, refresh_lease_until = NULL,
         version = version + 1, updated_at = now()
       WHERE tenant = $1 AND id = $2 AND refresh_lease_holder = $3`,
      [tenant, id, holder, keyNames, sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag, expiresAt],
    );
    return result.rowCount === 1;
  }

  /** Records why a refresh failed and releases the lease, if `holder` still holds it; bumps the version so waiters see the outcome. */
  async storeRefreshFailure(tenant: string, id: string, holder: string, message: string): Promise<void> {
    await this.db.query(
      `UPDATE gateway.credentials SET refresh_error = $4, refresh_lease_holder = NULL, refresh_lease_until = NULL, version = version + 1, updated_at = now()
       WHERE tenant = $1 AND id = $2 AND refresh_lease_holder = $3`,
      [tenant, id, holder, message],
    );
  }

  /** How many credentials there are, in every tenant. */
  async count(): Promise<number> {
    const result = await this.db.query<{ count: string }>('SELECT count(*) AS count FROM gateway.credentials');
    return Number(result.rows[0]?.count ?? 0);
  }

  /** `(tenant, id)` of every credential whose key id is not `keyId`, in a stable order. */
  async listNotUnderKey(keyId: string): Promise<Array<{ tenant: string; id: string }>> {
    const result = await this.db.query<{ tenant: string; id: string }>(
      'SELECT tenant, id FROM gateway.credentials WHERE key_id <> $1 ORDER BY tenant, id',
      [keyId],
    );
    return result.rows;
  }

  /**
   * Replaces the encryption of a credential whose content has not changed since it was read (same `version`,
   * same key id); the version stays, since the keys did not change.
   * @returns `false` when the row changed in between (a refresh stored new keys) or is gone.
   */
  async replaceEncryption(row: CredentialRow, sealed: EncryptedRecord): Promise<boolean> {
    const result = await this.db.query(
      `UPDATE gateway.credentials SET key_id = $5, iv = $6, ciphertext = $7, tag = $8, updated_at = now()
       WHERE tenant = $1 AND id = $2 AND version = $3 AND key_id = $4`,
      [row.tenant, row.id, row.version, row.sealed.keyId, sealed.keyId, sealed.iv, sealed.ciphertext, sealed.tag],
    );
    return result.rowCount === 1;
  }
}
