/**
 * Who is calling: the bearer token of a request (RFC 6750 §2.1, `Authorization` header only) turned into
 * the caller's {@link Principal}, or a refusal (challenge.ts). A token is
 *
 * - `PUNK_AUTH_BOOTSTRAP_ADMIN_KEY`: subject `bootstrap-admin`, the admin and platform admin scopes;
 * - an API key `pk_…` (api-keys.ts): subject `api-key:<id>`, the key's tenant, scopes and groups;
 * - otherwise an OAuth access token (oauth.ts), when a verifier is configured: subject `sub` (or
 *   `client_id`), scopes from `scope` (space-separated) or `scp`, groups from the groups claim, tenant from
 *   the tenant claim (or the front's tenant when none is configured).
 *
 * A key or token of another tenant than the front's is refused (403), unless it carries the platform admin
 * scope: a platform admin acts in every tenant, and its principal is then of the front's tenant.
 *
 * The token is used here and nowhere else: it is never stored, logged, or forwarded upstream (the
 * gateway's upstream requests carry only the principal over the bus).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { Router } from 'express';
import { errorMessage, PunkError, type Bus, type Logger, type Principal, type PunkConfig } from '@punk/lib';
import { ApiKeyStore, looksLikeApiKey, sha256 } from './api-keys.js';
import { sendMcpRefusal, type Refusal } from './challenge.js';
import { metadataRouter, ResourceUrls } from './metadata.js';
import { introspectionVerifier, jwtVerifier, staticKey, type AccessTokenVerifier, type TokenClaims } from './oauth.js';

/** Default scope of a tenant admin: the admin API in the caller's own tenant. */
export const DEFAULT_ADMIN_SCOPE = 'punk:admin';
/** Default scope of a platform admin: the admin API in every tenant (a tenant admin has {@link DEFAULT_ADMIN_SCOPE} only). */
export const DEFAULT_PLATFORM_ADMIN_SCOPE = 'punk:platform-admin';
/** Subject of the bootstrap admin key. */
export const BOOTSTRAP_ADMIN_SUBJECT = 'bootstrap-admin';

/** How callers authenticate (docs/authentication.md); absent in `FrontOptions`: everyone is anonymous. */
export interface AuthOptions {
  /** The URL clients reach Punk at (`PUNK_PUBLIC_URL`): audiences and metadata derive from it. */
  publicUrl: string;
  /** Scope of the admin API in the caller's own tenant; default {@link DEFAULT_ADMIN_SCOPE}. */
  adminScope?: string;
  /** Scope of the admin API in every tenant; default {@link DEFAULT_PLATFORM_ADMIN_SCOPE}. */
  platformAdminScope?: string;
  /** Scopes every MCP request must carry (403 `insufficient_scope` otherwise). Default none. */
  requiredScopes?: string[];
  /** A static platform admin token (at least 32 characters), to create the first API keys. */
  bootstrapAdminKey?: string;
  /** Authorization server issuer: the required `iss`, and `authorization_servers` of the metadata. */
  issuer?: string;
  /** JWKS URL of the issuer (JWT access tokens). */
  jwksUrl?: string;
  /** Least time between two JWKS fetches, in milliseconds (jose's default 30 s when absent). */
  jwksCooldownMs?: number;
  /** A static verification key, PEM or JWK JSON (JWT access tokens). */
  jwtKey?: string;
  /** RFC 7662 introspection endpoint and client credentials (opaque access tokens). */
  introspection?: { url: string; clientId: string; clientSecret: string };
  /** Accepted audiences; default the called endpoint's canonical URL and the public URL (RFC 8707). */
  audiences?: string[];
  /** Accepted JWS algorithms; never `none`. Default RS/PS/ES 256-512 and EdDSA. */
  algorithms?: string[];
  /** Clock skew allowed on token times, in milliseconds. Default 30 s. */
  clockToleranceMs?: number;
  /** Token claim naming the caller's tenant; absent: the front's tenant. */
  tenantClaim?: string;
  /** Token claim holding groups; default `groups`. */
  groupsClaim?: string;
  /** `resource_name` of the metadata. Default `Punk MCP endpoint`. */
  resourceName?: string;
  /**
   * The dashboard's sign-in at `issuer` (`PUNK_DASHBOARD_OAUTH_CLIENT_ID`, `PUNK_DASHBOARD_OAUTH_SCOPES`): its public
   * client id and the scopes it asks for (empty: the admin scope and the required scopes). Needs `issuer`.
   */
  dashboard?: { clientId: string; scopes: string[] };
  /**
   * Punk's own OAuth client at `issuer` (`PUNK_OAUTH_CLIENT_ID`, `PUNK_OAUTH_CLIENT_SECRET`): it exchanges callers' tokens
   * for servers with `spec.auth.tokenExchange` (RFC 8693, token-exchange.ts). Needs `issuer`.
   */
  oauthClient?: { clientId: string; clientSecret: string };
}

