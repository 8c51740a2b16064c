/**
 * A real OAuth 2.0 authorization server for the dashboard's sign-in tests: panva's `oidc-provider` on a free
 * loopback port, with its development login (any login name and password, {@link logInAtIssuer}) and consent pages,
 * one public client for the dashboard (PKCE required, token endpoint auth `none`) and Punk as its one resource server
 * (RFC 8707): access tokens for `resource` are ES256 JWTs (RFC 9068) with `aud` the resource and the `punk:admin`
 * scope, verified by Punk through the server's JWKS.
 *
 * The server listens before the client is known ({@link startAuthorizationServer}), since Punk's address (the
 * redirect URI's origin) is known only once Punk runs with the issuer's URL; {@link AuthorizationServer.register}
 * then creates the provider.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider, { errors } from 'oidc-provider';
import type { Page } from 'playwright-core';

/** A running authorization server. */
export interface AuthorizationServer {
  /** Its issuer identifier, `http://127.0.0.1:<port>` (as `iss` and its RFC 8414 metadata say it). */
  issuer: string;
  /** Its JWKS, for `PUNK_AUTH_JWKS_URL`. */
  jwksUrl: string;
  /**
   * Registers the dashboard's public client `clientId` with `redirectUri`, for tokens of `resource`; starts
   * answering. `accessTokenTtl()` is read at each token's issue, in seconds.
   */
  register(options: { clientId: string; redirectUri: string; resource: string; accessTokenTtl: () => number }): Promise<void>;
  close(): Promise<void>;
}

/** The scope the access tokens grant (Punk's default admin scope). */
export const GRANTED_SCOPE = 'punk:admin';

/** Starts listening on a free loopback port; answers 503 until {@link AuthorizationServer.register}. */
export async function startAuthorizationServer(): Promise<AuthorizationServer> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => void res.writeHead(503).end('no client yet');
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    async register({ clientId, redirectUri, resource, accessTokenTtl }) {
      const { privateKey } = await generateKeyPair('ES256', { extractable: true });
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: clientId,
            token_endpoint_auth_method: 'none',
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
            // The server's one key is ES256 (the default, RS256, would need an RSA key).
            id_token_signed_response_alg: 'ES256',
          },
        ],
        jwks: { keys: [{ ...(await exportJWK(privateKey)), alg: 'ES256', use: 'sig', kid: 'test-key' }] },
        cookies: { keys: [randomBytes(32).toString('hex')] },
        ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: () => accessTokenTtl() },
        // CORS on the token endpoint for the dashboard's origin only.
        clientBasedCORS: (_ctx, origin) => origin === new URL(redirectUri).origin,
        findAccount: (_ctx, sub) => Promise.resolve({ accountId: sub, claims: () => Promise.resolve({ sub }) }),
        features: {
          devInteractions: { enabled: true },
          resourceIndicators: {
            enabled: true,
            defaultResource: () => resource,
            useGrantedResource: () => true,
            getResourceServerInfo: (_ctx, indicator) => {
              if (indicator !== resource) throw new errors.InvalidTarget(`no resource server ${indicator}`);
              return {
                scope: GRANTED_SCOPE,
                audience: resource,
                accessTokenTTL: accessTokenTtl(),
                accessTokenFormat: 'jwt',
                jwt: { sign: { alg: 'ES256' } },
              };
            },
          },
        },
      });
      handler = provider.callback();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Logs in as `login` at the development login (any name and password) of the oidc-provider at `issuer` once the
 * page is there, and consents when it asks (a grant of nothing beyond the login may send the browser straight back):
 * this server's, or the per-user connections' provider (e2e/src/connection-provider.ts).
 */
export async function logInAtIssuer(page: Page, issuer: string, login: string): Promise<void> {
  await page.waitForURL((url) => url.href.startsWith(issuer));
  await page.getByPlaceholder('Enter any login').fill(login);
  await page.getByPlaceholder('and password').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  const consent = page.getByRole('button', { name: 'Continue' });
  await Promise.race([consent.waitFor(), page.waitForURL((url) => !url.href.startsWith(issuer))]);
  if (page.url().startsWith(issuer)) await consent.click();
}
