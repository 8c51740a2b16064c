/**
 * The Runs view and `GET /api/v1/runs` page through the ledger, in Debian's Chromium against `punk up`
 * (authentication on): with more runs than one page holds (prompts recorded through `POST /api/v1/ingest/prompt`, a
 * second apart, except {@link SAME} of them in one same second across the first page's end), the API's pages, each
 * asked with the `nextCursor` of the one before, list every run once, and a cursor it did not mint is a 400 naming
 * `cursor`; in the view, the live first page shows the newest 100, **Load older runs** adds the rest (the page its
 * `nextCursor` names), and once the ledger has none older the view says so; the runs that newer ones then push past
 * the live page's end stay shown, each run once. The page logs no error.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

/** Runs recorded: more than one page (100) and less than two. */
const RUNS = 130;
/** Runs recorded at one same time, the 81st to the 120th newest: the first page of 100 ends among them. */
const SAME = { from: 10, to: 50 };

let punk: DashboardPunk;
let browser: TestBrowser;

/** Records `prompt` as typed at `time` (RFC 3339): a run. */
async function ingest(prompt: string, time: string): Promise<void> {
  const answer = await fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
    method: 'POST',
    headers: { authorization: `Bearer ${punk.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ prompt, time }),
  });
  assert.equal(answer.status, 201, await answer.text());
}

before(async () => {
  punk = await startDashboardPunk();
  const start = Date.now() - RUNS * 1000;
  for (let i = 0; i < RUNS; i++)
    await ingest(`prompt number ${String(i)}`, new Date(start + (i >= SAME.from && i < SAME.to ? SAME.from : i) * 1000).toISOString());
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
});

test('the API pages every run once, those of one same time across a page end included; a bad cursor is a 400', async () => {
  const get = (query: string) => fetch(`${punk.baseUrl}/api/v1/runs?${query}`, { headers: { authorization: `Bearer ${punk.adminKey}` } });
  for (const limit of [100, 7]) {
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const answer = await get(`type=prompt.observed&limit=${String(limit)}${cursor === undefined ? '' : `&cursor=${cursor}`}`);
      assert.equal(answer.status, 200, await answer.clone().text());
      const page = (await answer.json()) as { runs: Array<{ runId: string; lastAt: string }>; nextCursor?: string };
      seen.push(...page.runs.map((run) => run.runId));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    assert.equal(seen.length, RUNS, `pages of ${String(limit)}: every run`);
    assert.equal(new Set(seen).size, RUNS, `pages of ${String(limit)}: each run once`);
  }
  const bad = await get('cursor=2026-01-01T00:00:00Z');
  assert.equal(bad.status, 400);
  assert.deepEqual(await bad.json(), {
    error: {
      code: 'InvalidParameter',
      message: 'query parameter cursor is not a nextCursor this API returned (leave it out for the first page), got "2026-01-01T00:00:00Z"',
    },
  });
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
  // Newer runs push the live page's last ones past its end: they stay shown, each run once.
  for (let i = 0; i < 3; i++) await ingest(`a newer prompt ${String(i)}`, new Date().toISOString());
  await page.getByText(`${String(RUNS + 3)} runs, newest first; live`, { exact: false }).waitFor();
  const ids = await page
    .getByRole('table', { name: 'Runs' })
    .getByRole('link', { name: /^Run / })
    .evaluateAll((links) => links.map((a) => a.getAttribute('aria-label')));
  assert.equal(ids.length, RUNS + 3);
  assert.equal(new Set(ids).size, RUNS + 3, 'each run once');
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
  );
});
