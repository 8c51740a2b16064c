/**
 * The refresh of an OAuth 2.0 access token (RFC 6749 §6), and the redemption of an authorization code (§4.1.3), at a token endpoint, with client authentication by
 * HTTP Basic (`client_secret_basic`, RFC 6749 §2.3.1) when the client has a secret, else `client_id` in the body
 * (a public client, RFC 6749 §3.2.1). Errors say what the endpoint answered (its `error` code and description,
 * RFC 6749 §5.2) and never carry a token or a secret.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { PunkError, redact } from '@punk/lib';
import { describeFetchError } from '../pool-fetch.js';

/** What a refresh needs. */
export interface RefreshRequest {
  tokenUrl: string;
  refreshToken: string;
  clientId?: string | undefined;
  clientSecret?: string | undefined;
  /** The access token the credential holds now: not sent, but scrubbed from errors like every secret of the refresh. */
  accessToken?: string | undefined;
  /** Space-separated scopes to ask for (RFC 6749 §3.3); absent: the scopes of the grant. */
  scope?: string | undefined;
  /** Bound on the whole exchange, in milliseconds. */
  timeoutMs: number;
  /** The fetch to use (global `fetch` by default; an egress-guarded one in the gateway). */
  fetch?: FetchLike;
}

/** A successful token response (RFC 6749 §5.1). */
export interface TokenResponse {
  accessToken: string;
  /** A new refresh token when the endpoint rotated it; absent: keep using the old one. */
  refreshToken?: string;
  /** Lifetime of the access token in seconds; absent when the endpoint does not say. */
  expiresIn?: number;
}

/** A failed refresh: `error` is the endpoint's RFC 6749 §5.2 code when it gave one (`invalid_grant` for a revoked grant). */
export class TokenEndpointError extends PunkError {
  readonly error: string | undefined;
  constructor(message: string, error?: string) {
    super('CredentialRefreshFailed', message, error === undefined ? undefined : { error });
    this.error = error;
  }
}

/** `https://host/path` of a token URL, without query (which may carry a secret) or user info. */
export function describeTokenUrl(tokenUrl: string): string {
  const url = new URL(tokenUrl);
  return `${url.origin}${url.pathname}`;
}

/** `application/x-www-form-urlencoded` encoding of one value (what RFC 6749 §2.3.1 applies before Basic). */
function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/**
 * Every spelling in which a secret of `request` could come back in an endpoint's answer or an error: the client
 * secret, refresh and access tokens, and the HTTP Basic credential (the `Authorization` value, its base64 and its
 * decoded `client_id:client_secret` form), each raw, form-encoded and percent-encoded. Longest first, so a longer
 * spelling is replaced before a secret inside it.
 */
export function refreshSecrets(request: Pick<RefreshRequest, 'refreshToken' | 'clientId' | 'clientSecret' | 'accessToken'>): string[] {
  const spellings = new Set<string>();
  const add = (value: string | undefined) => {
    if (!value) return;
    for (const spelling of [value, formEncode(value), encodeURIComponent(value)]) spellings.add(spelling);
  };
  add(request.refreshToken);
  add(request.accessToken);
  add(request.clientSecret);
  if (request.clientSecret !== undefined && request.clientId !== undefined) {
    const decoded = `${formEncode(request.clientId)}:${formEncode(request.clientSecret)}`;
    add(decoded);
    add(`${request.clientId}:${request.clientSecret}`);
    add(basicCredential(request.clientId, request.clientSecret));
  }
  return [...spellings].sort((a, b) => b.length - a.length);
}

/** The `client_secret_basic` credential (RFC 6749 §2.3.1): base64 of the form-encoded `client_id:client_secret`. */
function basicCredential(clientId: string, clientSecret: string): string {
  return Buffer.from(`${formEncode(clientId)}:${formEncode(clientSecret)}`).toString('base64');
}

/**
 * POSTs `grant_type=refresh_token` to the token endpoint and parses its answer.
 * @throws TokenEndpointError (PunkError `CredentialRefreshFailed`) when the endpoint cannot be reached, does not
 *   answer within `timeoutMs`, answers with an error (its code and description in the message; `error` set), or
 *   answers 200 with something other than a bearer token response.
 */
