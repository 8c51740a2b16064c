/**
 * Per-user connections (`spec.auth.perUser`, docs/identity.md): each principal connects their own account at a
 * server's provider once, by the OAuth 2.0 authorization code grant with PKCE S256 (RFC 6749 §4.1, RFC 7636), and each
 * of their calls to that server then carries their own access token (call-bearer.ts), kept fresh by the vault.
 *
 * The pending connect flows live in Postgres (`gateway.connection_states`), so a flow started on one front and gateway
 * replica comes back on any: a `state` is single-use (deleted when read), expires after {@link CONNECT_STATE_TTL_MS},
 * and is bound to the principal who started it and to the browser that did (the hash of a secret the front sets as an
 * HttpOnly cookie): a link opened by someone else connects nothing. The PKCE verifier never leaves the database.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import {
  appendLedgerEvent,
  PunkError,
  type Bus,
  type ConnectionBeginReply,
  type ConnectionItem,
  type GatewayAdminRequest,
  type Logger,
  type McpServer,
  type PerUserAuth,
  type Principal,
  type Queryable,
} from '@punk/lib';
import type { CallBearer } from './call-bearer.js';
import { connectionId } from './credentials/connection-tokens.js';
import type { CredentialVault } from './credentials/index.js';
import { redeemAuthorizationCode, TokenEndpointError } from './credentials/oauth2.js';

/** How long a started connect flow may take, in milliseconds (10 minutes). */
export const CONNECT_STATE_TTL_MS = 10 * 60_000;

/** What {@link Connections} needs. */
export interface ConnectionsOptions {
  db: Queryable;
  log: Logger;
  bus: Bus;
  vault: CredentialVault;
  /** The McpServer `name` of `tenant` this replica serves, or undefined. */
  serverOf(tenant: string, name: string): McpServer | undefined;
  /** Every McpServer of `tenant` this replica serves. */
  serversOf(tenant: string): McpServer[];
  /** The (egress-guarded) fetch for the providers' token endpoints. */
  fetch?: FetchLike;
  /** Bound on one token endpoint exchange, in milliseconds (default 10 000). */
  timeoutMs?: number;
}

type ConnectionOp = Extract<GatewayAdminRequest, { op: `connections.${string}` }>;

/** The user a principal is, for a per-user connection; undefined for an API key (or the bootstrap key) naming none. */
export function userOf(principal: Principal): string | undefined {
  const subject = principal.actingFor?.subject ?? principal.subject;
  return subject.startsWith('api-key:') || subject === 'bootstrap-admin' ? undefined : subject;
}

/** The connect flows and the bearers of per-user connections (see the module comment). */
export class Connections {
  constructor(private readonly options: ConnectionsOptions) {}

  /** Answers a `connections.*` operation of `punk.gateway.admin`. */
  async admin(request: ConnectionOp): Promise<unknown> {
    switch (request.op) {
      case 'connections.list':
        return { items: await this.list(request.tenant, request.principal) };
      case 'connections.begin':
        return this.begin(request.tenant, request.principal, request.server, request.redirectUri);
      case 'connections.complete':
        return this.complete(request);
      case 'connections.delete':
        await this.delete(request.tenant, request.principal, request.server);
        return {};
    }
  }

  /**
   * The bearer of `principal`'s call to `server`: their connection's access token (refreshed ahead of expiry), renewed
   * once after an HTTP 401.
   * @throws PunkError `ConnectionUserRequired` for an API key naming no user; `ConnectionRequired` when the principal
   *   has not connected (or must connect again), `details` naming `namespace`, `server` and `provider` so the front can
   *   point at the connect page; `ConnectionRevoked`, once, when the provider refused the refresh token (the connection
   *   is then marked for a reconnect); the vault's errors otherwise.
   */
  async callBearer(tenant: string, principal: Principal, server: string): Promise<CallBearer> {
    const perUser = this.perUserOf(tenant, server);
    const user = this.requireUser(principal, server, perUser);
    const connections = this.options.vault.connections();
    const details = { namespace: tenant, server, provider: perUser.provider };
    const bearer = await this.surfacingRevocation(tenant, user, server, perUser, () => connections.bearer(tenant, user, server));
    if (!bearer) {
      throw new PunkError(
        'ConnectionRequired',
        `server "${server}" is called with each principal's own ${perUser.provider} account (spec.auth.perUser), and ${user} has not connected theirs: connect it, then call again`,
        details,
      );
    }
    return {
      accessToken: bearer.accessToken,
      identity: `per-user connection of principal ${user}`,
      renew: (rejected) =>
        this.surfacingRevocation(tenant, user, server, perUser, () => connections.renewAfterUnauthorized(tenant, bearer.id, rejected)),
    };
  }

