/**
 * Prompts not recorded whole show as such in the dashboard, in Debian's Chromium against `punk up` (authentication
 * on): a prompt of 150,000 characters posted to `POST /api/v1/ingest/prompt` is listed in Runs with the outcome
 * `truncated`, and its run's page says how much of it is stored; a body too large to read (5 MiB) is listed as
 * `refused`, its page saying the prompt was not recorded and why. The page logs no error.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { openBrowser, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

let punk: DashboardPunk;
let browser: TestBrowser;
const runIds: Record<'truncated' | 'refused', string> = { truncated: '', refused: '' };

before(async () => {
  punk = await startDashboardPunk();
  const post = (prompt: string) =>
    fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
      method: 'POST',
      headers: { authorization: `Bearer ${punk.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt }),
    });
  const long = await post('a'.repeat(150_000));
  assert.equal(long.status, 201, await long.clone().text());
  runIds.truncated = ((await long.json()) as { runId: string }).runId;
  assert.equal((await post('b'.repeat(5 * 1024 * 1024))).status, 413);
  const { runs } = (await (
    await fetch(`${punk.baseUrl}/api/v1/runs?type=prompt.refused`, { headers: { authorization: `Bearer ${punk.adminKey}` } })
  ).json()) as { runs: Array<{ runId: string }> };
  runIds.refused = runs[0]!.runId;
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
});

test('Runs lists a truncated and a refused prompt as such, and their pages say what is stored', async () => {
  const { page } = browser;
  await signIn(page, punk.baseUrl, punk.adminKey);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Runs', exact: true }).click();
  const table = page.getByRole('table', { name: 'Runs' });
  for (const [outcome, runId] of Object.entries(runIds)) {
    const row = table.getByRole('row').filter({ has: page.getByRole('link', { name: `Run ${runId}` }) });
    await row.getByText(outcome, { exact: true }).waitFor();
  }

  await table.getByRole('link', { name: `Run ${runIds.truncated}` }).click();
  const events = page.getByRole('list', { name: 'Events' });
  await events.getByText('prompt truncated: the first 100000 of 150000 characters stored').waitFor();
  await page.getByRole('link', { name: 'Back to Runs' }).click();

  await table.getByRole('link', { name: `Run ${runIds.refused}` }).click();
  await events.getByText('prompt not recorded: the body is larger than 4 MiB, so its prompt is not recorded').waitFor();
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
  );
});
