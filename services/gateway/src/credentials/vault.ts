/**
 * The credentials vault: named secrets of string keys per tenant, encrypted at rest (AES-256-GCM, keyring.ts),
 * referenced as `cred:<id>` or `cred:<id>/<key>` in registrations' env and header values, and OAuth2 grants whose
 * access tokens are kept fresh (refresh.ts). No method returns, logs or records a value, except `resolveValue`
 * and `renewAfterUnauthorized`, whose callers send it upstream.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { PunkError, appendLedgerEvent, type Bus, type LedgerEvent, type Logger, type Principal, type Queryable } from '@punk/lib';
import { credentialEvent } from './events.js';
import { isCredentialId, parseCredentialInput, parseReference, type CredentialInput, type CredentialType } from './input.js';
import type { Keyring } from './keyring.js';
import { expiringSoon, LeasedRefresher, notFound, stillRejected } from './refresh.js';
import { ConnectionTokens } from './connection-tokens.js';
import { CredentialSealer } from './sealing.js';
import { CredentialStore, type CredentialRow, type CredentialSource } from './store.js';

/** What the API shows of a credential: names and health, never a value. Times are RFC 3339. */
export interface CredentialInfo {
  id: string;
  tenant: string;
  type: CredentialType;
  /** Names of its keys, sorted. */
  keys: string[];
  /** Id of the encryption key its record is under. */
  keyId: string;
  createdAt: string;
  updatedAt: string;
  /** Subject of the principal who created it. */
  createdBy: string;
  /** oauth2: when the stored access token expires (absent when unknown). */
  expiresAt?: string;
  /** oauth2: when it was last refreshed. */
  lastRefreshAt?: string;
  /** oauth2: why the last refresh failed (cleared by the next successful one); redacted, never a value. */
  refreshError?: string;
  /** `api`: made through the credentials API; `secret`: applied from a Kubernetes Secret by the operator (`credentials.apply`). */
  source: CredentialSource;
  /** `secret`: checksum of the Secret content it was applied from. */
  sourceChecksum?: string;
}

/** What `credentials.apply` did: `unchanged` when the credential was already applied from the same checksum. */
export interface ApplyResult {
  credential: CredentialInfo;
  outcome: 'created' | 'replaced' | 'unchanged';
}

/** A resolved env or header value. */
export interface ResolvedValue {
  /** The value to send: the literal, a credential's key, or `Bearer <access_token>` for an oauth2 credential. */
  value: string;
  /** The id of the oauth2 credential behind a bearer value: after a 401, call `renewAfterUnauthorized` with it once. */
  oauth2?: string;
}

/** Outcome of {@link CredentialVault.reencryptAll}. */
export interface ReencryptResult {
  /** The current key id, which every record should be under afterwards. */
  keyId: string;
  /** Records moved to the current key by this run. */
  reencrypted: number;
  /** Records that already were under it. */
  alreadyCurrent: number;
  /** Records that could not be decrypted (their key is not in the keyring, or they were altered). */
  failed: Array<{ tenant: string; id: string; code: string; message: string }>;
}

/** What a {@link CredentialVault} is built from. */
export interface CredentialVaultOptions {
  /** The database holding `gateway.credentials` (migrated). Only single statements are run. */
  db: Queryable;
  log: Logger;
  /** The keys (`Keyring.fromConfig`); `undefined` when `PUNK_ENCRYPTION_KEY` is unset: every operation then fails with `CredentialsUnavailable`. */
  keyring: Keyring | undefined;
  /** Where `credential.*` ledger events go; absent: none are recorded. */
  bus?: Bus;
  /** Name of this replica in refresh leases (`PUNK_INSTANCE_ID`); a random suffix keeps two vaults of one process apart. */
  instanceId?: string;
  /** Bound on one token endpoint exchange, in milliseconds. Default 10 000. */
  refreshTimeoutMs?: number;
  /** Lifetime of a refresh lease, in milliseconds. Default `refreshTimeoutMs` + 5 000. */
  leaseMs?: number;
  /** How long to wait for another replica's refresh lease, in milliseconds. Default `leaseMs` + 5 000. */
  leaseWaitMs?: number;
  /** The fetch used for token endpoints (global `fetch` by default; pass an egress-guarded one). */
  fetch?: FetchLike;
}

