/**
 * OAuth2 refresh of stored credentials, one at a time per credential across gateway replicas.
 *
 * A replica that needs a fresh token claims the credential's lease in Postgres (one atomic UPDATE that succeeds
 * only when the lease is free or expired), calls the token endpoint with no transaction open, stores the rotated
 * tokens re-encrypted and releases the lease in one UPDATE. A replica that finds the lease taken polls the row
 * until the holder's write lands (the row's version changes) and uses the token it stored, so a rotating refresh
 * token (RFC 6749 §10.4, OAuth 2.0 Security BCP §4.14) is never spent twice. Within one replica, concurrent
 * refreshes of a credential share one attempt.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { setTimeout as sleep } from 'node:timers/promises';
import { PunkError, appendLedgerEvent, errorMessage, redact, type Bus, type Logger } from '@punk/lib';
import { credentialEvent } from './events.js';
import { describeTokenUrl, refreshAccessToken, refreshSecrets, TokenEndpointError, type RefreshRequest } from './oauth2.js';
import type { CredentialSealer } from './sealing.js';
import type { CredentialRow, CredentialStore } from './store.js';

/** An access token expiring within this many milliseconds is refreshed before use. */
export const REFRESH_AHEAD_MS = 60_000;
/** How often a replica waiting on another's refresh lease reads the row again, in milliseconds. */
export const LEASE_POLL_MS = 50;

/** Why a refresh happens: the token expires soon, or an upstream answered 401 to it. */
export type RefreshTrigger = 'expiry' | 'unauthorized';

/**
 * Whether the keys `data` still need a refresh. `refreshedMeanwhile` is true when another attempt (of this or
 * another replica) stored new keys since the caller looked: those are taken unless they are unusable.
 */
export type RefreshNeed = (data: Record<string, string>, refreshedMeanwhile: boolean) => boolean;

/** Need of a token about to be used: none, or one that expires within {@link REFRESH_AHEAD_MS} (already expired, after another's refresh). */
export const expiringSoon: RefreshNeed = (data, refreshedMeanwhile) => {
  if (data.access_token === undefined) return true;
  if (data.expires_at === undefined) return false;
  const left = Number(data.expires_at) - Date.now();
  return refreshedMeanwhile ? left <= 0 : left <= REFRESH_AHEAD_MS;
};

/** Need after an upstream answered 401 to the `Authorization` value `rejected`: the stored token is still that one. */
export function stillRejected(rejected: string): RefreshNeed {
  return (data) => data.access_token === undefined || `Bearer ${data.access_token}` === rejected;
}

/** Settings of a {@link LeasedRefresher}. */
export interface LeasedRefresherOptions {
  store: CredentialStore;
  sealer: CredentialSealer;
  log: Logger;
  bus: Bus | undefined;
  /** This replica's unique lease holder name. */
  holder: string;
  /** Bound on one token endpoint exchange, in milliseconds. */
  refreshTimeoutMs: number;
  /** How long a claimed lease lasts (longer than `refreshTimeoutMs`, so it outlives the exchange), in milliseconds. */
  leaseMs: number;
  /** How long a replica waits for another's lease before giving up, in milliseconds. */
  leaseWaitMs: number;
  fetch: FetchLike | undefined;
}

/** Refreshes OAuth2 credentials under the lease (see the module comment). */
export class LeasedRefresher {
  private readonly inflight = new Map<string, Promise<Record<string, string>>>();

  constructor(private readonly options: LeasedRefresherOptions) {}

