/**
 * The dashboard's OAuth sign-in: the authorization code grant (RFC 6749 §4.1) with PKCE S256 (RFC 7636) and
 * `state`, as a public client (no secret) of the issuer Punk names in `/ui/config.json`, asking for a token for
 * Punk (RFC 8707 `resource`). The protocol is oauth4webapi's (panva), not hand-rolled: discovery of the issuer's
 * RFC 8414 metadata, the verifier and challenge, the callback's checks (`state`, `iss` when the server sends it,
 * RFC 9207) and the code's exchange at the token endpoint, straight from the browser (the page's CSP allows the
 * issuer's origin in `connect-src`). The verifier and `state` wait in `sessionStorage` while the browser is at
 * the authorization server, and are removed on return.
 */
import * as oauth from 'oauth4webapi';
import type { DashboardConfig } from './api.js';
import { BASE } from './router.js';

/** The OAuth part of the dashboard's configuration. */
export type OAuthConfig = NonNullable<DashboardConfig['oauth']>;

/** The path below /ui the authorization server sends the browser back to. */
export const CALLBACK_PATH = 'signed-in';

const PENDING = 'punk.oauth.pending';

/** What waits in `sessionStorage` while the browser is at the authorization server. */
interface Pending {
  verifier: string;
  state: string;
  /** The dashboard path to return to once signed in. */
  returnTo: string;
}

/** The redirect URI to register for the dashboard's client: this origin's `/ui/signed-in`. */
export function redirectUri(): string {
  return `${location.origin}${BASE}/${CALLBACK_PATH}`;
}

/** Whether `issuer` is on this machine: only there is plain http accepted (as RFC 8252 §7.3 does for redirects). */
function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '127.0.0.1' || url.hostname === '[::1]';
}

/**
 * The issuer's RFC 8414 metadata (`/.well-known/oauth-authorization-server`), checked to name that issuer.
 * @throws Error naming the issuer and what failed (unreachable, not OAuth metadata, another issuer).
 */
async function discover(config: OAuthConfig): Promise<{ as: oauth.AuthorizationServer; http: { [oauth.allowInsecureRequests]: boolean } }> {
  const issuer = new URL(config.issuer);
  const http = { [oauth.allowInsecureRequests]: isLoopback(issuer) };
  try {
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...http }));
    return { as, http };
  } catch (error) {
    throw new Error(`The sign-in server ${config.issuer} could not be read (${reasonOf(error)}): is PUNK_AUTH_ISSUER right?`, {
      cause: error,
    });
  }
}

/** The reason of an oauth4webapi failure, for a person: the server's `error_description` when it sent one. */
function reasonOf(error: unknown): string {
  if (error instanceof oauth.ResponseBodyError) return error.error_description ?? error.error;
  if (error instanceof oauth.AuthorizationResponseError) return error.error_description ?? error.error;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Sends the browser to the issuer's authorization endpoint: response type `code`, PKCE S256, a fresh `state`,
 * the configured scopes and Punk as `resource`. Resolves never (the page unloads).
 * @throws Error when the issuer's metadata cannot be read or names no authorization endpoint.
 */
export async function startSignIn(config: OAuthConfig, returnTo: string): Promise<void> {
  const { as } = await discover(config);
  if (!as.authorization_endpoint) throw new Error(`The sign-in server ${config.issuer} names no authorization_endpoint in its metadata.`);
  const pending: Pending = { verifier: oauth.generateRandomCodeVerifier(), state: oauth.generateRandomState(), returnTo };
  const url = new URL(as.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: config.clientId,
    redirect_uri: redirectUri(),
    scope: config.scopes.join(' '),
    state: pending.state,
    code_challenge: await oauth.calculatePKCECodeChallenge(pending.verifier),
    code_challenge_method: 'S256',
    resource: config.resource,
  }).toString();
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  location.assign(url.href);
  await new Promise(() => undefined);
}

/**
 * Finishes the sign-in on the redirect back (`/ui/signed-in?code=…&state=…`): checks the answer against the
 * kept `state`, exchanges the code with the verifier at the token endpoint, and resolves with the access token
 * and the path to go back to. The kept state is removed whatever happens.
 * @throws Error for a sign-in the server refused (its `error_description`), a `state` that does not match (a
 *   callback this tab did not ask for), or a failed exchange.
 */
export async function finishSignIn(config: OAuthConfig, callback: URL): Promise<{ accessToken: string; returnTo: string }> {
  const kept = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  if (!kept) throw new Error('This sign-in was not started in this tab (or was already finished): sign in again.');
  const pending = JSON.parse(kept) as Pending;
  const { as, http } = await discover(config);
  const client: oauth.Client = { client_id: config.clientId };
  let params: URLSearchParams;
  try {
    params = oauth.validateAuthResponse(as, client, callback, pending.state);
  } catch (error) {
    throw new Error(`The sign-in was refused by ${config.issuer}: ${reasonOf(error)}.`, { cause: error });
  }
  try {
    const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri(), pending.verifier, {
      ...http,
      additionalParameters: { resource: config.resource },
    });
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, response);
    return { accessToken: tokens.access_token, returnTo: pending.returnTo };
  } catch (error) {
    throw new Error(`The sign-in server ${config.issuer} did not give a token: ${reasonOf(error)}.`, { cause: error });
  }
}