/** The credentials vault of a gateway replica (see the module comment). */
export class CredentialVault {
  private readonly store: CredentialStore;
  private readonly sealer: CredentialSealer | undefined;
  private readonly refresher: LeasedRefresher | undefined;
  private readonly log: Logger;
  private readonly bus: Bus | undefined;
  private readonly connectionTokens: ConnectionTokens | undefined;

  constructor(options: CredentialVaultOptions) {
    this.store = new CredentialStore(options.db);
    this.log = options.log;
    this.bus = options.bus;
    if (options.keyring) {
      this.sealer = new CredentialSealer(options.keyring);
      const refreshTimeoutMs = options.refreshTimeoutMs ?? 10_000;
      const leaseMs = options.leaseMs ?? refreshTimeoutMs + 5_000;
      this.refresher = new LeasedRefresher({
        store: this.store,
        sealer: this.sealer,
        log: options.log,
        bus: options.bus,
        holder: `${options.instanceId ?? `${hostname()}-${process.pid}`}.${randomUUID().slice(0, 8)}`,
        refreshTimeoutMs,
        leaseMs,
        leaseWaitMs: options.leaseWaitMs ?? leaseMs + 5_000,
        fetch: options.fetch,
      });
      this.connectionTokens = new ConnectionTokens(this.store, this.sealer, this.refresher);
    }
  }

  /** The tokens of per-user connections (connection-tokens.ts). @throws PunkError `CredentialsUnavailable` without a key. */
  connections(): ConnectionTokens {
    this.requireSealer();
    return this.connectionTokens!;
  }

  /**
   * Stores a new credential of `tenant` from an API body `{ id, type?, data }` (see `parseCredentialInput`) and
   * records `credential.created` (id, type, key names) under `principal`.
   * @throws PunkError `CredentialsUnavailable` without a key, `InvalidCredential` naming the bad field,
   *   `CredentialExists` when the tenant has a credential with that id; the bus's error when the event cannot be
   *   appended (the credential is stored).
   */
  async create(tenant: string, principal: Principal, body: unknown): Promise<CredentialInfo> {
    const sealer = this.requireSealer();
    const input = parseCredentialInput(body);
    const expiresAt = expiryOf(input);
    const row = await this.store.insert({
      tenant,
      id: input.id,
      type: input.type,
      keyNames: Object.keys(input.data).sort(),
      sealed: sealer.seal(tenant, input.id, input.data),
      expiresAt,
      createdBy: principal.subject,
    });
    if (!row)
      throw new PunkError(
        'CredentialExists',
        `credential ${input.id} already exists in tenant ${tenant}; replace it in place with PUT /api/v1/credentials/${input.id}`,
        {
          id: input.id,
          tenant,
        },
      );
    this.log.info({ tenant, credential: input.id, type: input.type, by: principal.subject }, 'credential created');
    await this.record(credentialEvent('credential.created', tenant, input.id, { type: input.type, keys: row.keyNames }, principal));
    return infoOf(row);
  }

