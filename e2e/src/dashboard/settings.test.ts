/**
 * The Settings & keys view in Chromium against `punk up`: an admin turns redaction on (governance then holds it);
 * creates an API key, which is shown once and works at once; and revokes it, after which Punk refuses it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DESKTOP, openBrowser, PHONE, screenshot, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

describe('dashboard: settings and keys', () => {
  let punk: DashboardPunk;
  let browser: TestBrowser;
  let newKey = '';

  /** The status of `GET /api/v1/mcp/servers` with `key`. */
  const statusWith = async (key: string) =>
    (await fetch(`${punk.baseUrl}/api/v1/mcp/servers`, { headers: { authorization: `Bearer ${key}` } })).status;

  before(async () => {
    punk = await startDashboardPunk();
    browser = await openBrowser();
    await signIn(browser.page, punk.baseUrl, punk.adminKey);
    await browser.page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Settings & keys', exact: true }).click();
  });
  after(async () => {
    await browser?.close();
    await punk?.close();
  });

  test('an admin turns redaction on', async () => {
    const { page } = browser;
    const redaction = page.getByRole('region', { name: 'Redaction' });
    await redaction.getByText('Redaction is off (the default)').waitFor();
    const checkbox = redaction.getByRole('checkbox', { name: /Mask emails, phone and card numbers/ });
    await checkbox.click();
    await redaction.getByText(/Redaction is on \(set .* by bootstrap-admin\)/).waitFor();
    assert.equal(await checkbox.isChecked(), true);
    assert.equal(await checkbox.isChecked(), true);
    const { settings } = (await (
      await fetch(`${punk.baseUrl}/api/v1/settings`, { headers: { authorization: `Bearer ${punk.adminKey}` } })
    ).json()) as {
      settings: Array<{ key: string; value: unknown }>;
    };
    assert.equal(settings.find((s) => s.key === 'redaction')?.value, true, 'governance holds the setting');
  });

  test('an admin creates an API key: it is shown once and works at once', async () => {
    const { page } = browser;
    const keys = page.getByRole('region', { name: 'API keys' });
    await keys.getByLabel('Name').fill('ci-bot');
    await keys.getByLabel('Scopes (space-separated)').fill('punk:admin');
    await keys.getByRole('button', { name: 'Create a key' }).click();
    newKey = await keys.getByLabel('The new key').inputValue();
    assert.match(newKey, /^pk_/);
    assert.equal(await statusWith(newKey), 200, 'the new key is accepted');
    await keys.getByRole('row').filter({ hasText: 'ci-bot' }).waitFor();
    await keys.getByRole('button', { name: 'Done' }).click();
    assert.ok(!(await page.content()).includes(newKey), 'the key is not shown again');
    await screenshot(page, 'settings');
    await page.setViewportSize(PHONE);
    assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true, 'nothing overflows at 390 px');
    await page.setViewportSize(DESKTOP);
  });

  test('an admin revokes a key, and Punk refuses it from then on', async () => {
    const { page } = browser;
    const row = page.getByRole('region', { name: 'API keys' }).getByRole('row').filter({ hasText: 'ci-bot' });
    await row.getByRole('button', { name: 'Revoke ci-bot…' }).click();
    await row.getByRole('button', { name: 'Revoke ci-bot', exact: true }).click();
    await row.waitFor({ state: 'detached' });
    assert.equal(await statusWith(newKey), 401, 'the revoked key is refused');
  });

  test('the pages logged no error', () => {
    assert.deepEqual(browser.errors, []);
  });
});
