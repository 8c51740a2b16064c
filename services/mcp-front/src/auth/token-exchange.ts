/**
 * RFC 8693 token exchange for servers whose McpServer declares `spec.auth.tokenExchange` (docs/identity.md): the
 * caller's OAuth access token (validated by this front) is exchanged at the issuer's token endpoint for a token of the
 * server's `audience` and `scopes`, Punk authenticating as its own OAuth client (`PUNK_OAUTH_CLIENT_ID` /
 * `PUNK_OAUTH_CLIENT_SECRET`, HTTP Basic, RFC 6749 §2.3.1). The token endpoint is the issuer's metadata's
 * `token_endpoint` (RFC 8414, else OpenID Connect Discovery). Exchanged tokens are cached per (tenant, server, caller
 * subject) until shortly before they expire; one without `expires_in` is used for its call only.
 *
 * Only the exchanged token goes on to the gateway, for the one call; the caller's own token never leaves this front.
 * Neither is ever logged.
 */
import { errorMessage, PunkError } from '@punk/lib';
import { clientAuthorization } from './oauth.js';

/** `grant_type` of RFC 8693 §2.1. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** Token type of an OAuth access token (RFC 8693 §3). */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** A cached token is renewed this long before it expires, in milliseconds (or at half its lifetime, if shorter). */
export const RENEW_BEFORE_MS = 30_000;

/** Punk's own OAuth client at the issuer, and the issuer. */
export interface TokenExchangeOptions {
  /** `PUNK_AUTH_ISSUER`: the authorization server that issued the callers' tokens and exchanges them. */
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Deadline of one request to the issuer, in milliseconds (default 5000). */
  timeoutMs?: number;
}

/** What a server declares (`spec.auth.tokenExchange`). */
export interface ExchangeTarget {
  audience: string;
  scopes: string[];
}

interface Cached {
  accessToken: string;
  /** When to exchange again, in ms since the epoch. */
  renewAt: number;
}

/** Exchanges callers' tokens and caches the results. */
export class TokenExchange {
  private endpoint: Promise<string> | undefined;
  private readonly cache = new Map<string, Cached>();
  /** Exchanges in flight, by cache key: concurrent calls of one caller share one. */
  private readonly inFlight = new Map<string, Promise<string>>();

  constructor(private readonly options: TokenExchangeOptions) {}

  /** The issuer the exchanges go to. */
  get issuer(): string {
    return this.options.issuer;
  }

  /**
   * An access token of `target.audience` for `subject` on `server` of `tenant`, exchanged for `subjectToken` (the
   * caller's own access token) or cached.
   * @throws PunkError `TokenExchangeRefused` naming the server and the issuer's `error` code (RFC 6749 §5.2) when the
   *   issuer refuses; `TokenExchangeUnavailable` when it cannot be reached or answers no usable token.
   */
  async tokenFor(tenant: string, server: string, subject: string, subjectToken: string, target: ExchangeTarget): Promise<string> {
    const key = cacheKey(tenant, server, subject, target);
    const cached = this.cache.get(key);
    if (cached && cached.renewAt > Date.now()) return cached.accessToken;
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.exchange(server, subjectToken, target, key).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  /** Drops the cached token of `subject` on `server` (the upstream refused it): the next call exchanges again. */
  forget(tenant: string, server: string, subject: string, target: ExchangeTarget): void {
    this.cache.delete(cacheKey(tenant, server, subject, target));
  }

  private async exchange(server: string, subjectToken: string, target: ExchangeTarget, key: string): Promise<string> {
    const { issuer, clientId, clientSecret } = this.options;
    const endpoint = await this.tokenEndpoint();
    const unavailable = (why: string) =>
      new PunkError('TokenExchangeUnavailable', `the token exchange for server "${server}" at the issuer ${issuer} failed: ${why}`, {
        server,
        issuer,
      });
    const body = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE_GRANT,
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
      audience: target.audience,
    });
    if (target.scopes.length > 0) body.set('scope', target.scopes.join(' '));
    let response: Response;
    let answer: Record<string, unknown>;
    try {
      response = await fetch(endpoint, {
        method: 'POST',
        headers: {
          authorization: clientAuthorization(clientId, clientSecret),
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'application/json',
        },
        body,
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 5_000),
      });
      answer = (await response.json()) as Record<string, unknown>;
    } catch (error) {
      throw unavailable(`its token endpoint ${endpoint} did not answer JSON: ${errorMessage(error)}`);
    }
    if (!response.ok) {
      const code = typeof answer['error'] === 'string' ? answer['error'] : `HTTP ${response.status}`;
      const description = typeof answer['error_description'] === 'string' ? `: ${answer['error_description']}` : '';
      throw new PunkError(
        'TokenExchangeRefused',
        `the issuer ${issuer} refused to exchange the caller's token for server "${server}" (audience ${target.audience}): ${code}${description}`,
        { server, issuer, error: code },
      );
    }
    const accessToken = answer['access_token'];
    if (typeof accessToken !== 'string' || accessToken.length === 0) throw unavailable('its answer has no access_token');
    const expiresIn = answer['expires_in'];
    if (typeof expiresIn === 'number' && expiresIn > 0) {
      const lifetimeMs = expiresIn * 1000;
      this.cache.set(key, { accessToken, renewAt: Date.now() + lifetimeMs - Math.min(RENEW_BEFORE_MS, lifetimeMs / 2) });
    }
    return accessToken;
  }

  /** The issuer's `token_endpoint` (RFC 8414 §3, else OpenID Connect Discovery 1.0 §4), found once. */
  private tokenEndpoint(): Promise<string> {
    this.endpoint ??= this.discover().catch((error: unknown) => {
      this.endpoint = undefined;
      throw error;
    });
    return this.endpoint;
  }

  private async discover(): Promise<string> {
    const issuer = new URL(this.options.issuer);
    const path = issuer.pathname === '/' ? '' : issuer.pathname.replace(/\/$/, '');
    const documents = [
      `${issuer.origin}/.well-known/oauth-authorization-server${path}`,
      `${issuer.origin}${path}/.well-known/openid-configuration`,
    ];
    const failures: string[] = [];
    for (const url of documents) {
      try {
        const response = await fetch(url, {
          headers: { accept: 'application/json' },
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 5_000),
        });
        if (!response.ok) {
          failures.push(`${url}: HTTP ${response.status}`);
          continue;
        }
        const endpoint = ((await response.json()) as Record<string, unknown>)['token_endpoint'];
        if (typeof endpoint === 'string') return endpoint;
        failures.push(`${url}: no token_endpoint`);
      } catch (error) {
        failures.push(`${url}: ${errorMessage(error)}`);
      }
    }
    throw new PunkError(
      'TokenExchangeUnavailable',
      `the token endpoint of the issuer ${this.options.issuer} could not be found (${failures.join('; ')})`,
      { issuer: this.options.issuer },
    );
  }
}

function cacheKey(tenant: string, server: string, subject: string, target: ExchangeTarget): string {
  return JSON.stringify([tenant, server, subject, target.audience, target.scopes]);
}
