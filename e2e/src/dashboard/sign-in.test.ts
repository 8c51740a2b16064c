/**
 * The dashboard's front door, in Debian's Chromium against `punk up` with authentication on: `/ui` is served with
 * its caching headers and Content-Security-Policy (client-side routes fall back to index.html, a foreign Origin is
 * refused); a person signs in with an API key, a wrong key is refused with a clear message, and a key revoked
 * during the session sends them back to the sign-in saying why; the keyboard alone is enough; a key without the
 * admin scope (`GET /api/v1/me` says who it is) sees only the views it may use, and an admin view says why not. With authentication off there is no sign-in; once Punk is gone a view
 * says it cannot be reached. The pages log no error
 * (a CSP refusal would be one).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createApiKey } from '../harness.js';
import { openBrowser, screenshot, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

describe('dashboard sign-in', () => {
  let punk: DashboardPunk;
  let browser: TestBrowser;

  before(async () => {
    punk = await startDashboardPunk();
    browser = await openBrowser();
  });
  after(async () => {
    await browser?.close();
    await punk?.close();
  });

  test('/ui is served with a strict CSP, hashed assets cached for good and every page path answered by index.html', async () => {
    const root = await fetch(`${punk.baseUrl}/`, { redirect: 'manual' });
    assert.equal(root.status, 302);
    assert.equal(root.headers.get('location'), '/ui/');

    const page = await fetch(`${punk.baseUrl}/ui/runs/some-run`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/, 'no inline script, no other origin');
    assert.match(csp, /connect-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    const html = await page.text();
    assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/, 'index.html has no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'index.html names no other origin');

    const script = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    assert.ok(script, html);
    const asset = await fetch(`${punk.baseUrl}${script}`);
    assert.equal(asset.status, 200);
    assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.match(asset.headers.get('content-type') ?? '', /javascript/);

    const missing = await fetch(`${punk.baseUrl}/ui/assets/index-missing.js`);
    assert.equal(missing.status, 404, 'a missing asset is not answered with index.html');

    const foreign = await fetch(`${punk.baseUrl}/ui/`, { headers: { origin: 'https://evil.example' } });
    assert.equal(foreign.status, 403);
    assert.match(
      ((await foreign.json()) as { error: { message: string } }).error.message,
      /Origin "https:\/\/evil\.example" may not load the dashboard/,
    );

    const post = await fetch(`${punk.baseUrl}/ui/`, { method: 'POST' });
    assert.equal(post.status, 405);
  });

  test('a wrong key is refused with a clear message', async () => {
    const { page } = browser;
    await page.goto(`${punk.baseUrl}/ui/servers`);
    await page.getByLabel('API key').fill('pk_not-a-key-of-this-punk');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'The key was refused' }).waitFor();
    assert.equal(await page.getByRole('navigation', { name: 'Views' }).count(), 0, 'still signed out');
  });

  test('a person signs in with a key, and the session keeps it (no cookie)', async () => {
    const { page, context } = browser;
    await page.goto(`${punk.baseUrl}/ui/`);
    await screenshot(page, 'sign-in');
    await signIn(page, punk.baseUrl, punk.adminKey);
    await page.waitForURL(/\/ui\/servers$/);
    await page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor();
    assert.deepEqual(await context.cookies(), [], 'no cookie');
    await page.reload();
    await page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor();
    for (const [link, heading] of [
      ['Credentials', 'Credentials'],
      ['Runs', 'Runs'],
      ['Audit', 'Audit'],
      ['Approvals', 'Approvals'],
      ['Workflows', 'Workflows'],
      ['Settings & keys', 'Settings & keys'],
    ] as const) {
      await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: link, exact: true }).click();
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    }
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
  });

  test('a key revoked during the session sends the person back to the sign-in, saying why', async () => {
    const { key, id } = await createApiKey(punk.baseUrl, punk.adminKey, { name: 'revoked-in-session', scopes: ['punk:admin'] });
    const { page } = browser;
    await signIn(page, punk.baseUrl, key);
    const revoked = await fetch(`${punk.baseUrl}/api/v1/api-keys/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${punk.adminKey}` },
    });
    assert.equal(revoked.status, 204);
    // The next API call finds the key revoked: the Credentials view loading, or the Servers view's own refresh if it
    // comes first (then the navigation is already gone and there is nothing to click).
    const signInShown = page.getByLabel('API key').waitFor();
    const credentials = page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Credentials', exact: true });
    await Promise.race([credentials.click(), signInShown]).catch(() => signInShown);
    await page.getByRole('alert').filter({ hasText: 'no longer accepted' }).waitFor();
    await page.getByLabel('API key').waitFor();
  });

  test('a person signs in and moves between the views with the keyboard alone', async () => {
    const { page } = browser;
    await page.goto(`${punk.baseUrl}/ui/`);
    await page.getByLabel('API key').waitFor();
    // The key field has the focus from the start.
    await page.keyboard.type(punk.adminKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor();
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Skip to content');
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement.textContent'), 'Credentials');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Credentials', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  test('a key without the admin scope sees only what it may use: Approvals, its Connections, and why the admin views are not for it', async () => {
    const { key, id } = await createApiKey(punk.baseUrl, punk.adminKey, { name: 'not-an-admin', groups: ['ops'] });
    const me = await fetch(`${punk.baseUrl}/api/v1/me`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(me.status, 200);
    assert.equal(me.headers.get('cache-control'), 'no-store');
    assert.deepEqual(await me.json(), {
      authentication: true,
      kind: 'apiKey',
      subject: `api-key:${id}`,
      tenant: 'default',
      scopes: [],
      groups: ['ops'],
      admin: false,
      platformAdmin: false,
    });
    assert.equal((await fetch(`${punk.baseUrl}/api/v1/me`)).status, 401);

    const { page } = browser;
    await signIn(page, punk.baseUrl, key);
    await page.waitForURL(/\/ui\/approvals$/);
    await page.getByRole('heading', { name: 'Approvals', level: 1 }).waitFor();
    const navigation = page.getByRole('navigation', { name: 'Views' });
    assert.deepEqual(await navigation.getByRole('link').allTextContents(), ['Approvals', 'Connections']);
    await page.getByText(`api-key:${id} (not an admin)`).waitFor();
    for (const [path, heading] of [
      ['servers', 'Servers'],
      ['credentials', 'Credentials'],
      ['settings', 'Settings & keys'],
    ] as const) {
      await page.goto(`${punk.baseUrl}/ui/${path}`);
      await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await page
        .getByRole('alert')
        .filter({ hasText: new RegExp(`^Not allowed with this key: this view is for admins .* api-key:${id} has no scopes\\.$`) })
        .waitFor();
      assert.equal(
        await page
          .getByRole('button')
          .filter({ hasText: /Register|Create|Delete|Revoke|Accept/ })
          .count(),
        0,
        path,
      );
    }
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  test('the pages logged no error', () => {
    assert.deepEqual(browser.errors, []);
  });
});

describe('dashboard with authentication off', () => {
  let punk: DashboardPunk;
  let browser: TestBrowser;

  before(async () => {
    punk = await startDashboardPunk({ authentication: false });
    browser = await openBrowser();
  });
  after(async () => {
    await browser?.close();
    await punk?.close();
  });

  test('opens without a key, and says there are no API keys', async () => {
    const { page } = browser;
    await page.goto(`${punk.baseUrl}/`);
    await page.waitForURL(/\/ui\/servers$/);
    await page.getByRole('heading', { name: 'Servers', level: 1 }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0, 'nothing to sign out of');
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Settings & keys', exact: true }).click();
    await page.getByText('Authentication is off (PUNK_AUTH_MODE=off): Punk takes no API keys').waitFor();
    assert.deepEqual(
      browser.errors.filter((e) => !/status of 404/.test(e)),
      [],
      'console errors but the API keys route answering AuthenticationOff',
    );
  });

  test('Punk stopped: the next view says it cannot be reached', async () => {
    const { page } = browser;
    await punk.punk.stop();
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Credentials', exact: true }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /^Punk could not be reached \(.+\): is it running\?$/ })
      .waitFor();
  });
});