  /**
   * The keys of an oauth2 credential that satisfy `need`, refreshing them first when they do not.
   * A credential without `refresh_token` and `token_url` is returned as it is for an `expiry` trigger (nothing
   * can be done before the upstream says no) and refused for `unauthorized`.
   *
   * @param row - the credential as the caller read it (its version tells later writes apart)
   * @throws PunkError `CredentialRefreshFailed` (this or another replica's refresh failed: the token endpoint's
   *   error code and description, no secrets; or the credential cannot be refreshed), `CredentialRefreshBusy` when
   *   another replica held the lease for longer than `leaseWaitMs`, `CredentialNotFound` when it was deleted,
   *   decryption errors.
   */
  async fresh(row: CredentialRow, need: RefreshNeed, trigger: RefreshTrigger): Promise<Record<string, string>> {
    const { sealer } = this.options;
    let current = row;
    let data = sealer.open(current.tenant, current.id, current.sealed);
    const key = JSON.stringify([row.tenant, row.id]);
    for (let refreshedMeanwhile = false; need(data, refreshedMeanwhile); refreshedMeanwhile = true) {
      if (data.refresh_token === undefined || data.token_url === undefined) {
        if (trigger === 'expiry') return data;
        throw new PunkError(
          'CredentialRefreshFailed',
          `the upstream rejected the access token of credential ${row.id} in tenant ${row.tenant}, and it cannot be refreshed (it has no refresh_token and token_url); store it again with a valid access_token`,
          { id: row.id, tenant: row.tenant },
        );
      }
      const running = this.inflight.get(key);
      if (running) {
        // Another call of this replica is refreshing it: share its outcome, then look again.
        await running;
        current = await this.read(row.tenant, row.id);
        data = sealer.open(current.tenant, current.id, current.sealed);
        continue;
      }
      const attempt = this.refreshUnderLease(current, need, trigger);
      this.inflight.set(key, attempt);
      try {
        return await attempt;
      } finally {
        this.inflight.delete(key);
      }
    }
    return data;
  }

  /** Claims the lease (or waits for the holder's outcome), then refreshes if still needed. */
  private async refreshUnderLease(seen: CredentialRow, need: RefreshNeed, trigger: RefreshTrigger): Promise<Record<string, string>> {
    const { store, sealer, holder, leaseMs, leaseWaitMs } = this.options;
    const { tenant, id } = seen;
    const deadline = Date.now() + leaseWaitMs;
    for (;;) {
      const claimed = await store.claimLease(tenant, id, holder, leaseMs);
      if (claimed) return this.refreshHolding(claimed, seen.version, need, trigger);
      const row = await this.read(tenant, id);
      if (row.version !== seen.version) {
        // The holder's write landed: its failure is ours, its token is ours if it fits.
        if (row.refreshError !== null) throw new PunkError('CredentialRefreshFailed', row.refreshError, { id, tenant });
        const data = sealer.open(tenant, id, row.sealed);
        if (!need(data, true)) return data;
      }
      if (Date.now() > deadline) {
        throw new PunkError(
          'CredentialRefreshBusy',
          `credential ${id} in tenant ${tenant}: another gateway replica has been refreshing it for more than ${leaseWaitMs} ms; try again`,
          { id, tenant },
        );
      }
      await sleep(LEASE_POLL_MS);
    }
  }

