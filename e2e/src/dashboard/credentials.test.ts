/**
 * The Credentials view in Chromium against `punk up`: an admin creates an OAuth2 credential with the
 * "+ OAuth2 fields" button, which pre-fills the seven OAuth2 keys, and afterwards sees its key names, type and
 * refresh health but no value anywhere (neither on the page nor in the API's answer); replaces its keys and values;
 * and deletes it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { DESKTOP, openBrowser, PHONE, screenshot, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

const OAUTH2_KEYS = ['access_token', 'refresh_token', 'expires_at', 'token_url', 'client_id', 'client_secret', 'scope'];

describe('dashboard: credentials', () => {
  let punk: DashboardPunk;
  let browser: TestBrowser;
  const secret = (label: string) => `${label}-${randomBytes(12).toString('hex')}`;
  const values: Record<string, string> = {
    access_token: secret('access'),
    refresh_token: secret('refresh'),
    expires_at: String(Date.now() + 3_600_000),
    token_url: 'https://auth.example.test/oauth/token',
    client_id: secret('client'),
    client_secret: secret('client-secret'),
    scope: 'repo read:org',
  };
  const secrets = [values.access_token!, values.refresh_token!, values.client_secret!];

  before(async () => {
    punk = await startDashboardPunk();
    browser = await openBrowser();
    await signIn(browser.page, punk.baseUrl, punk.adminKey);
  });
  after(async () => {
    await browser?.close();
    await punk?.close();
  });

  test('an admin creates an OAuth2 credential with the pre-fill button and sees no secret afterwards', async () => {
    const { page } = browser;
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Credentials', exact: true }).click();
    await page.getByRole('button', { name: 'Create a credential' }).click();
    await page.getByLabel('Id').fill('github-oauth');
    await page.getByRole('button', { name: '+ OAuth2 fields' }).click();
    const names = await Promise.all(OAUTH2_KEYS.map((_, i) => page.getByLabel(`Key ${i + 1} name`).inputValue()));
    assert.deepEqual(names, OAUTH2_KEYS, 'the seven OAuth2 keys are pre-filled, in order');
    assert.equal(await page.getByLabel('Type').inputValue(), 'oauth2');
    for (const [i, key] of OAUTH2_KEYS.entries()) {
      const input = page.getByLabel(`Key ${i + 1} value`);
      assert.equal(await input.getAttribute('type'), 'password', `${key} is masked while typed`);
      await input.fill(values[key]!);
    }
    await page.getByRole('button', { name: 'Create', exact: true }).click();

    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'github-oauth' }) });
    await card.waitFor();
    assert.deepEqual(
      await card.getByRole('list', { name: 'Keys of github-oauth' }).getByRole('listitem').allTextContents(),
      [...OAUTH2_KEYS].sort(),
    );
    assert.match(await card.innerText(), /oauth2[\s\S]*cred:github-oauth[\s\S]*healthy[\s\S]*not refreshed yet; the access token expires/);
    assert.equal(await page.getByLabel('Key 1 value').count(), 0, 'the form is gone');
    const html = await page.content();
    for (const value of secrets) assert.ok(!html.includes(value), 'no secret value on the page');
    const listed = await (
      await fetch(`${punk.baseUrl}/api/v1/credentials`, { headers: { authorization: `Bearer ${punk.adminKey}` } })
    ).text();
    for (const value of secrets) assert.ok(!listed.includes(value), 'no secret value in the API answer');
    await screenshot(page, 'credentials');
    await page.setViewportSize(PHONE);
    assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true, 'nothing overflows at 390 px');
    await page.setViewportSize(DESKTOP);
  });

  test('an admin replaces a credential: its key names are pre-filled, never its values', async () => {
    const { page } = browser;
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'github-oauth' }) });
    await card.getByRole('button', { name: 'Replace github-oauth' }).click();
    await page.getByRole('heading', { name: 'Replace github-oauth' }).waitFor();
    assert.equal(await page.getByLabel('Key 1 value').inputValue(), '', 'no value comes back');
    const names = await Promise.all(OAUTH2_KEYS.map((_, i) => page.getByLabel(`Key ${i + 1} name`).inputValue()));
    assert.deepEqual(names, [...OAUTH2_KEYS].sort(), 'the stored key names');
    await page.getByRole('button', { name: 'Remove key 7' }).click();
    for (let i = 6; i > 0; i--) await page.getByRole('button', { name: `Remove key ${i}` }).click();
    await page.getByRole('button', { name: '+ Add key' }).click();
    await page.getByLabel('Key 1 name').fill('value');
    await page.getByLabel('Key 1 value').fill(secret('static'));
    await page.getByLabel('Type').selectOption('static');
    await page.getByRole('button', { name: 'Replace', exact: true }).click();
    await card.getByText(/; replaced /).waitFor();
    assert.equal(await page.getByRole('heading', { name: 'Replace github-oauth' }).count(), 0, 'the form is gone');
    assert.deepEqual(await card.getByRole('list', { name: 'Keys of github-oauth' }).getByRole('listitem').allTextContents(), ['value']);
  });

  test('an admin deletes a credential', async () => {
    const { page } = browser;
    const card = page.getByRole('listitem').filter({ has: page.getByRole('heading', { name: 'github-oauth' }) });
    await card.getByRole('button', { name: 'Delete github-oauth…' }).click();
    await card.getByRole('button', { name: 'Delete github-oauth', exact: true }).click();
    await page.getByText('No credential yet.').waitFor();
  });

  test('the pages logged no error', () => {
    assert.deepEqual(browser.errors, []);
  });
});