  private async list(tenant: string, principal: Principal): Promise<ConnectionItem[]> {
    const user = userOf(principal);
    const stored = user === undefined ? [] : await this.options.vault.connections().list(tenant, user);
    const items: ConnectionItem[] = [];
    for (const server of this.options.serversOf(tenant)) {
      const perUser = server.spec.auth?.perUser;
      if (!perUser) continue;
      const name = server.metadata.name;
      const connection = stored.find((c) => c.server === name);
      items.push({
        namespace: tenant,
        name,
        provider: perUser.provider,
        scopes: perUser.scopes,
        connected: connection !== undefined && !connection.needsReconnect,
        ...(connection && { connectedAt: connection.connectedAt.toISOString() }),
        ...(connection?.needsReconnect && { needsReconnect: true }),
      });
    }
    return items.sort((a, b) => a.name.localeCompare(b.name));
  }

  private async begin(tenant: string, principal: Principal, server: string, redirectUri: string): Promise<ConnectionBeginReply> {
    const perUser = this.perUserOf(tenant, server);
    const user = this.requireUser(principal, server, perUser);
    const state = randomBytes(32).toString('base64url');
    const codeVerifier = randomBytes(32).toString('base64url');
    const browserBinding = randomBytes(32).toString('base64url');
    await this.options.db.query('DELETE FROM gateway.connection_states WHERE expires_at < now()');
    await this.options.db.query(
      `INSERT INTO gateway.connection_states (state, tenant, server, principal, browser_hash, code_verifier, redirect_uri, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8 * interval '1 millisecond')`,
      [state, tenant, server, user, digest(browserBinding), codeVerifier, redirectUri, CONNECT_STATE_TTL_MS],
    );
    const url = new URL(perUser.authorizationUrl);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', perUser.clientId);
    url.searchParams.set('redirect_uri', redirectUri);
    if (perUser.scopes.length > 0) url.searchParams.set('scope', perUser.scopes.join(' '));
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', createHash('sha256').update(codeVerifier).digest('base64url'));
    url.searchParams.set('code_challenge_method', 'S256');
    return { authorizationUrl: url.toString(), browserBinding };
  }

  private async complete(request: Extract<ConnectionOp, { op: 'connections.complete' }>): Promise<{ tenant: string; server: string }> {
    // Spent whatever happens next: a state never serves twice.
    const found = await this.options.db.query<{
      tenant: string;
      server: string;
      principal: string;
      browser_hash: string;
      code_verifier: string;
      redirect_uri: string;
      expired: boolean;
    }>(
      `DELETE FROM gateway.connection_states WHERE state = $1
       RETURNING tenant, server, principal, browser_hash, code_verifier, redirect_uri, expires_at < now() AS expired`,
      [request.state],
    );
    const pending = found.rows[0];
    if (!pending || pending.expired)
      throw new PunkError(
        'ConnectionStateInvalid',
        'this connect link is unknown, already used or expired (it lasts 10 minutes): start again with Connect',
      );
    const { tenant, server, principal: user } = pending;
    const expected = Buffer.from(pending.browser_hash);
    const given = Buffer.from(digest(request.browserBinding ?? ''));
    if (request.browserBinding === undefined || !timingSafeEqual(expected, given))
      throw new PunkError(
        'ConnectionBrowserMismatch',
        `this connect link for server ${tenant}/${server} was started in another browser: nothing was connected; start again with Connect in your own`,
        { server },
      );
    const perUser = this.perUserOf(tenant, server);
    if (request.error !== undefined)
      throw new PunkError(
        'ConnectionRefused',
        `${perUser.provider} did not grant access for server ${tenant}/${server}: ${request.error}${request.errorDescription ? `: ${request.errorDescription.slice(0, 200)}` : ''}`,
        { server, error: request.error },
      );
    if (request.code === undefined)
      throw new PunkError('ConnectionRefused', `${perUser.provider} came back without a code for server ${tenant}/${server}`, { server });
    const clientSecret =
      perUser.clientSecret === undefined ? undefined : (await this.options.vault.resolveValue(tenant, perUser.clientSecret)).value;
    let tokens;
    try {
      tokens = await redeemAuthorizationCode({
        tokenUrl: perUser.tokenUrl,
        code: request.code,
        codeVerifier: pending.code_verifier,
        redirectUri: pending.redirect_uri,
        clientId: perUser.clientId,
        clientSecret,
        timeoutMs: this.options.timeoutMs ?? 10_000,
        ...(this.options.fetch && { fetch: this.options.fetch }),
      });
    } catch (error) {
      if (!(error instanceof TokenEndpointError)) throw error;
      throw new PunkError(
        'ConnectionRefused',
        `${perUser.provider} refused the code for server ${tenant}/${server}: ${error.error ?? error.message}`,
        {
          server,
          ...(error.error && { error: error.error }),
        },
      );
    }
    await this.options.vault.connections().put(tenant, user, server, {
      access_token: tokens.accessToken,
      ...(tokens.refreshToken !== undefined && { refresh_token: tokens.refreshToken }),
      ...(tokens.expiresIn !== undefined && { expires_at: String(Date.now() + Math.round(tokens.expiresIn * 1000)) }),
      token_url: perUser.tokenUrl,
      client_id: perUser.clientId,
      ...(clientSecret !== undefined && { client_secret: clientSecret }),
      ...(perUser.scopes.length > 0 && { scope: perUser.scopes.join(' ') }),
    });
    this.options.log.info({ tenant, server, principal: user }, 'per-user connection created');
    await this.record('connection.created', tenant, user, server, { provider: perUser.provider, scopes: perUser.scopes });
    return { tenant, server };
  }