const DEFAULT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

/** How a caller authenticated: the bootstrap admin key, an API key, or an OAuth access token. */
export type CredentialKind = 'bootstrap' | 'apiKey' | 'oauth';

/**
 * The caller with how it authenticated (`expiresAt`: an OAuth token's `exp`, in ms since the epoch), or why it is
 * refused.
 */
export type Identification = { ok: true; principal: Principal; kind: CredentialKind; expiresAt?: number } | { ok: false; refusal: Refusal };

/** A front's authenticator. */
export interface Authenticator {
  /** Scope of the admin API in the caller's own tenant (a tenant admin). */
  adminScope: string;
  /** Scope of the admin API in every tenant (a platform admin). */
  platformAdminScope: string;
  /** The API keys (the bus's bucket, or the database of `punk up`). */
  keys: ApiKeyStore;
  /** The RFC 9728 documents (mount at the root). */
  metadata: Router;
  /** URL of the metadata document for the resource at `path` ('' for the public URL). */
  metadataUrl(path: string): string;
  /** The caller of a request, or the refusal (no scope checks beyond the token's own validity and tenant). */
  identify(req: IncomingMessage): Promise<Identification>;
  /**
   * The hook of an MCP endpoint request: the caller when its token is valid, is for this tenant and
   * carries the required scopes; otherwise writes the refusal (401/403/400/503 with its challenge and a
   * JSON-RPC error body) and resolves with null.
   */
  authenticate: (req: IncomingMessage, res: ServerResponse) => Promise<Principal | null>;
  /** The OAuth access token a principal that {@link authenticate} resolved with signed in with; undefined for a key. */
  accessTokenOf: (principal: Principal) => string | undefined;
}

/**
 * Reads the `PUNK_AUTH_*` settings and `PUNK_PUBLIC_URL`: undefined when `PUNK_AUTH_MODE=off`.
 * @throws PunkError `InvalidConfig` naming the variables when `on` lacks `PUNK_PUBLIC_URL`, names more than one
 *   of `PUNK_AUTH_JWKS_URL`, `PUNK_AUTH_JWT_KEY` and `PUNK_AUTH_INTROSPECTION_URL`, introspection lacks its
 *   client credentials, or `PUNK_AUTH_JWT_KEY` cannot be read or fits none of `PUNK_AUTH_ALGORITHMS` (oauth.ts staticKey).
 */
