/**
 * Per-user connections in the dashboard, in Chromium against `punk up` and two real authorization servers
 * (oidc-provider): Punk's issuer (authorization-server.ts), where people sign in to the dashboard, and the upstream's
 * (../connection-provider.ts), where each person connects their own account (docs/identity.md). A person not signed in opens the connect page an
 * MCP client was given, signs in first and is back there; nothing starts before the click on Connect; at the
 * upstream's authorization server they log in and come back to Connections, connected; their calls then reach the
 * upstream (an HTTP MCP server recording the bearer of each request) with a token of that server for their account
 * there, never their own token for Punk; the Servers view shows the connection; a refusal at the provider comes back
 * as a message saying so; Disconnect asks first, then the view says Not connected and the next call names the
 * connect page again. The pages log no error.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, textOf } from '../clients.js';
import { startConnectionProvider, type ConnectionProvider } from '../connection-provider.js';
import { startEchoServer, type EchoServer } from '../echo-server.js';
import { freePort } from '../harness.js';
import { logInAtIssuer, startAuthorizationServer, type AuthorizationServer } from './authorization-server.js';
import { openBrowser, PHONE, screenshot, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

const DASHBOARD_CLIENT = 'punk-dashboard';
/** Punk's client at the upstream's authorization server; its secret is the credential `hr-client`. */
const CONNECT_CLIENT = { clientId: 'punk-connections', clientSecret: randomBytes(16).toString('hex') };
const UPSTREAM_SCOPE = 'openid';
const PROVIDER = 'hr-accounts';
const CONNECT_PATH = '/ui/connect/default/hr';

const hrServer = (url: string, provider: ConnectionProvider) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: hr }
spec:
  url: ${url}
  auth:
    perUser:
      provider: ${PROVIDER}
      authorizationUrl: ${provider.authorizationUrl}
      tokenUrl: ${provider.tokenUrl}
      clientId: ${CONNECT_CLIENT.clientId}
      clientSecret: cred:hr-client
      scopes: [${UPSTREAM_SCOPE}]