  private async delete(tenant: string, principal: Principal, server: string): Promise<void> {
    const user = userOf(principal);
    if (user === undefined || !(await this.options.vault.connections().delete(tenant, user, server)))
      throw new PunkError('ConnectionNotFound', `${principal.subject} has no connection to server ${tenant}/${server}`, { server });
    this.options.log.info({ tenant, server, principal: user }, 'per-user connection deleted');
    await this.record('connection.deleted', tenant, user, server, {});
  }

  /**
   * Runs a token lookup or renewal; a refresh the provider refuses for good (`invalid_grant`) marks the connection for
   * a reconnect and surfaces once as `ConnectionRevoked`; later calls find no connection (`ConnectionRequired`).
   */
  private async surfacingRevocation<T>(
    tenant: string,
    user: string,
    server: string,
    perUser: PerUserAuth,
    run: () => Promise<T>,
  ): Promise<T> {
    try {
      return await run();
    } catch (error) {
      const code = error instanceof PunkError ? (error.details as { error?: unknown } | undefined)?.error : undefined;
      if (!(error instanceof PunkError) || error.code !== 'CredentialRefreshFailed' || code !== 'invalid_grant') throw error;
      if (await this.options.vault.connections().markNeedsReconnect(tenant, connectionId(user, server)))
        await this.record('connection.needs_reconnect', tenant, user, server, { provider: perUser.provider, error: 'invalid_grant' });
      throw new PunkError(
        'ConnectionRevoked',
        `${perUser.provider} refused the refresh token of ${user}'s connection to server "${server}" (invalid_grant: revoked or expired): the connection needs a reconnect; connect again, then call again`,
        { namespace: tenant, server, provider: perUser.provider, error: 'invalid_grant' },
      );
    }
  }

  private perUserOf(tenant: string, server: string): PerUserAuth {
    const perUser = this.options.serverOf(tenant, server)?.spec.auth?.perUser;
    if (!perUser)
      throw new PunkError(
        'ServerNotFound',
        `tenant ${tenant} has no server named ${server} with per-user connections (spec.auth.perUser)`,
        {
          server,
        },
      );
    return perUser;
  }

  private requireUser(principal: Principal, server: string, perUser: PerUserAuth): string {
    const user = userOf(principal);
    if (user === undefined)
      throw new PunkError(
        'ConnectionUserRequired',
        `server "${server}" is called with each user's own ${perUser.provider} account (spec.auth.perUser), and caller ${principal.subject} is an API key naming no user: sign in as a user (OAuth) instead`,
        { server, subject: principal.subject },
      );
    return user;
  }

  private async record(
    type: 'connection.created' | 'connection.deleted' | 'connection.needs_reconnect',
    tenant: string,
    user: string,
    server: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    await appendLedgerEvent(this.options.bus, {
      id: randomUUID(),
      type,
      tenant,
      runId: `connection.${tenant}.${server}`,
      occurredAt: new Date().toISOString(),
      source: 'gateway',
      principal: { subject: user, tenant, groups: [] },
      server,
      data: { server, ...data },
    });
  }
}

/** SHA-256 of a browser binding, hex (what the state row keeps). */
function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}
