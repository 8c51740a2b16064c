/**
 * The Runs view pages through the ledger, in Debian's Chromium against `punk up` (authentication on): with more runs
 * than one page holds (prompts recorded through `POST /api/v1/ingest/prompt`, a second apart), the live first page
 * shows the newest 100, **Load older runs** adds the ones before the oldest shown (`before` its `lastAt`), and once
 * the ledger has none older the view says so. The page logs no error.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

/** Runs recorded: more than one page (100) and less than two. */
const RUNS = 130;

let punk: DashboardPunk;
let browser: TestBrowser;

before(async () => {
  punk = await startDashboardPunk();
  const start = Date.now() - RUNS * 1000;
  for (let i = 0; i < RUNS; i++) {
    const answer = await fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
      method: 'POST',
      headers: { authorization: `Bearer ${punk.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: `prompt number ${String(i)}`, time: new Date(start + i * 1000).toISOString() }),
    });
    assert.equal(answer.status, 201, await answer.text());
  }
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
});

test('Runs shows the newest page live, loads the older runs on request, and says when there are no more', async () => {
  const { page } = browser;
  await signIn(page, punk.baseUrl, punk.adminKey);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Runs', exact: true }).click();
  const rows = page.getByRole('table', { name: 'Runs' }).getByRole('row');
  await page.getByText(/^100 runs, newest first; live/).waitFor();
  assert.equal(await rows.count(), 101, 'a header and one page');
  await page.getByRole('button', { name: 'Load older runs' }).click();
  await page.getByText(`${String(RUNS)} runs, newest first; live`, { exact: false }).waitFor();
  await page.getByText('No older runs.').waitFor();
  assert.equal(await rows.count(), RUNS + 1);
  assert.equal(await page.getByRole('button', { name: 'Load older runs' }).count(), 0);
  const ids = await page
    .getByRole('table', { name: 'Runs' })
    .getByRole('link', { name: /^Run / })
    .evaluateAll((links) => links.map((a) => a.getAttribute('aria-label')));
  assert.equal(new Set(ids).size, RUNS, 'each run once');
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
  );
});