  /**
   * Creates or replaces credential `body.id` of `tenant` from the content of a Kubernetes Secret (the operator, for
   * an McpCredential), `sourceChecksum` naming that content. When the stored credential was applied from the same
   * checksum nothing changes (outcome `unchanged`), so a resync never overwrites a token the gateway refreshed since;
   * otherwise the keys are replaced and the refresh state reset, recorded as `credential.created` or
   * `credential.replaced` (id, type, key names, source) under `principal`.
   * @throws PunkError `CredentialsUnavailable` without a key, `InvalidCredential` naming the bad field; the bus's
   *   error when the event cannot be appended (the credential is stored).
   */
  async apply(tenant: string, principal: Principal, body: unknown, sourceChecksum: string): Promise<ApplyResult> {
    const sealer = this.requireSealer();
    const input = parseCredentialInput(body);
    const written = await this.store.apply(
      {
        tenant,
        id: input.id,
        type: input.type,
        keyNames: Object.keys(input.data).sort(),
        sealed: sealer.seal(tenant, input.id, input.data),
        expiresAt: expiryOf(input),
        createdBy: principal.subject,
      },
      sourceChecksum,
    );
    if (written.outcome === 'unchanged') return { credential: await this.get(tenant, input.id), outcome: 'unchanged' };
    const { outcome, row } = written;
    this.log.info(
      { tenant, credential: input.id, type: input.type, by: principal.subject, outcome },
      `credential ${outcome} from a Secret`,
    );
    await this.record(
      credentialEvent(
        outcome === 'created' ? 'credential.created' : 'credential.replaced',
        tenant,
        input.id,
        { type: input.type, keys: row.keyNames, source: 'secret' },
        principal,
      ),
    );
    return { credential: infoOf(row), outcome };
  }

  /**
   * Replaces credential `id` of `tenant` in place from an API body `{ id?, type?, data }` (`id`, when given, must be
   * the one replaced): its keys change in one statement, so a rotation never leaves a moment without the
   * credential. Records `credential.replaced` (id, type, key names, source `api`) under `principal`.
   * @throws PunkError `CredentialsUnavailable` without a key, `InvalidCredential` naming the bad field,
   *   `CredentialNotFound` (also for another tenant's id; create it with POST), `CredentialManaged` for one applied
   *   from a Kubernetes Secret (change the Secret); the bus's error when the event cannot be appended (the credential is replaced).
   */
  async replace(tenant: string, principal: Principal, id: string, body: unknown): Promise<CredentialInfo> {
    const sealer = this.requireSealer();
    if (!isCredentialId(id)) throw notFound(tenant, id);
    if (typeof body === 'object' && body !== null && !Array.isArray(body) && 'id' in body && body.id !== id) {
      throw new PunkError(
        'InvalidCredential',
        `id: must be ${JSON.stringify(id)}, the credential named in the path (a credential cannot be renamed)`,
        {
          field: 'id',
        },
      );
    }
    const input = parseCredentialInput(typeof body === 'object' && body !== null && !Array.isArray(body) ? { ...body, id } : body);
    const row = await this.store.replace({
      tenant,
      id,
      type: input.type,
      keyNames: Object.keys(input.data).sort(),
      sealed: sealer.seal(tenant, id, input.data),
      expiresAt: expiryOf(input),
      createdBy: principal.subject,
    });
    if (!row) {
      const existing = await this.store.get(tenant, id);
      if (existing?.source === 'secret') {
        throw new PunkError(
          'CredentialManaged',
          `credential ${id} of tenant ${tenant} is applied from a Kubernetes Secret by the operator (McpCredential ${id}); change the Secret instead`,
          { id, tenant },
        );
      }
      throw new PunkError('CredentialNotFound', `credential ${id} not found in tenant ${tenant}; create it with POST /api/v1/credentials`, {
        id,
        tenant,
      });
    }
    this.log.info({ tenant, credential: id, type: input.type, by: principal.subject }, 'credential replaced');
    await this.record(
      credentialEvent('credential.replaced', tenant, id, { type: input.type, keys: row.keyNames, source: 'api' }, principal),
    );
    return infoOf(row);
  }

  /** The tenant's credentials, by id. @throws PunkError `CredentialsUnavailable` without a key. */
  async list(tenant: string): Promise<CredentialInfo[]> {
    this.requireSealer();
    return (await this.store.list(tenant)).map(infoOf);
  }

  /** One credential of the tenant. @throws PunkError `CredentialsUnavailable`, `CredentialNotFound` (also for another tenant's id). */
  async get(tenant: string, id: string): Promise<CredentialInfo> {
    return infoOf(await this.read(tenant, id));
  }

