/**
 * The tokens of per-user connections (`spec.auth.perUser`, docs/identity.md) in the credentials vault: one oauth2
 * credential of source `connection` per (tenant, principal, server), encrypted like every credential and refreshed by
 * the same leased refresher (ahead of expiry, and after an HTTP 401; rotated refresh tokens written back). Its id is
 * a hash of (principal, server), so no `cred:` reference of a manifest can be made to name it by accident, and the
 * credentials API never shows it. No method returns a token except {@link ConnectionTokens.bearer} and
 * {@link ConnectionTokens.renewAfterUnauthorized}, whose callers send it upstream.
 */
import { createHash } from 'node:crypto';
import { PunkError } from '@punk/lib';
import { expiringSoon, stillRejected, type LeasedRefresher } from './refresh.js';
import type { CredentialSealer } from './sealing.js';
import type { CredentialStore } from './store.js';

/** A connection's access token for one call, and the credential id to renew it by. */
export interface ConnectionBearer {
  accessToken: string;
  id: string;
}

/** The keys a connection stores (those of an oauth2 credential, `expires_at` in epoch milliseconds). */
export interface ConnectionGrant {
  access_token: string;
  refresh_token?: string;
  expires_at?: string;
  token_url: string;
  client_id: string;
  client_secret?: string;
  scope?: string;
}

/** One connection as the connections API lists it. */
export interface ConnectionRecord {
  server: string;
  connectedAt: Date;
  needsReconnect: boolean;
}

/** The credential id of `principal`'s connection to `server` (a DNS label: `conn-` and 40 hex digits of SHA-256). */
export function connectionId(principal: string, server: string): string {
  return `conn-${createHash('sha256')
    .update(JSON.stringify([principal, server]))
    .digest('hex')
    .slice(0, 40)}`;
}

/** Per-user connection tokens (see the module comment). */
export class ConnectionTokens {
  constructor(
    private readonly store: CredentialStore,
    private readonly sealer: CredentialSealer,
    private readonly refresher: LeasedRefresher,
  ) {}

  /** Stores (or replaces, on a reconnect) the grant of `principal`'s connection to `server`. */
  async put(tenant: string, principal: string, server: string, grant: ConnectionGrant): Promise<void> {
    const id = connectionId(principal, server);
    const data = Object.fromEntries(Object.entries(grant).filter((entry): entry is [string, string] => entry[1] !== undefined));
    await this.store.putConnection(
      {
        tenant,
        id,
        type: 'oauth2',
        keyNames: Object.keys(data).sort(),
        sealed: this.sealer.seal(tenant, id, data),
        expiresAt: data.expires_at === undefined ? null : new Date(Number(data.expires_at)),
        createdBy: principal,
      },
      principal,
      server,
    );
  }

  /**
   * The access token of `principal`'s connection to `server`, refreshed first when it expires within a minute;
   * `undefined` when the principal has not connected, or must connect again (its refresh token was refused).
   * @throws PunkError `CredentialRefreshFailed` (with `details.error` the token endpoint's code) when the refresh
   *   fails, `CredentialRefreshBusy`, decryption errors.
   */
  async bearer(tenant: string, principal: string, server: string): Promise<ConnectionBearer | undefined> {
    const id = connectionId(principal, server);
    const row = await this.store.get(tenant, id);
    if (!row || row.source !== 'connection' || row.needsReconnect) return undefined;
    const data = await this.refresher.fresh(row, expiringSoon, 'expiry');
    return { accessToken: data.access_token!, id };
  }

  /**
   * After the upstream answered HTTP 401 to `rejected` (the access token {@link bearer} gave): the connection's
   * token refreshed (unless another call stored a new one meanwhile). Call it once per 401 and retry once.
   * @throws PunkError as {@link bearer}; `CredentialNotFound` when the connection was deleted meanwhile.
   */
  async renewAfterUnauthorized(tenant: string, id: string, rejected: string): Promise<string> {
    const row = await this.store.get(tenant, id);
    if (!row || row.source !== 'connection') throw new PunkError('CredentialNotFound', `the connection was deleted`, { tenant });
    const data = await this.refresher.fresh(row, stillRejected(`Bearer ${rejected}`), 'unauthorized');
    return data.access_token!;
  }

  /** Marks the connection as needing a reconnect; `true` the first time (so the refusal surfaces once). */
  markNeedsReconnect(tenant: string, id: string): Promise<boolean> {
    return this.store.markNeedsReconnect(tenant, id);
  }

  /** The connections of `principal` in `tenant`. */
  list(tenant: string, principal: string): Promise<ConnectionRecord[]> {
    return this.store.connectionsOf(tenant, principal);
  }

  /** Deletes `principal`'s connection to `server` (its tokens); `false` when there was none. */
  delete(tenant: string, principal: string, server: string): Promise<boolean> {
    return this.store.deleteConnection(tenant, connectionId(principal, server));
  }
}