  /** With the lease held: refresh unless the claimed row no longer needs it, store, release. */
  private async refreshHolding(
    claimed: CredentialRow,
    seenVersion: string,
    need: RefreshNeed,
    trigger: RefreshTrigger,
  ): Promise<Record<string, string>> {
    const { store, sealer, holder, log } = this.options;
    const { tenant, id } = claimed;
    let held = true;
    try {
      const refreshedMeanwhile = claimed.version !== seenVersion;
      if (refreshedMeanwhile && claimed.refreshError !== null)
        throw new PunkError('CredentialRefreshFailed', claimed.refreshError, { id, tenant });
      const data = sealer.open(tenant, id, claimed.sealed);
      if (!need(data, refreshedMeanwhile)) return data;
      const tokenUrl = data.token_url!;
      const started = Date.now();
      const request: RefreshRequest = {
        tokenUrl,
        refreshToken: data.refresh_token!,
        clientId: data.client_id,
        clientSecret: data.client_secret,
        accessToken: data.access_token,
        scope: data.scope,
        timeoutMs: this.options.refreshTimeoutMs,
        fetch: this.options.fetch,
      };
      let tokens;
      try {
        tokens = await refreshAccessToken(request);
      } catch (error) {
        // The message is stored, logged, recorded and answered: no spelling of a secret of the refresh may stay in it.
        const reason = redact(
          error instanceof TokenEndpointError
            ? error.message
            : `the token endpoint ${describeTokenUrl(tokenUrl)} failed: ${errorMessage(error)}`,
          refreshSecrets(request),
        );
        const message = `refreshing credential ${id} in tenant ${tenant} failed: ${reason}`;
        await store.storeRefreshFailure(tenant, id, holder, message);
        held = false;
        log.warn({ tenant, credential: id, trigger, error: error instanceof TokenEndpointError ? error.error : undefined }, message);
        await this.record(
          credentialEvent('credential.refresh_failed', tenant, id, {
            trigger,
            ...(error instanceof TokenEndpointError && error.error && { error: error.error }),
            message,
          }),
        );
        throw new PunkError('CredentialRefreshFailed', message, {
          id,
          tenant,
          ...(error instanceof TokenEndpointError && error.error && { error: error.error }),
        });
      }
      const refreshed: Record<string, string> = { ...data, access_token: tokens.accessToken };
      if (tokens.refreshToken !== undefined) refreshed.refresh_token = tokens.refreshToken;
      if (tokens.expiresIn !== undefined) refreshed.expires_at = String(Date.now() + Math.round(tokens.expiresIn * 1000));
      else delete refreshed.expires_at;
      const expiresAt = refreshed.expires_at === undefined ? null : new Date(Number(refreshed.expires_at));
      const stored = await store.storeRefreshed(
        tenant,
        id,
        holder,
        Object.keys(refreshed).sort(),
        sealer.seal(tenant, id, refreshed),
        expiresAt,
      );
      held = false;
      if (!stored) {
        const gone = (await store.get(tenant, id)) === undefined;
        if (gone) throw notFound(tenant, id);
        throw new PunkError(
          'CredentialRefreshFailed',
          `refreshing credential ${id} in tenant ${tenant}: the refresh lease expired before the new token was stored (the exchange outlasted ${this.options.leaseMs} ms); the grant may need to be stored again`,
          { id, tenant },
        );
      }
      const rotated = tokens.refreshToken !== undefined && tokens.refreshToken !== data.refresh_token;
      log.info({ tenant, credential: id, trigger, rotated, ms: Date.now() - started }, 'refreshed an oauth2 credential');
      await this.record(
        credentialEvent('credential.refreshed', tenant, id, { trigger, rotated, ...(expiresAt && { expiresAt: expiresAt.toISOString() }) }),
      );
      return refreshed;
    } finally {
      if (held)
        await store
          .releaseLease(tenant, id, holder)
          .catch((error: unknown) =>
            log.warn({ tenant, credential: id, err: error }, 'could not release a refresh lease; it expires by itself'),
          );
    }
  }

  private async read(tenant: string, id: string): Promise<CredentialRow> {
    const row = await this.options.store.get(tenant, id);
    if (!row) throw notFound(tenant, id);
    return row;
  }

  /** Appends a refresh event; a bus failure is logged, not thrown: the token is good either way. */
  private async record(event: Parameters<typeof appendLedgerEvent>[1]): Promise<void> {
    const { bus, log } = this.options;
    if (!bus) return;
    await appendLedgerEvent(bus, event).catch((error: unknown) =>
      log.error({ err: error, type: event.type, tenant: event.tenant }, 'could not append a credential event to the ledger'),
    );
  }
}

/**
 * The error for a credential that does not exist in the caller's tenant, worded the same whether it exists in
 * another tenant or nowhere, so its existence is not revealed.
 */
export function notFound(tenant: string, id: string): PunkError {
  return new PunkError('CredentialNotFound', `credential ${id} not found in tenant ${tenant}`, { id, tenant });
}
