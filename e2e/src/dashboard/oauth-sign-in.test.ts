/**
 * The dashboard's OAuth sign-in, in Debian's Chromium against `punk up` and a real authorization server
 * (oidc-provider, authorization-server.ts): "Sign in with <issuer>" runs the authorization code flow with PKCE
 * S256 and `state` (RFC 6749 §4.1, RFC 7636; the issuer's RFC 8414 metadata, the code exchanged from the browser
 * under the page's CSP), the person logs in at the issuer and is back at /ui signed in with an access token Punk
 * verifies through the issuer's JWKS, kept in `sessionStorage` only; sign-out forgets it; an access token that
 * expires during the session sends the person back to the sign-in saying so. The pages log no error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { logInAtIssuer, startAuthorizationServer, type AuthorizationServer } from './authorization-server.js';
import { openBrowser, screenshot, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

/** `PUNK_PUBLIC_URL` of the dashboard tests: the resource the tokens are for. */
const RESOURCE = 'https://punk.example.test';
const CLIENT_ID = 'punk-dashboard';

describe('dashboard OAuth sign-in', () => {
  let issuer: AuthorizationServer;
  let punk: DashboardPunk;
  let browser: TestBrowser;
  /** Lifetime of the next access tokens, in seconds. */
  let accessTokenTtl = 600;

  before(async () => {
    issuer = await startAuthorizationServer();
    punk = await startDashboardPunk({
      env: {
        PUNK_AUTH_ISSUER: issuer.issuer,
        PUNK_AUTH_JWKS_URL: issuer.jwksUrl,
        PUNK_AUTH_ALGORITHMS: 'ES256',
        PUNK_AUTH_CLOCK_TOLERANCE_MS: '0',
        PUNK_DASHBOARD_OAUTH_CLIENT_ID: CLIENT_ID,
      },
    });
    await issuer.register({
      clientId: CLIENT_ID,
      redirectUri: `${punk.baseUrl}/ui/signed-in`,
      resource: RESOURCE,
      accessTokenTtl: () => accessTokenTtl,
    });
    browser = await openBrowser();
    // The issuer's development pages import a web font; nothing here reaches the network.
    await browser.context.route('https://fonts.googleapis.com/**', (route) =>
      route.fulfill({ status: 200, contentType: 'text/css', body: '' }),
    );
  });
  after(async () => {
    await browser?.close();
    await punk?.close();
    await issuer?.close();
  });

  test('the configuration names the issuer and the client, and the CSP lets the page reach the issuer only', async () => {
    const config = await fetch(`${punk.baseUrl}/ui/config.json`);
    assert.deepEqual(await config.json(), {
      authentication: true,
      oauth: { issuer: issuer.issuer, clientId: CLIENT_ID, scopes: ['punk:admin'], resource: RESOURCE },
    });
    const csp = (await fetch(`${punk.baseUrl}/ui/`)).headers.get('content-security-policy') ?? '';
    assert.match(csp, new RegExp(`(^|; )connect-src 'self' ${issuer.issuer.replace(/[.:/]/g, '\\$&')}(;|$)`));
    assert.match(csp, /(^|; )script-src 'self'(;|$)/);
  });

  test('a person signs in at the issuer with PKCE, comes back to the view they asked for, and signs out', async () => {
    const { page } = browser;
    await page.goto(`${punk.baseUrl}/ui/credentials`);
    const button = page.getByRole('button', { name: `Sign in with ${new URL(issuer.issuer).host}` });
    await button.waitFor();
    await screenshot(page, 'sign-in-oauth');
    const authorization = page.waitForRequest((request) => request.url().startsWith(`${issuer.issuer}/auth?`));
    await button.click();
    const asked = new URL((await authorization).url());
    assert.equal(asked.searchParams.get('response_type'), 'code');
    assert.equal(asked.searchParams.get('client_id'), CLIENT_ID);
    assert.equal(asked.searchParams.get('redirect_uri'), `${punk.baseUrl}/ui/signed-in`);
    assert.equal(asked.searchParams.get('code_challenge_method'), 'S256');
    assert.match(asked.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
    assert.match(asked.searchParams.get('state') ?? '', /^[A-Za-z0-9_-]{20,}$/);
    assert.equal(asked.searchParams.get('resource'), RESOURCE);

    await logInAtIssuer(page, issuer.issuer, 'ada');
    await page.waitForURL(`${punk.baseUrl}/ui/credentials`);
    await page.getByRole('heading', { name: 'Credentials', level: 1 }).waitFor();
    await page.getByText('ada', { exact: true }).waitFor();
    const stored = (await page.evaluate(
      '({ kind: sessionStorage.getItem("punk.tokenKind"), token: sessionStorage.getItem("punk.token"), local: localStorage.length, pending: sessionStorage.getItem("punk.oauth.pending") })',
    )) as { kind: string; token: string; local: number; pending: string | null };
    assert.equal(stored.kind, 'oauth');
    assert.equal(stored.token.split('.').length, 3, 'a JWT access token');
    assert.equal(stored.local, 0, 'nothing in localStorage');
    assert.equal(stored.pending, null, 'the verifier and state are gone');
    const me = await fetch(`${punk.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${stored.token}` } });
    const caller = (await me.json()) as Record<string, unknown>;
    assert.equal(caller['kind'], 'oauth');
    assert.equal(caller['subject'], 'ada');
    assert.equal(caller['admin'], true);
    assert.match(String(caller['expiresAt']), /^\d{4}-\d\d-\d\dT/);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('alert').filter({ hasText: 'Signed out.' }).waitFor();
    assert.equal(await page.evaluate('sessionStorage.getItem("punk.token")'), null);
  });

  test('an access token that expires during the session sends the person back to the sign-in, saying so', async () => {
    accessTokenTtl = 2;
    const { page } = browser;
    await page.goto(`${punk.baseUrl}/ui/servers`);
    await page.getByRole('button', { name: /^Sign in with / }).click();
    // The issuer remembers the person and the consent: it may send the browser straight back.
    await Promise.race([
      logInAtIssuer(page, issuer.issuer, 'ada'),
      page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor(),
    ]).catch(() => undefined);
    await page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor();
    // The Servers view reads the list again every 5 s: the first read after the token's expiry is refused.
    await page
      .getByRole('alert')
      .filter({ hasText: 'Your sign-in is no longer accepted (the access token expired): sign in again.' })
      .waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: /^Sign in with / }).waitFor();
    assert.equal(await page.evaluate('sessionStorage.getItem("punk.token")'), null);
  });

  test("the pages logged no error but the expired token's refusal", () => {
    assert.deepEqual(
      browser.errors.filter((e) => !/status of 401/.test(e)),
      [],
    );
  });
});
