/**
 * The Audit view names a broken chain: `punk up` on Postgres (its own scratch database) with the examples' memory
 * server, whose start is on the ledger; the chain verifies in the browser, then one stored event is edited straight
 * in the database, and verifying again from the first event shows the reason, the event and a link to its run,
 * which opens that run's page.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { eventually, repoRoot } from '../harness.js';
import { openBrowser, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

const adminUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const database = `punk_dash_audit_${randomBytes(4).toString('hex')}`;
const databaseUrl = Object.assign(new URL(adminUrl), { pathname: `/${database}` }).toString();

let admin: pg.Client;
let punk: DashboardPunk;
let browser: TestBrowser;

before(async () => {
  admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${database}`);
  punk = await startDashboardPunk({
    files: { 'memory.yaml': await readFile(join(repoRoot, 'examples/memory.yaml'), 'utf8') },
    env: { PUNK_DATABASE_URL: databaseUrl },
  });
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
  await admin?.query(`drop database if exists ${database} with (force)`);
  await admin?.end();
});

test('an edited event is named in Audit with a link to its run', { timeout: 180_000 }, async () => {
  const headers = { authorization: `Bearer ${punk.adminKey}` };
  const stored = await eventually(async () => {
    const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs`, { headers })).json()) as { runs: unknown[] };
    return runs.length > 0 ? runs : undefined;
  }, 60_000);
  assert.ok(stored, 'the server start is on the ledger');

  const { page } = browser;
  await signIn(page, punk.baseUrl, punk.adminKey);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Audit', exact: true }).click();
  await page.getByRole('button', { name: 'Verify the ledger' }).click();
  await page.getByRole('region', { name: 'Verification result' }).getByText('verified').waitFor();

  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const edited = await db.query<{ id: string; run_id: string }>(
    `update ledger.events set data = data || '{"forged": true}'::jsonb where tenant = 'default' and tenant_seq = 1 returning id, run_id`,
  );
  await db.end();
  const [victim] = edited.rows;
  assert.ok(victim, 'the first event was edited');

  await page.getByLabel(/From the first event/).check();
  await page.getByRole('button', { name: 'Verify the ledger' }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'broken' });
  await alert.waitFor();
  const text = (await alert.textContent()) ?? '';
  assert.match(text, /broken at event 1: HashMismatch/);
  assert.match(text, /does not match the event's content/);
  assert.ok(text.includes(victim.id), text);
  await alert.getByRole('link', { name: victim.run_id }).click();
  await page.getByRole('heading', { name: `Run ${victim.run_id}`, level: 1 }).waitFor();
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
    'no page error but the sign-in check before the key',
  );
});
