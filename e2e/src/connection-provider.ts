/**
 * A real OAuth 2.0 provider for the per-user connection tests: panva's `oidc-provider` on a free loopback port, with
 * one confidential client (Punk's, `client_secret_basic`) allowed the authorization code grant with PKCE and refresh
 * tokens (rotated at each refresh), its development login and consent pages driven over HTTP ({@link
 * ConnectionProvider.authorize}), and short-lived access tokens so that each call refreshes. A test can ask whose an
 * access token is, and revoke a user's grant (their refresh token then answers `invalid_grant`).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

/** A running provider. */
export interface ConnectionProvider {
  issuer: string;
  authorizationUrl: string;
  tokenUrl: string;
  /** Logs `user` in at the development login, consents, and returns the redirect back to Punk (`redirect_uri?code=&state=`). */
  authorize(authorizationUrl: string, user: string): Promise<URL>;
  /** The user an access token was issued to, or undefined when the provider does not know it. */
  subjectOf(accessToken: string): Promise<string | undefined>;
  /** Revokes every grant of `user`: their refresh tokens answer `invalid_grant` from now on. */
  revoke(user: string): Promise<void>;
  /** How many refresh_token grants it answered with tokens. */
  readonly refreshes: number;
  close(): Promise<void>;
}

/** Starts the provider with Punk's client `clientId`/`clientSecret` and `redirectUri`; access tokens last `accessTokenTtl` seconds. */
export async function startConnectionProvider(options: {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  accessTokenTtl: number;
}): Promise<ConnectionProvider> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: options.clientId,
        client_secret: options.clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        id_token_signed_response_alg: 'ES256',
      },
    ],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), alg: 'ES256', use: 'sig', kid: 'test-key' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    pkce: { required: () => true },
    ttl: { AccessToken: options.accessTokenTtl, RefreshToken: 3600, Grant: 3600, Session: 3600, Interaction: 600 },
    // Every client of the grant gets a refresh token (no offline_access consent dance in the test).
    issueRefreshToken: (_ctx, client) => Promise.resolve(client.grantTypeAllowed('refresh_token')),
    rotateRefreshToken: true,
    findAccount: (_ctx, sub) => Promise.resolve({ accountId: sub, claims: () => Promise.resolve({ sub }) }),
    features: { devInteractions: { enabled: true } },
  });
  const grants = new Map<string, Set<string>>();
  let refreshes = 0;
  provider.on('grant.success', (ctx) => {
    const token = ctx.oidc.entities.AccessToken as { accountId?: string; grantId?: string } | undefined;
    if (token?.accountId && token.grantId) grants.set(token.accountId, (grants.get(token.accountId) ?? new Set()).add(token.grantId));
    if ((ctx.oidc.params as { grant_type?: string }).grant_type === 'refresh_token') refreshes++;
  });
  server.on('request', provider.callback());

  return {
    issuer,
    authorizationUrl: `${issuer}/auth`,
    tokenUrl: `${issuer}/token`,
    get refreshes() {
      return refreshes;
    },
    async authorize(authorizationUrl, user) {
      const cookies = new Map<string, string>();
      const keep = (response: Response) => {
        for (const line of response.headers.getSetCookie()) {
          const [pair] = line.split(';');
          const eq = pair!.indexOf('=');
          cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
        }
      };
      const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
      let url = new URL(authorizationUrl);
      for (let step = 0; step < 12; step++) {
        if (url.href.startsWith(options.redirectUri)) return url;
        let response = await fetch(url, { headers: { cookie: cookie() }, redirect: 'manual' });
        keep(response);
        if (url.pathname.startsWith('/interaction/') && response.status === 200) {
          const page = await response.text();
          const prompt = /name="prompt" value="(\w+)"/.exec(page)?.[1] ?? (page.includes('name="login"') ? 'login' : 'consent');
          response = await fetch(url, {
            method: 'POST',
            headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams(prompt === 'login' ? { prompt, login: user, password: 'any' } : { prompt }),
            redirect: 'manual',
          });
          keep(response);
        }
        const location = response.headers.get('location');
        if (!location) throw new Error(`the provider answered HTTP ${response.status} at ${url.pathname}: ${await response.text()}`);
        url = new URL(location, url);
      }
      throw new Error('the provider did not redirect back');
    },
    async subjectOf(accessToken) {
      const token = await provider.AccessToken.find(accessToken);
      return token?.accountId;
    },
    async revoke(user) {
      for (const id of grants.get(user) ?? []) await (await provider.Grant.find(id))?.destroy();
      for (const id of grants.get(user) ?? []) await provider.RefreshToken.revokeByGrantId(id);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