export function authOptionsFromConfig(config: PunkConfig): AuthOptions | undefined {
  if (config.authMode === 'off') return undefined;
  if (!config.publicUrl)
    throw new PunkError(
      'InvalidConfig',
      'PUNK_AUTH_MODE=on needs PUNK_PUBLIC_URL, the URL clients reach Punk at (token audiences and the resource metadata derive from it)',
    );
  const sources = (['authJwksUrl', 'authJwtKey', 'authIntrospectionUrl'] as const).filter((key) => config[key] !== undefined);
  if (sources.length > 1) {
    throw new PunkError(
      'InvalidConfig',
      'set only one of PUNK_AUTH_JWKS_URL, PUNK_AUTH_JWT_KEY and PUNK_AUTH_INTROSPECTION_URL (how OAuth access tokens are verified)',
    );
  }
  if (config.authIntrospectionUrl && (!config.authIntrospectionClientId || !config.authIntrospectionClientSecret)) {
    throw new PunkError(
      'InvalidConfig',
      'PUNK_AUTH_INTROSPECTION_URL needs PUNK_AUTH_INTROSPECTION_CLIENT_ID and PUNK_AUTH_INTROSPECTION_CLIENT_SECRET',
    );
  }
  if (config.dashboardOauthClientId !== undefined && (!config.authIssuer || sources.length === 0)) {
    throw new PunkError(
      'InvalidConfig',
      'PUNK_DASHBOARD_OAUTH_CLIENT_ID needs PUNK_AUTH_ISSUER (the authorization server the dashboard signs in with) and one of PUNK_AUTH_JWKS_URL, PUNK_AUTH_JWT_KEY and PUNK_AUTH_INTROSPECTION_URL (how Punk verifies the tokens it issues)',
    );
  }
  if ((config.oauthClientId === undefined) !== (config.oauthClientSecret === undefined) || (config.oauthClientId && !config.authIssuer)) {
    throw new PunkError(
      'InvalidConfig',
      "PUNK_OAUTH_CLIENT_ID and PUNK_OAUTH_CLIENT_SECRET go together, with PUNK_AUTH_ISSUER: Punk's OAuth client at the issuer, for token exchange (docs/identity.md)",
    );
  }
  // Read the static key now, so a bad one stops start-up before anything runs.
  if (config.authJwtKey !== undefined) staticKey(config.authJwtKey, config.authAlgorithms);
  return {
    publicUrl: config.publicUrl,
    adminScope: config.authAdminScope,
    platformAdminScope: config.authPlatformAdminScope,
    requiredScopes: config.authRequiredScopes,
    ...(config.authBootstrapAdminKey && { bootstrapAdminKey: config.authBootstrapAdminKey }),
    ...(config.authIssuer && { issuer: config.authIssuer }),
    ...(config.authJwksUrl && { jwksUrl: config.authJwksUrl }),
    ...(config.authJwtKey && { jwtKey: config.authJwtKey }),
    ...(config.authIntrospectionUrl && {
      introspection: {
        url: config.authIntrospectionUrl,
        clientId: config.authIntrospectionClientId!,
        clientSecret: config.authIntrospectionClientSecret!,
      },
    }),
    audiences: config.authAudiences,
    algorithms: config.authAlgorithms,
    clockToleranceMs: config.authClockToleranceMs,
    ...(config.authTenantClaim && { tenantClaim: config.authTenantClaim }),
    groupsClaim: config.authGroupsClaim,
    ...(config.oauthClientId && { oauthClient: { clientId: config.oauthClientId, clientSecret: config.oauthClientSecret! } }),
    ...(config.dashboardOauthClientId && {
      dashboard: { clientId: config.dashboardOauthClientId, scopes: config.dashboardOauthScopes },
    }),
  };
}

/**
 * Creates the authenticator of a front of `tenant`; without `keys`, opens bucket `PUNK_API_KEYS`.
 * @throws PunkError `InvalidConfig` for unusable options (bad public URL, static key, `none` algorithm,
 *   several token sources), or the bus's error when the bucket cannot be opened.
 */