  /**
   * Deletes a credential of the tenant and records `credential.deleted` under `principal`.
   * @throws PunkError `CredentialsUnavailable`, `CredentialNotFound` (also for another tenant's id); the bus's
   *   error when the event cannot be appended (the credential is deleted).
   */
  async delete(tenant: string, principal: Principal, id: string): Promise<void> {
    this.requireSealer();
    // An id that cannot be one (e.g. holding a NUL, which Postgres refuses) is unknown without asking the database.
    if (!isCredentialId(id) || !(await this.store.delete(tenant, id))) throw notFound(tenant, id);
    this.log.info({ tenant, credential: id, by: principal.subject }, 'credential deleted');
    await this.record(credentialEvent('credential.deleted', tenant, id, {}, principal));
  }

  /**
   * Resolves an env or header value of a registration of `tenant` at connect time. `cred:<id>/<key>` is that
   * key's value; `cred:<id>` of a static credential is its `value` key, else its only key; `cred:<id>` of an
   * oauth2 credential is `Bearer <access_token>` (refreshed first when it expires within 60 s) with `oauth2` set;
   * `cred:<id>/access_token` of one is the bare token, refreshed the same way. Any value not starting with
   * `cred:` is returned as it is.
   *
   * @throws PunkError `InvalidCredentialReference` for a malformed `cred:` value, `CredentialsUnavailable`,
   *   `CredentialNotFound` (also for another tenant's id), `CredentialKeyNotFound` / `CredentialKeyAmbiguous`
   *   naming the key names, refresh errors (see `renewAfterUnauthorized`), decryption errors.
   */
  async resolveValue(tenant: string, value: string): Promise<ResolvedValue> {
    const reference = parseReference(value);
    if (!reference) return { value };
    const row = await this.read(tenant, reference.id);
    if (row.type === 'oauth2' && (reference.key === undefined || reference.key === 'access_token')) {
      const data = await this.refresher!.fresh(row, expiringSoon, 'expiry');
      if (reference.key !== undefined) return { value: data.access_token! };
      return { value: `Bearer ${data.access_token!}`, oauth2: row.id };
    }
    const data = this.sealer!.open(tenant, row.id, row.sealed);
    return { value: pickKey(row, data, reference.key) };
  }

  /**
   * After an upstream answered 401 to `rejected` (the `Authorization` value that `resolveValue` gave for
   * credential `id`): refreshes the credential, unless another replica already stored a different token, and
   * returns the new `Bearer <access_token>`. Call it once per 401 and retry once: if the new token is refused
   * too, surface the error (no loop).
   *
   * @throws PunkError `CredentialRefreshFailed` with the token endpoint's error code and description (a revoked
   *   grant is `invalid_grant`), also recorded as the credential's `refreshError` and a `credential.refresh_failed`
   *   event, or when the credential has no refresh token; `CredentialNotRefreshable` for a static credential;
   *   `CredentialRefreshBusy`, `CredentialNotFound`, `CredentialsUnavailable`.
   */
  async renewAfterUnauthorized(tenant: string, id: string, rejected: string): Promise<string> {
    const row = await this.read(tenant, id);
    if (row.type !== 'oauth2') {
      throw new PunkError(
        'CredentialNotRefreshable',
        `credential ${id} in tenant ${tenant} is static: the upstream rejected it, and only an oauth2 credential can be refreshed`,
        { id, tenant },
      );
    }
    const data = await this.refresher!.fresh(row, stillRejected(rejected), 'unauthorized');
    return `Bearer ${data.access_token!}`;
  }