`;

describe('dashboard: per-user connections', { timeout: 300_000 }, () => {
  let signInIssuer: AuthorizationServer;
  let upstreamIssuer: ConnectionProvider;
  let upstream: EchoServer;
  let punk: DashboardPunk;
  let browser: TestBrowser;
  let client: Client | undefined;

  /** The person's access token for Punk, as the dashboard keeps it. */
  const punkToken = async () => (await browser.page.evaluate('sessionStorage.getItem("punk.token")')) as string;

  /** What a `headers` call by the signed-in person answers, through Punk's endpoint of the hr server. */
  const callHeaders = async (): Promise<{ text: string; isError: boolean }> => {
    client ??= await connectClient(`${punk.baseUrl}/servers/default/hr/mcp`, '2026-07-28', {
      authorization: `Bearer ${await punkToken()}`,
    });
    try {
      const result = await client.callTool({ name: 'headers', arguments: {} });
      return { text: textOf(result), isError: result.isError === true };
    } catch (error) {
      return { text: error instanceof Error ? error.message : String(error), isError: true };
    }
  };

  before(async () => {
    upstream = await startEchoServer();
    signInIssuer = await startAuthorizationServer();
    // Punk's public URL is its own address here: the upstream's authorization server sends the browser back to it.
    const port = await freePort();
    const publicUrl = `http://127.0.0.1:${String(port)}`;
    upstreamIssuer = await startConnectionProvider({
      ...CONNECT_CLIENT,
      redirectUri: `${publicUrl}/connect/callback`,
      accessTokenTtl: 600,
    });
    punk = await startDashboardPunk({
      port,
      files: { 'hr.yaml': hrServer(upstream.url, upstreamIssuer) },
      env: {
        PUNK_PUBLIC_URL: publicUrl,
        PUNK_AUTH_ISSUER: signInIssuer.issuer,
        PUNK_AUTH_JWKS_URL: signInIssuer.jwksUrl,
        PUNK_AUTH_ALGORITHMS: 'ES256',
        PUNK_DASHBOARD_OAUTH_CLIENT_ID: DASHBOARD_CLIENT,
        // The upstream and its authorization server listen on loopback, which the egress guard refuses unless allowed.
        PUNK_UPSTREAM_ALLOWED_NETWORKS: '127.0.0.1/32',
      },
    });
    await signInIssuer.register({
      clientId: DASHBOARD_CLIENT,
      redirectUri: `${punk.baseUrl}/ui/signed-in`,
      resource: publicUrl,
      accessTokenTtl: () => 600,
    });
    const created = await fetch(`${punk.baseUrl}/api/v1/credentials`, {
      method: 'POST',
      headers: { authorization: `Bearer ${punk.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'hr-client', data: { value: CONNECT_CLIENT.clientSecret } }),
    });
    assert.equal(created.status, 201, await created.text());
    browser = await openBrowser();
    // The issuers' development pages import a web font; nothing here reaches the network.
    await browser.context.route('https://fonts.googleapis.com/**', (route) =>
      route.fulfill({ status: 200, contentType: 'text/css', body: '' }),
    );
  });
  after(async () => {
    await client?.close();
    await browser?.close();
    await punk?.close();
    await Promise.all([signInIssuer?.close(), upstreamIssuer?.close(), upstream?.close()]);
  });

  test('a person not signed in opens the connect page, signs in first and is back there; nothing starts before Connect', async () => {
    const { page } = browser;
    const posts: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && request.url().includes('/api/v1/connections/')) posts.push(request.url());
    });
    await page.goto(`${punk.baseUrl}${CONNECT_PATH}`);
    await page.getByRole('button', { name: `Sign in with ${new URL(signInIssuer.issuer).host}` }).click();
    await logInAtIssuer(page, signInIssuer.issuer, 'ada');
    await page.waitForURL(`${punk.baseUrl}${CONNECT_PATH}`);
    await page.getByRole('heading', { name: 'Connect default/hr', level: 1 }).waitFor();
    await page.getByText('Not connected', { exact: true }).waitFor();
    await page.getByText(`own account at ${PROVIDER}`).waitFor();
    await page.getByText(UPSTREAM_SCOPE, { exact: true }).waitFor();
    await page.getByText('ada', { exact: true }).first().waitFor();
    assert.deepEqual(posts, [], 'opening the page started no connection');

    const before = await callHeaders();
    assert.equal(before.isError, true, 'a call before connecting is not run');
    assert.ok(before.text.includes(CONNECT_PATH), `the call names the connect page: ${before.text}`);
    assert.ok(!upstream.requests.some((r) => r.method === 'tools/call'), 'the upstream saw no call');
  });

  test('a refusal at the provider comes back to Connections as a message saying so', async () => {
    const { page } = browser;
    await page.getByRole('button', { name: `Connect to ${PROVIDER}` }).click();
    await page.waitForURL((url) => url.href.startsWith(upstreamIssuer.issuer));
    await page.getByRole('link', { name: '[ Cancel ]' }).click();
    await page.waitForURL(`${punk.baseUrl}/ui/connections`);
    await page
      .getByRole('alert')
      .filter({ hasText: /^The connection did not complete: .*aborted/ })
      .waitFor();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'default/hr' }) });
    await card.getByText('Not connected', { exact: true }).waitFor();
  });

  test('Connect sends the person to the provider, and back to Connections connected; calls reach the upstream as them', async () => {
    const { page } = browser;
    await page.goto(`${punk.baseUrl}${CONNECT_PATH}`);
    const authorization = page.waitForRequest((request) => request.url().startsWith(`${upstreamIssuer.issuer}/auth?`));
    await page.getByRole('button', { name: `Connect to ${PROVIDER}` }).click();
    const asked = new URL((await authorization).url());
    assert.equal(asked.searchParams.get('client_id'), CONNECT_CLIENT.clientId);
    assert.equal(asked.searchParams.get('code_challenge_method'), 'S256');
    assert.ok(asked.searchParams.get('state'), 'the authorization request carries a state');
    await logInAtIssuer(page, upstreamIssuer.issuer, 'ada-at-hr');
    await page.waitForURL(`${punk.baseUrl}/ui/connections`);
    await page.getByRole('status').filter({ hasText: 'Connected default/hr' }).waitFor();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'default/hr' }) });
    await card.getByText('Connected', { exact: true }).waitFor();
    await card.getByText('Connected since').waitFor();
    await card.getByRole('button', { name: 'Reconnect default/hr' }).waitFor();
    assert.equal(await page.evaluate('location.search'), '', 'the outcome is gone from the address');
    await screenshot(page, 'connections');

    const seenBefore = upstream.requests.length;
    const call = await callHeaders();
    assert.equal(call.isError, false, call.text);
    const bearers = upstream.requests
      .slice(seenBefore)
      .filter((r) => r.method === 'tools/call')
      .map((r) => /^Bearer (.+)$/.exec(r.authorization ?? '')?.[1]);
    assert.equal(bearers.length, 1, 'the upstream saw the call');
    const bearer = bearers[0];
    assert.ok(bearer, 'the call carried a bearer');
    assert.notEqual(bearer, await punkToken(), "the person's token for Punk never goes upstream");
    assert.equal(await upstreamIssuer.subjectOf(bearer), 'ada-at-hr', "the provider's token for the person's account there");
  });

  test('the Servers view shows the connection, with a link to its page', async () => {
    const { page } = browser;
    await page.getByRole('link', { name: 'Servers', exact: true }).click();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'hr' }) });
    await card.getByText('Your connection').waitFor();
    await card.getByText('Connected', { exact: true }).waitFor();
    assert.equal(await card.getByRole('link', { name: 'Manage' }).getAttribute('href'), CONNECT_PATH);
  });

  test('Disconnect asks first, then the view says Not connected and the next call names the connect page again', async () => {
    const { page } = browser;
    await page.getByRole('link', { name: 'Connections', exact: true }).click();
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'default/hr' }) });
    await card.getByRole('button', { name: 'Disconnect default/hr…' }).click();
    await card.getByText(/deletes the tokens Punk keeps for you/).waitFor();
    await card.getByRole('button', { name: 'Disconnect default/hr', exact: true }).click();
    await card.getByText('Not connected', { exact: true }).waitFor();
    await card.getByRole('button', { name: 'Connect default/hr' }).waitFor();
    assert.equal(await card.getByRole('button', { name: /^Disconnect/ }).count(), 0);

    const call = await callHeaders();
    assert.equal(call.isError, true, 'a call after disconnecting is not run');
    assert.ok(call.text.includes(CONNECT_PATH), `the call names the connect page: ${call.text}`);

    await page.setViewportSize(PHONE);
    assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true, 'nothing overflows at 390 px');
  });

  test('the pages logged no error', () => {
    assert.deepEqual(browser.errors, []);
  });
});