export async function createAuthenticator(options: {
  auth: AuthOptions;
  bus: Bus;
  log: Logger;
  tenant: string;
  mcpPath?: string;
  /** Where the API keys are; default the bus's bucket `PUNK_API_KEYS` ({@link ApiKeyStore.open}). */
  keys?: ApiKeyStore;
}): Promise<Authenticator> {
  const { auth, tenant } = options;
  const log = options.log.child({ module: 'auth' });
  let urls: ResourceUrls;
  try {
    urls = new ResourceUrls(auth.publicUrl);
  } catch {
    throw new PunkError('InvalidConfig', `PUNK_PUBLIC_URL: ${JSON.stringify(auth.publicUrl)} is not a URL`);
  }
  if ([auth.jwksUrl, auth.jwtKey, auth.introspection].filter(Boolean).length > 1) {
    throw new PunkError('InvalidConfig', 'configure one way of verifying OAuth access tokens: a JWKS URL, a static key, or introspection');
  }
  const adminScope = auth.adminScope ?? DEFAULT_ADMIN_SCOPE;
  const platformAdminScope = auth.platformAdminScope ?? DEFAULT_PLATFORM_ADMIN_SCOPE;
  /** Why a credential of tenant `other` is refused here: it names both tenants and the scope that would let it in. */
  const foreign = (what: string, other: string) =>
    `${what} is for tenant ${other}, not ${tenant}; acting in another tenant needs the scope ${platformAdminScope} (a platform admin)`;
  const requiredScopes = auth.requiredScopes ?? [];
  const groupsClaim = auth.groupsClaim ?? 'groups';
  const clockToleranceMs = auth.clockToleranceMs ?? 30_000;
  const verifier = oauthVerifier(auth, clockToleranceMs);
  const keys = options.keys ?? (await ApiKeyStore.open(options.bus));
  const bootstrapHash = auth.bootstrapAdminKey === undefined ? undefined : sha256(auth.bootstrapAdminKey);
  const mcpPath = options.mcpPath ?? '/mcp';

  const audiencesFor = (path: string): string[] =>
    auth.audiences && auth.audiences.length > 0 ? auth.audiences : [urls.canonical(path), urls.canonical()];

  /** Each OAuth principal's access token, for token exchange (token-exchange.ts); gone with the principal. */
  const accessTokens = new WeakMap<Principal, string>();
  const principalOf = (claims: TokenClaims): Identification => {
    const subject = stringClaim(claims['sub']) ?? stringClaim(claims['client_id']);
    if (!subject) return refuse(401, 'invalid_token', 'the access token names no subject (sub)');
    const scopes = listClaim(claims['scope'] ?? claims['scp']);
    if (auth.tenantClaim !== undefined && !scopes.includes(platformAdminScope)) {
      const claimed = stringClaim(claims[auth.tenantClaim]);
      if (claimed !== tenant) {
        return refuse(
          403,
          undefined,
          claimed === undefined ? `the access token names no tenant (claim ${auth.tenantClaim})` : foreign('the access token', claimed),
        );
      }
    }
    const exp = claims['exp'];
    return {
      ok: true,
      principal: { subject, tenant, groups: listClaim(claims[groupsClaim]), scopes },
      kind: 'oauth',
      ...(typeof exp === 'number' && { expiresAt: exp * 1000 }),
    };
  };

  const identify = async (req: IncomingMessage): Promise<Identification> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.searchParams.has('access_token'))
      return refuse(400, 'invalid_request', 'access tokens are accepted only in the Authorization header, never in the URL');
    const header = req.headers.authorization;
    const match = header === undefined ? null : /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
    if (!match) {
      return header === undefined || !/^Bearer\b/i.test(header)
        ? refuse(401, undefined, 'authentication required: send Authorization: Bearer <API key or OAuth access token>')
        : refuse(401, 'invalid_token', 'the Authorization header is not a well-formed Bearer token (RFC 6750 §2.1)');
    }
    const token = match[1]!;
    if (bootstrapHash && timingSafeEqual(sha256(token), bootstrapHash)) {
      return {
        ok: true,
        principal: { subject: BOOTSTRAP_ADMIN_SUBJECT, tenant, groups: [], scopes: [adminScope, platformAdminScope] },
        kind: 'bootstrap',
      };
    }
    if (looksLikeApiKey(token)) {
      let key;
      try {
        key = await keys.verify(token);
      } catch (error) {
        log.error({ err: errorMessage(error) }, 'API keys could not be read');
        return refuse(503, undefined, `API keys could not be read: ${errorMessage(error)}`);
      }
      if (!key) return refuse(401, 'invalid_token', 'the API key is unknown or revoked');
      if (key.tenant !== tenant && !key.scopes.includes(platformAdminScope))
        return refuse(403, undefined, foreign('the API key', key.tenant));
      return { ok: true, principal: { subject: `api-key:${key.id}`, tenant, groups: key.groups, scopes: key.scopes }, kind: 'apiKey' };
    }
    if (!verifier) return refuse(401, 'invalid_token', 'the token is not an API key (pk_…), and no OAuth token verifier is configured');
    try {
      const identified = principalOf(await verifier.verify(token, audiencesFor(pathOf(req))));
      if (identified.ok) accessTokens.set(identified.principal, token);
      return identified;
    } catch (error) {
      if (error instanceof PunkError && error.code === 'InvalidToken') return refuse(401, 'invalid_token', error.message);
      log.warn({ err: errorMessage(error) }, 'an access token could not be verified');
      return refuse(503, undefined, `the access token could not be verified now: ${errorMessage(error)}`);
    }
  };

  return {
    adminScope,
    platformAdminScope,
    keys,
    metadata: metadataRouter({
      publicUrl: auth.publicUrl,
      mcpPath,
      authorizationServers: auth.issuer ? [auth.issuer] : [],
      scopes: requiredScopes,
      resourceName: auth.resourceName ?? 'Punk MCP endpoint',
    }),
    metadataUrl: (path) => urls.metadataUrl(path),
    identify,
    accessTokenOf: (principal) => accessTokens.get(principal),
    async authenticate(req, res) {
      const path = pathOf(req);
      const identified = await identify(req);
      let refusal: Refusal;
      if (identified.ok) {
        const missing = requiredScopes.filter((scope) => !identified.principal.scopes?.includes(scope));
        if (missing.length === 0) return identified.principal;
        refusal = {
          status: 403,
          error: 'insufficient_scope',
          message: `the token lacks the scope(s) ${missing.join(', ')}`,
          scopes: requiredScopes,
        };
      } else {
        // A 401 tells the client which scopes to ask the authorization server for (RFC 6750 §3).
        refusal = {
          ...identified.refusal,
          ...(identified.refusal.status === 401 && requiredScopes.length > 0 && { scopes: requiredScopes }),
        };
      }
      log.debug({ path, status: refusal.status, reason: refusal.message }, 'request refused');
      sendMcpRefusal(res, refusal, urls.metadataUrl(path));
      return null;
    },
  };
}