  /**
   * Moves every record (every tenant) not under the keyring's current key to it (`punk credentials reencrypt`,
   * after a rotation). Idempotent; a record refreshed meanwhile is already under the current key. Records that
   * cannot be decrypted are listed in `failed` and left as they are.
   * @throws PunkError `CredentialsUnavailable` without a key; database errors.
   */
  async reencryptAll(): Promise<ReencryptResult> {
    const sealer = this.requireSealer();
    const keyId = sealer.keyring.current.id;
    const total = await this.store.count();
    const pending = await this.store.listNotUnderKey(keyId);
    const result: ReencryptResult = { keyId, reencrypted: 0, alreadyCurrent: total - pending.length, failed: [] };
    for (const { tenant, id } of pending) {
      // A refresh may store new keys between the read and the write: read again (a refresh leaves them under the current key).
      for (let attempt = 0; attempt < 3; attempt++) {
        const row = await this.store.get(tenant, id);
        if (!row) break;
        if (row.sealed.keyId === keyId) {
          result.alreadyCurrent++;
          break;
        }
        let data: Record<string, string>;
        try {
          data = sealer.open(tenant, id, row.sealed);
        } catch (error) {
          if (!(error instanceof PunkError)) throw error;
          result.failed.push({ tenant, id, code: error.code, message: error.message });
          break;
        }
        if (await this.store.replaceEncryption(row, sealer.seal(tenant, id, data))) {
          result.reencrypted++;
          break;
        }
      }
    }
    this.log.info({ keyId, reencrypted: result.reencrypted, failed: result.failed.length }, 're-encrypted credentials');
    return result;
  }

  private requireSealer(): CredentialSealer {
    if (!this.sealer) {
      throw new PunkError(
        'CredentialsUnavailable',
        'the credentials vault needs PUNK_ENCRYPTION_KEY (32 random bytes in base64, e.g. `openssl rand -base64 32`) on every gateway replica',
      );
    }
    return this.sealer;
  }

  private async read(tenant: string, id: string): Promise<CredentialRow> {
    this.requireSealer();
    const row = isCredentialId(id) ? await this.store.get(tenant, id) : undefined;
    // A principal's per-user connection is no credential of the tenant's: never shown, changed or referenced as cred:<id>.
    if (!row || row.source === 'connection') throw notFound(tenant, id);
    return row;
  }

  private async record(event: LedgerEvent): Promise<void> {
    if (this.bus) await appendLedgerEvent(this.bus, event);
  }
}

/** The value a static reference names: the named key, else `value`, else the only key. */
function pickKey(row: CredentialRow, data: Record<string, string>, key: string | undefined): string {
  const names = Object.keys(data).sort().join(', ');
  if (key !== undefined) {
    const value = data[key];
    if (value === undefined)
      throw new PunkError('CredentialKeyNotFound', `credential ${row.id} in tenant ${row.tenant} has no key ${key} (its keys: ${names})`, {
        id: row.id,
        key,
      });
    return value;
  }
  const only = Object.values(data);
  const value = data.value ?? (only.length === 1 ? only[0] : undefined);
  if (value === undefined) {
    throw new PunkError(
      'CredentialKeyAmbiguous',
      `credential ${row.id} in tenant ${row.tenant} has several keys (${names}) and none named value: reference one as cred:${row.id}/<key>`,
      { id: row.id },
    );
  }
  return value;
}

function infoOf(row: CredentialRow): CredentialInfo {
  return {
    id: row.id,
    tenant: row.tenant,
    type: row.type,
    keys: row.keyNames,
    keyId: row.sealed.keyId,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    createdBy: row.createdBy,
    ...(row.expiresAt && { expiresAt: row.expiresAt.toISOString() }),
    ...(row.lastRefreshAt && { lastRefreshAt: row.lastRefreshAt.toISOString() }),
    ...(row.refreshError !== null && { refreshError: row.refreshError }),
    source: row.source,
    ...(row.sourceChecksum !== null && { sourceChecksum: row.sourceChecksum }),
  };
}

/** The stored expiry of an oauth2 credential's access token (its `expires_at` key), else null. */
function expiryOf(input: CredentialInput): Date | null {
  return input.type === 'oauth2' && input.data.expires_at !== undefined ? new Date(Number(input.data.expires_at)) : null;
}