export async function refreshAccessToken(request: RefreshRequest): Promise<TokenResponse> {
  const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: request.refreshToken });
  if (request.scope !== undefined) form.set('scope', request.scope);
  return tokenRequest(form, request, refreshSecrets(request));
}

/** What redeeming an authorization code needs (RFC 6749 §4.1.3, with the PKCE `code_verifier` of RFC 7636 §4.5). */
export interface CodeRequest extends Omit<RefreshRequest, 'refreshToken' | 'accessToken' | 'scope'> {
  code: string;
  codeVerifier: string;
  /** The `redirect_uri` the authorization request named. */
  redirectUri: string;
}

/**
 * POSTs `grant_type=authorization_code` to the token endpoint, with client authentication as a refresh does.
 * @throws TokenEndpointError as {@link refreshAccessToken} does (`error` the endpoint's code, e.g. `invalid_grant`).
 */
export async function redeemAuthorizationCode(request: CodeRequest): Promise<TokenResponse> {
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code: request.code,
    redirect_uri: request.redirectUri,
    code_verifier: request.codeVerifier,
  });
  const secrets = refreshSecrets({ refreshToken: request.code, clientId: request.clientId, clientSecret: request.clientSecret });
  return tokenRequest(form, request, [...secrets, request.codeVerifier]);
}

/** POSTs `form` to `request.tokenUrl` with client authentication and parses the token response; `secrets` are scrubbed from errors. */
async function tokenRequest(
  form: URLSearchParams,
  request: Pick<RefreshRequest, 'tokenUrl' | 'clientId' | 'clientSecret' | 'timeoutMs' | 'fetch'>,
  secrets: string[],
): Promise<TokenResponse> {
  const where = describeTokenUrl(request.tokenUrl);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  if (request.clientSecret !== undefined && request.clientId !== undefined) {
    headers.authorization = `Basic ${basicCredential(request.clientId, request.clientSecret)}`;
  } else if (request.clientId !== undefined) {
    form.set('client_id', request.clientId);
  }
  let response: Response;
  let text: string;
  try {
    response = await (request.fetch ?? fetch)(request.tokenUrl, {
      method: 'POST',
      headers,
      body: form.toString(),
      redirect: 'error',
      signal: AbortSignal.timeout(request.timeoutMs),
    });
    text = await response.text();
  } catch (error) {
    const reason =
      error instanceof Error && error.name === 'TimeoutError'
        ? `did not answer within ${request.timeoutMs} ms`
        : `could not be reached: ${describeFetchError(error)}`;
    throw new TokenEndpointError(redact(`the token endpoint ${where} ${reason}`, secrets));
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const fields = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  if (!response.ok) {
    if (typeof fields.error === 'string') {
      const description =
        typeof fields.error_description === 'string' ? `: ${redact(fields.error_description, secrets).slice(0, 300)}` : '';
      // The error code is the endpoint's text too: it must not carry a secret either.
      const code = redact(fields.error, secrets).slice(0, 100);
      const hint =
        fields.error === 'invalid_grant' && form.get('grant_type') === 'refresh_token'
          ? ' (the refresh token was revoked, expired or already used: store the credential again with a new grant)'
          : '';
      throw new TokenEndpointError(`the token endpoint ${where} answered HTTP ${response.status} ${code}${description}${hint}`, code);
    }
    throw new TokenEndpointError(`the token endpoint ${where} answered HTTP ${response.status} without an OAuth error`);
  }
  if (typeof fields.access_token !== 'string' || fields.access_token === '') {
    throw new TokenEndpointError(`the token endpoint ${where} answered HTTP ${response.status} without an access_token (RFC 6749 §5.1)`);
  }
  if (fields.token_type !== undefined && (typeof fields.token_type !== 'string' || fields.token_type.toLowerCase() !== 'bearer')) {
    throw new TokenEndpointError(
      `the token endpoint ${where} issued a token of type ${JSON.stringify(fields.token_type).slice(0, 40)}, not Bearer`,
    );
  }
  const expiresIn = typeof fields.expires_in === 'string' ? Number(fields.expires_in) : fields.expires_in;
  const tokens: TokenResponse = { accessToken: fields.access_token };
  if (typeof fields.refresh_token === 'string' && fields.refresh_token !== '') tokens.refreshToken = fields.refresh_token;
  if (typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0) tokens.expiresIn = expiresIn;
  return tokens;
}
