/**
 * Verification of OAuth 2.1 access tokens (draft-ietf-oauth-v2-1 §5.2, MCP 2025-11-25
 * basic/authorization "Token Handling") in one of three ways:
 *
 * - JWT access tokens (RFC 9068) signed by a key of the issuer's JWKS (`createRemoteJWKSet`: the set is
 *   cached and fetched again when a token names an unknown `kid`, so key rotation needs no restart);
 * - JWT access tokens signed by one static key (PEM SPKI, or a JWK; an `oct` JWK is an HMAC secret);
 * - opaque tokens, through RFC 7662 token introspection with client credentials (HTTP Basic, RFC 6749 §2.3.1).
 *
 * Every way checks the audience (RFC 8707: the caller passes the accepted audiences), the issuer when one
 * is configured, and expiry with a clock tolerance; JWTs only with an allowed algorithm (never `none`).
 */
import { createPublicKey, createSecretKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import type * as Jose from 'jose';
import { errorMessage, PunkError } from '@punk/lib';

/** The claims of a verified access token (JWT claims, or the RFC 7662 introspection response). */
export type TokenClaims = Record<string, unknown>;

/** Verifies access tokens. */
export interface AccessTokenVerifier {
  /**
   * Verifies `token` for one of `audiences` and resolves with its claims.
   * @throws PunkError `InvalidToken` (a sentence naming what is wrong: expired, audience, issuer, signature,
   *   algorithm, inactive) or `TokenVerifierUnavailable` (the JWKS or introspection endpoint did not answer).
   */
  verify(token: string, audiences: readonly string[]): Promise<TokenClaims>;
}

/** Where JWT verification keys come from. */
export type JwtKeySource =
  | { jwksUrl: string; /** Least time between two JWKS fetches, in milliseconds (jose's default 30 s). */ cooldownMs?: number }
  | { key: string };

/** Options of {@link jwtVerifier}. */
export interface JwtVerifierOptions {
  source: JwtKeySource;
  /** Required `iss`; unchecked when absent. */
  issuer?: string;
  /** Accepted JWS `alg` values. */
  algorithms: readonly string[];
  /** Clock skew allowed on `exp`, `nbf` and `iat`, in milliseconds. */
  clockToleranceMs: number;
}

/**
 * A verifier of JWT access tokens.
 * @throws PunkError `InvalidConfig` when a static key cannot be read or `algorithms` names `none`.
 */
export function jwtVerifier(options: JwtVerifierOptions): AccessTokenVerifier {
  if (options.algorithms.some((alg) => alg.toLowerCase() === 'none'))
    throw new PunkError('InvalidConfig', 'the JWT algorithm allow-list must not contain none');
  const { source } = options;
  let verifyJwt: (token: string, checks: Jose.JWTVerifyOptions) => Promise<{ payload: Jose.JWTPayload }>;
  if ('jwksUrl' in source) {
    const jwksUrl = new URL(source.jwksUrl);
    // One key set (and its cache of fetched keys) for every token, made with the first.
    let jwks: ReturnType<typeof Jose.createRemoteJWKSet> | undefined;
    verifyJwt = async (token, checks) => {
      const { createRemoteJWKSet, jwtVerify } = await loadJose();
      jwks ??= createRemoteJWKSet(jwksUrl, source.cooldownMs === undefined ? {} : { cooldownDuration: source.cooldownMs });
      return jwtVerify(token, jwks, checks);
    };
  } else {
    const key = staticKey(source.key, options.algorithms);
    verifyJwt = async (token, checks) => (await loadJose()).jwtVerify(token, key, checks);
  }
  return {
    async verify(token, audiences) {
      const { errors } = await loadJose();
      try {
        const { payload } = await verifyJwt(token, {
          algorithms: [...options.algorithms],
          audience: [...audiences],
          clockTolerance: options.clockToleranceMs / 1000,
          requiredClaims: ['exp'],
          ...(options.issuer !== undefined && { issuer: options.issuer }),
        });
        return payload;
      } catch (error) {
        throw jwtFailure(error, errors);
      }
    },
  };
}

/** jose (about 45 modules), loaded with the first token verified: a start without OAuth needs none of it. */
function loadJose(): Promise<typeof Jose> {
  return (jose ??= import('jose'));
}
let jose: Promise<typeof Jose> | undefined;

/** JWS algorithms of HMAC secrets (RFC 7518 §3.2): the only ones an `oct` key verifies. */
const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'];

/**
 * Reads `PUNK_AUTH_JWT_KEY`: PEM (SPKI or certificate), or a JWK as JSON (an `oct` JWK is an HMAC secret),
 * and checks that `algorithms` (`PUNK_AUTH_ALGORITHMS`) can use it, since a key no accepted algorithm fits
 * would silently refuse every token.
 * @throws PunkError `InvalidConfig` when the key cannot be read, or no accepted algorithm fits its type
 *   (an HMAC secret needs HS256, HS384 or HS512; a public key an asymmetric algorithm).
 */
export function staticKey(text: string, algorithms: readonly string[]): KeyObject {
  const key = readStaticKey(text);
  const hmac = algorithms.filter((alg) => HMAC_ALGORITHMS.includes(alg));
  if (key.type === 'secret' && hmac.length === 0) {
    throw new PunkError(
      'InvalidConfig',
      `PUNK_AUTH_JWT_KEY is an oct (HMAC) key, but PUNK_AUTH_ALGORITHMS (${algorithms.join(',')}) names none of ${HMAC_ALGORITHMS.join(', ')}, so no token would ever verify: set PUNK_AUTH_ALGORITHMS=HS256 (or HS384, HS512)`,
    );
  }
  if (key.type !== 'secret' && hmac.length === algorithms.length) {
    throw new PunkError(
      'InvalidConfig',
      `PUNK_AUTH_JWT_KEY is a public key, but PUNK_AUTH_ALGORITHMS (${algorithms.join(',')}) names only HMAC algorithms, so no token would ever verify: name the key's algorithm (such as RS256 or ES256)`,
    );
  }
  return key;
}

function readStaticKey(text: string): KeyObject {
  try {
    const trimmed = text.trim();
    if (!trimmed.startsWith('{')) return createPublicKey(trimmed);
    const jwk = JSON.parse(trimmed) as { kty?: unknown; k?: unknown };
    if (jwk.kty === 'oct') {
      if (typeof jwk.k !== 'string') throw new Error('an oct JWK needs "k"');
      return createSecretKey(Buffer.from(jwk.k, 'base64url'));
    }
    return createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  } catch (error) {
    throw new PunkError('InvalidConfig', `PUNK_AUTH_JWT_KEY: not a PEM public key or a JWK: ${errorMessage(error)}`);
  }
}

/** A jose failure as `InvalidToken` (the token's fault) or `TokenVerifierUnavailable` (the JWKS endpoint's). */
function jwtFailure(error: unknown, errors: typeof Jose.errors): PunkError {
  if (error instanceof errors.JWTExpired) return invalid('the access token expired');
  if (error instanceof errors.JWTClaimValidationFailed) {
    const claim = error.claim;
    if (claim === 'aud') return invalid('the access token is not meant for this resource (aud does not name it)');
    if (claim === 'iss') return invalid('the access token was issued by another authorization server (iss)');
    return invalid(`the access token's ${claim} claim is not valid: ${error.reason}`);
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return invalid('the access token is signed with an algorithm that is not accepted');
  if (error instanceof errors.JWSSignatureVerificationFailed) return invalid('the access token signature does not verify');
  if (error instanceof errors.JWKSNoMatchingKey) return invalid("no key of the issuer's JWKS matches the access token's kid");
  if (error instanceof errors.JWKSTimeout || error instanceof errors.JWKSInvalid) {
    return new PunkError('TokenVerifierUnavailable', `the issuer's JWKS could not be read: ${error.message}`);
  }
  if (error instanceof errors.JOSEError) return invalid(`the access token is malformed: ${error.message}`);
  return new PunkError('TokenVerifierUnavailable', `the issuer's JWKS could not be read: ${errorMessage(error)}`);
}

function invalid(message: string): PunkError {
  return new PunkError('InvalidToken', message);
}

/** Options of {@link introspectionVerifier}. */
export interface IntrospectionOptions {
  /** The RFC 7662 introspection endpoint. */
  url: string;
  clientId: string;
  clientSecret: string;
  /** Required `iss` when the response states one; unchecked when absent. */
  issuer?: string;
  /** Clock skew allowed on `exp` and `nbf`, in milliseconds. */
  clockToleranceMs: number;
  /** Deadline of one introspection request, in milliseconds. Default 5 s. */
  timeoutMs?: number;
}

/**
 * The `Authorization` header of Punk as an OAuth client at its issuer's endpoints (introspection, token exchange):
 * HTTP Basic with the client id and secret, each URL-encoded first (RFC 6749 §2.3.1).
 */
export function clientAuthorization(clientId: string, clientSecret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`;
}

/**
 * A verifier of opaque access tokens through RFC 7662 introspection: the token must be `active`, not
 * expired, its `aud` must name an accepted audience (a response without `aud` is refused: fail closed),
 * and its `iss`, when present, the configured issuer.
 */
export function introspectionVerifier(options: IntrospectionOptions): AccessTokenVerifier {
  const authorization = clientAuthorization(options.clientId, options.clientSecret);
  return {
    async verify(token, audiences) {
      let response: Response;
      try {
        response = await fetch(options.url, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
          signal: AbortSignal.timeout(options.timeoutMs ?? 5_000),
        });
      } catch (error) {
        throw new PunkError('TokenVerifierUnavailable', `the introspection endpoint ${options.url} did not answer: ${errorMessage(error)}`);
      }
      if (response.status !== 200) {
        throw new PunkError('TokenVerifierUnavailable', `the introspection endpoint ${options.url} answered HTTP ${response.status}`);
      }
      let claims: TokenClaims;
      try {
        claims = (await response.json()) as TokenClaims;
      } catch (error) {
        throw new PunkError(
          'TokenVerifierUnavailable',
          `the introspection endpoint ${options.url} answered no JSON: ${errorMessage(error)}`,
        );
      }
      if (typeof claims !== 'object' || claims === null || claims['active'] !== true)
        throw invalid('the access token is not active (revoked, expired or unknown)');
      const now = Date.now();
      const exp = claims['exp'];
      if (typeof exp === 'number' && exp * 1000 + options.clockToleranceMs <= now) throw invalid('the access token expired');
      const nbf = claims['nbf'];
      if (typeof nbf === 'number' && nbf * 1000 - options.clockToleranceMs > now) throw invalid('the access token is not valid yet (nbf)');
      const iss = claims['iss'];
      if (options.issuer !== undefined && iss !== undefined && iss !== options.issuer)
        throw invalid('the access token was issued by another authorization server (iss)');
      const aud = claims['aud'];
      const stated = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud.filter((a): a is string => typeof a === 'string') : [];
      if (!stated.some((a) => audiences.includes(a)))
        throw invalid('the access token is not meant for this resource (aud does not name it)');
      return claims;
    },
  };
}
