/**
 * A real OAuth 2.0 authorization server for the token exchange tests: panva's `oidc-provider` on a free loopback
 * port, with
 *
 * - one confidential client per test user (`client_credentials`): its access tokens for `resource` (RFC 8707) are
 *   ES256 JWTs (RFC 9068) whose subject is the client id, which Punk takes as the caller's subject;
 * - Punk's own confidential client, allowed the RFC 8693 token exchange grant (`provider.registerGrantType`): the
 *   grant verifies the `subject_token` with the server's own key, refuses an `audience` it does not know with
 *   `invalid_target` and one listed in `refusedAudiences` with `invalid_grant`, and issues an ES256 JWT of the
 *   `audience`, for the subject token's subject, with the asked `scope` and an `act` claim naming Punk (RFC 8693 §4.1).
 *
 * It counts the exchanges it answers, so a test can tell a cached token from a new one.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import Provider, { errors } from 'oidc-provider';

/** `grant_type` of RFC 8693. */
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** A running authorization server. */
export interface TokenExchangeIssuer {
  issuer: string;
  jwksUrl: string;
  /** An access token for `resource` of the user client `user` (one of `users`), from the token endpoint. */
  userToken(user: string): Promise<string>;
  /** How many token exchanges it answered with a token. */
  readonly exchanges: number;
  close(): Promise<void>;
}

/** Options of {@link startTokenExchangeIssuer}. */
export interface IssuerOptions {
  /** The resource the users' tokens are for (Punk's `PUNK_PUBLIC_URL`). */
  resource: string;
  /** The user clients (their ids are the subjects); each one's secret is `<id>-secret`. */
  users: string[];
  /** Punk's own client. */
  punk: { clientId: string; clientSecret: string };
  /** Audiences the exchange issues tokens for. */
  audiences: string[];
  /** Audiences the exchange refuses with `invalid_grant`. */
  refusedAudiences: string[];
  /** Lifetime of exchanged tokens, in seconds. */
  exchangedTokenTtl: number;
}

/** Starts the server on a free loopback port. */
export async function startTokenExchangeIssuer(options: IssuerOptions): Promise<TokenExchangeIssuer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const secretOf = (user: string) => `${user}-secret`;
  const provider = new Provider(issuer, {
    clients: [
      ...options.users.map((user) => ({
        client_id: user,
        client_secret: secretOf(user),
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        id_token_signed_response_alg: 'ES256' as const,
      })),
      {
        client_id: options.punk.clientId,
        client_secret: options.punk.clientSecret,
        grant_types: [TOKEN_EXCHANGE],
        redirect_uris: [],
        response_types: [],
        id_token_signed_response_alg: 'ES256' as const,
      },
    ],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), alg: 'ES256', use: 'sig', kid: 'test-key' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    features: {
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => options.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== options.resource) throw new errors.InvalidTarget(`no resource server ${indicator}`);
          return {
            scope: 'mcp',
            audience: options.resource,
            accessTokenTTL: 600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          };
        },
      },
    },
  });
  let exchanges = 0;
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    async (ctx) => {
      const params = ctx.oidc.params as Record<string, string | undefined>;
      if (params['subject_token_type'] !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest('subject_token_type must be an access token');
      const audience = params['audience'] ?? '';
      if (options.refusedAudiences.includes(audience))
        throw new errors.InvalidGrant(`no tokens for ${audience} are issued to ${ctx.oidc.client!.clientId}`);
      if (!options.audiences.includes(audience)) throw new errors.InvalidTarget(`unknown audience ${audience}`);
      let subject: string;
      try {
        const { payload } = await jwtVerify(params['subject_token'] ?? '', publicKey, { issuer, audience: options.resource });
        subject = (payload.sub ?? payload['client_id']) as string;
      } catch (error) {
        throw new errors.InvalidGrant(`the subject_token is not valid: ${(error as Error).message}`);
      }
      const accessToken = await new SignJWT({
        scope: params['scope'] ?? '',
        client_id: ctx.oidc.client!.clientId,
        act: { sub: ctx.oidc.client!.clientId },
      })
        .setProtectedHeader({ alg: 'ES256', kid: 'test-key', typ: 'at+jwt' })
        .setIssuer(issuer)
        .setSubject(subject)
        .setAudience(audience)
        .setIssuedAt()
        .setJti(randomBytes(8).toString('hex'))
        .setExpirationTime(`${options.exchangedTokenTtl}s`)
        .sign(privateKey);
      exchanges++;
      ctx.body = {
        access_token: accessToken,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: 'Bearer',
        expires_in: options.exchangedTokenTtl,
        ...(params['scope'] && { scope: params['scope'] }),
      };
    },
    ['subject_token', 'subject_token_type', 'audience', 'scope', 'requested_token_type', 'resource', 'actor_token', 'actor_token_type'],
  );
  server.on('request', provider.callback());
  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    get exchanges() {
      return exchanges;
    },
    async userToken(user) {
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${user}:${secretOf(user)}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource: options.resource, scope: 'mcp' }),
      });
      const answer = (await response.json()) as { access_token?: string };
      if (!response.ok || !answer.access_token) throw new Error(`no token for ${user}: HTTP ${response.status} ${JSON.stringify(answer)}`);
      return answer.access_token;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