/** The OAuth verifier the options name, if any. */
function oauthVerifier(auth: AuthOptions, clockToleranceMs: number): AccessTokenVerifier | undefined {
  const issuer = auth.issuer === undefined ? {} : { issuer: auth.issuer };
  if (auth.introspection) return introspectionVerifier({ ...auth.introspection, ...issuer, clockToleranceMs });
  const algorithms = auth.algorithms && auth.algorithms.length > 0 ? auth.algorithms : DEFAULT_ALGORITHMS;
  if (auth.jwksUrl) {
    return jwtVerifier({
      source: { jwksUrl: auth.jwksUrl, ...(auth.jwksCooldownMs !== undefined && { cooldownMs: auth.jwksCooldownMs }) },
      ...issuer,
      algorithms,
      clockToleranceMs,
    });
  }
  if (auth.jwtKey) return jwtVerifier({ source: { key: auth.jwtKey }, ...issuer, algorithms, clockToleranceMs });
  return undefined;
}

function refuse(status: Refusal['status'], error: Refusal['error'], message: string): Identification {
  return { ok: false, refusal: { status, ...(error && { error }), message } };
}

/** The path of a request as the app sees it (express's `originalUrl` when mounted under a prefix). */
function pathOf(req: IncomingMessage): string {
  const url = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  return url.split('?')[0]!;
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** A claim holding a list: an array of strings, or one space-separated string (RFC 6749 §3.3 `scope`). */
function listClaim(value: unknown): string[] {
  if (typeof value === 'string') return value.split(' ').filter((s) => s.length > 0);
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}
