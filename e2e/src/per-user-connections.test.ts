/**
 * Per-user connections (`spec.auth.perUser`, docs/identity.md) on a real `punk up` and `punk cluster`: users signed in
 * with OAuth tokens of one authorization server (token-exchange-issuer.ts) connect their own account at another, a real
 * `oidc-provider` (connection-provider.ts), through `POST /api/v1/connections/...` and `/connect/callback`; each call
 * reaches the upstream (an HTTP MCP server echoing the headers it got) with that user's own token, refreshed by the
 * vault; a user who has not connected gets a URL elicitation (a 2025-11-25 client declaring `url` mode) or a tool error
 * naming the connect page; a callback from another browser connects nothing; a revoked refresh token surfaces once;
 * disconnecting deletes the tokens and is on the ledger; API keys are refused; the ledger names the identities.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { connectClient, textOf } from './clients.js';
import { startConnectionProvider, type ConnectionProvider } from './connection-provider.js';
import { scratchDatabase } from './distributed.js';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { createApiKey, eventually, manifestDir, removeDir, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';
import { startTokenExchangeIssuer, type TokenExchangeIssuer } from './token-exchange-issuer.js';

const PUBLIC_URL = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const CLIENT = { clientId: 'punk-connect', clientSecret: randomBytes(16).toString('hex') };
const USERS = ['alice', 'bob', 'carol', 'dave'];

for (const mode of ['up', 'cluster'] as const)
  describe(`per-user connections on punk ${mode}`, { timeout: 300_000 }, () => {
    let nats: OwnNats | undefined;
    let db: { url: string; drop(): Promise<void> } | undefined;
    let signIn: TokenExchangeIssuer;
    let provider: ConnectionProvider;
    let upstream: EchoServer;
    let dir: string;
    let punk: RunningPunk;
    const clients: Client[] = [];
    const tokens = new Map<string, string>();

    before(async () => {
      upstream = await startEchoServer();
      signIn = await startTokenExchangeIssuer({
        resource: PUBLIC_URL,
        users: USERS,
        punk: { clientId: 'unused', clientSecret: 'unused-secret' },
        audiences: [],
        refusedAudiences: [],
        exchangedTokenTtl: 60,
      });
      // 30 s tokens expire within the vault's refresh-ahead minute: every call refreshes (and rotates) first.
      provider = await startConnectionProvider({ ...CLIENT, redirectUri: `${PUBLIC_URL}/connect/callback`, accessTokenTtl: 30 });
      dir = await manifestDir('per-user', {
        'gh.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: gh }
spec:
  url: ${upstream.url}
  auth:
    perUser:
      provider: example
      authorizationUrl: ${provider.authorizationUrl}
      tokenUrl: ${provider.tokenUrl}
      clientId: ${CLIENT.clientId}
      clientSecret: cred:gh-client
      scopes: [openid]
`,
      });
      if (mode === 'cluster') {
        nats = await startOwnNats();
        db = await scratchDatabase();
      }
      punk = await startPunk({
        manifestDir: dir,
        ...(mode === 'cluster' && { command: 'cluster', timeoutMs: 180_000 }),
        env: {
          ...(nats && db && { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url }),
          PUNK_AUTH_MODE: 'on',
          PUNK_PUBLIC_URL: PUBLIC_URL,
          PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
          PUNK_AUTH_ISSUER: signIn.issuer,
          PUNK_AUTH_JWKS_URL: signIn.jwksUrl,
          PUNK_AUTH_ALGORITHMS: 'ES256',
          PUNK_UPSTREAM_ALLOWED_NETWORKS: '127.0.0.1/32',
        },
      });
      const created = await fetch(`${punk.baseUrl}/api/v1/credentials`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'gh-client', data: { value: CLIENT.clientSecret } }),
      });
      assert.equal(created.status, 201, await created.text());
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await punk?.stop();
      await upstream?.close();
      await provider?.close();
      await signIn?.close();
      await nats?.stop();
      await db?.drop();
      if (dir) await removeDir(dir);
    });

    const tokenOf = async (user: string) => {
      let token = tokens.get(user);
      if (!token) tokens.set(user, (token = await signIn.userToken(user)));
      return token;
    };
    const api = async (user: string, method: string, path: string, headers: Record<string, string> = {}) =>
      fetch(`${punk.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${await tokenOf(user)}`, ...headers },
        redirect: 'manual',
      });

    /** `user` starts a connect flow: the authorization URL and the cookie Punk set for this browser. */
    async function begin(user: string): Promise<{ authorizationUrl: string; cookie: string }> {
      const response = await api(user, 'POST', '/api/v1/connections/default/gh');
      assert.equal(response.status, 200, await response.clone().text());
      const { authorizationUrl } = (await response.json()) as { authorizationUrl: string };
      const setCookie = response.headers.getSetCookie()[0] ?? '';
      assert.match(setCookie, /HttpOnly/i);
      assert.match(setCookie, /SameSite=Lax/i);
      const url = new URL(authorizationUrl);
      assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(url.searchParams.get('redirect_uri'), `${PUBLIC_URL}/connect/callback`);
      return { authorizationUrl, cookie: setCookie.split(';')[0]! };
    }

    /** The provider's redirect back, delivered to Punk's callback with `cookie` (or none). */
    async function callback(back: URL, cookie: string | undefined): Promise<string> {
      const response = await fetch(`${punk.baseUrl}/connect/callback${back.search}`, {
        headers: cookie ? { cookie } : {},
        redirect: 'manual',
      });
      assert.equal(response.status, 302);
      return response.headers.get('location') ?? '';
    }

    async function connect(user: string): Promise<void> {
      const { authorizationUrl, cookie } = await begin(user);
      const location = await callback(await provider.authorize(authorizationUrl, user), cookie);
      assert.equal(location, '/ui/connections?connected=default%2Fgh');
    }

    /** The user the upstream saw on a `gh__headers` call of `client`. */
    async function seenUser(client: Client): Promise<string | undefined> {
      const headers = JSON.parse(textOf(await client.callTool({ name: 'gh__headers', arguments: {} }))) as Record<string, string>;
      const bearer = /^Bearer (.+)$/.exec(headers['authorization'] ?? '')?.[1];
      assert.ok(bearer, `the upstream saw no bearer: ${JSON.stringify(headers)}`);
      return provider.subjectOf(bearer);
    }

    const signedIn = async (user: string, era: '2025-11-25' | '2026-07-28' = '2025-11-25') => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era, { authorization: `Bearer ${await tokenOf(user)}` });
      clients.push(client);
      return client;
    };

    test('a callback with a state from another browser (no cookie, or a wrong one) connects nothing', async () => {
      const { authorizationUrl } = await begin('alice');
      const back = await provider.authorize(authorizationUrl, 'alice');
      const location = await callback(back, 'punk_connect_x=y');
      assert.match(decodeURIComponent(location), /error=.*started in another browser: nothing was connected/);
      // The state is spent: the right cookie afterwards does not bring it back.
      const list = (await (await api('alice', 'GET', '/api/v1/connections')).json()) as { items: Array<{ connected: boolean }> };
      assert.deepEqual(
        list.items.map((i) => i.connected),
        [false],
      );
    });

    test('two users connect, and each call reaches the upstream with that user’s own token (both eras)', async () => {
      await connect('alice');
      await connect('bob');
      const list = (await (await api('alice', 'GET', '/api/v1/connections')).json()) as { items: Array<Record<string, unknown>> };
      assert.equal(list.items.length, 1);
      assert.equal(list.items[0]!['name'], 'gh');
      assert.equal(list.items[0]!['provider'], 'example');
      assert.equal(list.items[0]!['connected'], true);
      assert.ok(typeof list.items[0]!['connectedAt'] === 'string');
      const before = provider.refreshes;
      assert.equal(await seenUser(await signedIn('alice')), 'alice');
      assert.equal(await seenUser(await signedIn('bob')), 'bob');
      assert.equal(await seenUser(await signedIn('alice', '2026-07-28')), 'alice');
      assert.equal(await seenUser(await signedIn('bob', '2026-07-28')), 'bob');
      assert.ok(provider.refreshes > before, 'the short-lived tokens were refreshed (and the rotated refresh tokens written back)');
    });

    test('a user who has not connected gets a URL elicitation (2025-11-25, url mode) or a tool error naming the connect page', async () => {
      const connectPage = `${PUBLIC_URL}/ui/connect/default/gh`;
      const elicitable = new Client({ name: 'punk-e2e', version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
      await elicitable.connect(
        new StreamableHTTPClientTransport(new URL(`${punk.baseUrl}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${await tokenOf('carol')}` } },
        }),
      );
      clients.push(elicitable);
      await assert.rejects(
        elicitable.callTool({ name: 'gh__headers', arguments: {} }),
        (error: Error & { code?: number; data?: unknown }) => {
          assert.equal(error.code, -32042);
          const { elicitations } = error.data as { elicitations: Array<{ mode: string; url: string; elicitationId: string }> };
          assert.equal(elicitations[0]?.mode, 'url');
          assert.equal(elicitations[0]?.url, connectPage);
          return true;
        },
      );
      for (const era of ['2025-11-25', '2026-07-28'] as const) {
        const result = await (await signedIn('carol', era)).callTool({ name: 'gh__headers', arguments: {} });
        assert.equal(result.isError, true);
        assert.match(textOf(result), new RegExp(`carol has not connected theirs.*${connectPage.replace(/\./g, '\\.')}`));
      }
    });

    test('an API key naming no user is refused, told why', async () => {
      const { key, id } = await createApiKey(punk.baseUrl, BOOTSTRAP, { name: `key ${mode}` });
      const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { authorization: `Bearer ${key}` });
      clients.push(client);
      await assert.rejects(
        client.callTool({ name: 'gh__headers', arguments: {} }),
        new RegExp(`caller api-key:${id} is an API key naming no user`),
      );
    });

    test('a revoked refresh token surfaces once as a clear error, then the user is asked to connect again', async () => {
      await connect('dave');
      const client = await signedIn('dave');
      assert.equal(await seenUser(client), 'dave');
      await provider.revoke('dave');
      const revoked = await client.callTool({ name: 'gh__headers', arguments: {} });
      assert.equal(revoked.isError, true);
      assert.match(
        textOf(revoked),
        /example refused the refresh token of dave's connection to server "gh" \(invalid_grant.*connect again.*\/ui\/connect\/default\/gh/,
      );
      const again = await client.callTool({ name: 'gh__headers', arguments: {} });
      assert.equal(again.isError, true);
      assert.match(textOf(again), /dave has not connected theirs/);
      const list = (await (await api('dave', 'GET', '/api/v1/connections')).json()) as { items: Array<Record<string, unknown>> };
      assert.equal(list.items[0]!['needsReconnect'], true);
      assert.equal(list.items[0]!['connected'], false);
    });

    test('disconnecting deletes the tokens (the next call is asked to connect), 404 when not connected', async () => {
      assert.equal((await api('bob', 'DELETE', '/api/v1/connections/default/gh')).status, 204);
      assert.equal((await api('bob', 'DELETE', '/api/v1/connections/default/gh')).status, 404);
      const result = await (await signedIn('bob')).callTool({ name: 'gh__headers', arguments: {} });
      assert.equal(result.isError, true);
      assert.match(textOf(result), /bob has not connected theirs/);
    });

    test('the ledger names each identity that reached the upstream, records connects and disconnects, holds no token, and verifies', async () => {
      const admin = { headers: { authorization: `Bearer ${BOOTSTRAP}` } };
      const found = await eventually(async () => {
        const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?limit=200`, admin)).json()) as {
          runs: Array<{ runId: string; types: string[] }>;
        };
        const texts = await Promise.all(runs.map(async (r) => (await fetch(`${punk.baseUrl}/api/v1/runs/${r.runId}`, admin)).text()));
        const events = texts.flatMap((t) => (JSON.parse(t) as { events: Array<{ type: string; data: Record<string, unknown> }> }).events);
        const identities = new Set(events.filter((e) => e.type === 'tool.called').map((e) => e.data['upstreamIdentity']));
        const types = new Set(events.map((e) => e.type));
        const complete =
          ['alice', 'bob', 'dave'].every((u) => identities.has(`per-user connection of principal ${u}`)) &&
          ['connection.created', 'connection.deleted', 'connection.needs_reconnect'].every((t) => types.has(t));
        return complete ? texts.join('\n') : undefined;
      }, 20_000);
      assert.ok(found, 'tool.called names each user, and the connection events are recorded');
      assert.doesNotMatch(found, /"access_token"|"refresh_token"/);
      const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`, admin)).json()) as { ok: boolean };
      assert.equal(verified.ok, true, JSON.stringify(verified));
    });
  });
