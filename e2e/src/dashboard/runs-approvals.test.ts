/**
 * The dashboard's Runs, Run, Approvals and Audit views in Debian's Chromium against `punk up` (authentication on)
 * with the examples' memory server and a policy whose deletions wait for an approver: an agent calls a tool through
 * `/mcp` with the SDK's Client and an admin watching Runs sees the run appear without reloading, filters the list
 * and opens the run (its decision with rule and reason, arguments and result); the agent's level-4
 * `delete_entities` waits while the admin reads its arguments in Approvals and approves it with the keyboard, and the
 * agent gets its result, and another is denied with a reason, which the agent is told (the agent, signed in with its
 * own key, sees that request without Approve or Deny: it may not decide its own call); the ledger verifies in Audit; with redaction on, a run's page shows its arguments masked. The views work at 390x844 without sideways scrolling, and the
 * pages log no error. Screenshots of each view go to docs/screenshots/.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, textOf } from '../clients.js';
import { eventually, repoRoot, createApiKey } from '../harness.js';
import { openBrowser, PHONE, screenshot, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

/** Deletions in the memory graph need an approval, and the call waits up to 2 minutes for one made elsewhere. */
const POLICY = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: deletions-wait }
spec:
  priority: 10
  rules:
    - name: deletions-wait-for-a-person
      servers: [memory]
      tools: [delete_entities]
      decision: approval_required
      reason: a person confirms each deletion
      approval: { wait: 2m }
`;

/** A page error other than the one 401 of the sign-in's first check (is a key needed?) before a key is entered. */
const unexpected = (error: string) => !/status of 401/.test(error);

describe('dashboard runs, approvals and audit', () => {
  let punk: DashboardPunk;
  let browser: TestBrowser;
  let agent: Client;
  /** The agent's key: no admin scope. */
  let agentKey: string;
  /** The page of the first test's run, below /ui. */
  let runPath = 'runs';

  before(async () => {
    punk = await startDashboardPunk({
      files: { 'memory.yaml': await readFile(join(repoRoot, 'examples/memory.yaml'), 'utf8'), 'policy.yaml': POLICY },
    });
    // The agent has a key of its own (no admin scope), so the admin who approves is not the caller.
    ({ key: agentKey } = await createApiKey(punk.baseUrl, punk.adminKey, { name: 'agent', groups: ['agents-under-test'] }));
    agent = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { authorization: `Bearer ${agentKey}` });
    browser = await openBrowser();
    await signIn(browser.page, punk.baseUrl, punk.adminKey);
  });
  after(async () => {
    await agent?.close();
    await browser?.close();
    await punk?.close();
  });

  test('a call through /mcp appears in Runs without a reload, the filters narrow the list, and its page tells what happened', async () => {
    const { page } = browser;
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await page.getByText(/run(s)?, newest first; live/).waitFor();
    await page.evaluate('window.stillTheSamePage = true');

    const result = await agent.callTool({ name: 'memory__read_graph', arguments: {} });
    assert.notEqual(result.isError, true, textOf(result));
    const runs = page.getByRole('table', { name: 'Runs' });
    const row = runs.getByRole('row').filter({ hasText: 'read_graph' }).first();
    await row.waitFor();
    assert.equal(await page.evaluate('window.stillTheSamePage'), true, 'no reload');
    assert.match((await row.textContent()) ?? '', /memory.*read_graph.*api-key:.*ok/);
    await screenshot(page, 'runs');

    await page.getByLabel('Tool', { exact: true }).fill('no-such-tool');
    await page.getByLabel('Tool', { exact: true }).press('Enter');
    await page.getByText('0 runs matching the filters').waitFor();
    await page.getByRole('button', { name: 'Clear' }).click();
    // A local time a day ahead, as a datetime-local field takes it: no run is active since then.
    const tomorrow = new Date(Date.now() + 86_400_000 - new Date().getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
    await page.getByLabel('Active since').fill(tomorrow);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('0 runs matching the filters').waitFor();
    await page.getByLabel('Active since').fill('');
    await page.getByLabel('Tool', { exact: true }).fill('read_graph');
    await page.getByLabel('Outcome').selectOption('ok');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText(/^1 run matching the filters/).waitFor();

    await row.getByRole('link', { name: /^Run / }).click();
    await page.getByRole('heading', { name: /^Run [0-9a-f-]+$/, level: 1 }).waitFor();
    runPath = new URL(page.url()).pathname.replace(/^\/ui\//, '');
    const decisions = page.getByRole('table', { name: 'Decisions' });
    await decisions.getByText('allow', { exact: true }).waitFor();
    assert.match((await decisions.textContent()) ?? '', /default\//, 'the rule that decided');
    assert.equal(await page.getByLabel('Arguments', { exact: true }).textContent(), '{}');
    assert.match((await page.getByLabel('Result', { exact: true }).textContent()) ?? '', /entities|content/);
    const events = page.getByRole('list', { name: 'Events' }).getByRole('listitem');
    assert.ok((await events.count()) >= 2, 'tool.called (carrying the decision) and tool.completed');
    assert.match((await events.first().textContent()) ?? '', /#\d+ \+0 ms/);
    await screenshot(page, 'run');
  });

  test('a waiting level-4 call is approved in Approvals with the keyboard and the client gets its result', async () => {
    const { page } = browser;
    const created = await agent.callTool({
      name: 'memory__create_entities',
      arguments: { entities: [{ name: 'scratch-entity', entityType: 'test', observations: ['made by the dashboard test'] }] },
    });
    assert.notEqual(created.isError, true, textOf(created));
    const waiting = agent.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['scratch-entity'] } });

    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Approvals', exact: true }).click();
    const card = page.getByRole('article').filter({ hasText: 'memory/delete_entities' });
    await card.waitFor();
    assert.match((await card.textContent()) ?? '', /pending.*api-key:[0-9a-f]+ \(agents-under-test\).*deletions-wait-for-a-person/);
    await card.getByLabel('Arguments of delete_entities').filter({ hasText: 'scratch-entity' }).waitFor();
    assert.match((await card.textContent()) ?? '', /Expires.*\(in 1[0-5] min\)/);
    await screenshot(page, 'approvals');

    const reason = card.getByLabel('Reason');
    await reason.focus();
    await page.keyboard.type('checked in the dashboard');
    await page.keyboard.press('Enter');
    await page.getByText(/^Approved memory\/delete_entities/).waitFor();

    const result = await waiting;
    assert.notEqual(result.isError, true, textOf(result));
    assert.match(textOf(result), /deleted/i);
    await page.getByText('No pending approval requests.').waitFor();
    await page.getByLabel('Show').selectOption('consumed');
    const consumed = page.getByRole('article').filter({ hasText: 'memory/delete_entities' });
    assert.match((await consumed.textContent()) ?? '', /consumed.*Decided by.*: checked in the dashboard/);
  });

  test('a waiting call denied in Approvals with a reason gets the denial at once', async () => {
    const { page } = browser;
    await page.getByLabel('Show').selectOption('pending');
    const waiting = agent.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['someone-else'] } });
    const card = page.getByRole('article').filter({ hasText: 'memory/delete_entities' });
    await card.getByLabel('Arguments of delete_entities').filter({ hasText: 'someone-else' }).waitFor();

    // The agent, signed in with its own key in another tab, sees its request but may not decide it.
    const agentPage = await browser.context.newPage();
    try {
      await signIn(agentPage, punk.baseUrl, agentKey);
      const own = agentPage.getByRole('article').filter({ hasText: 'memory/delete_entities' });
      // The reason is governance's (the API's decideRefusal), not a copy of its rule in the dashboard.
      await own
        .getByText(
          /approval [0-9a-f-]{36} is decided by an admin of tenant default \(rule deletions-wait\/deletions-wait-for-a-person names no approvers\); \S+ also made its call \(rule deletions-wait\/deletions-wait-for-a-person does not set approval\.allowSelf\)/,
        )
        .waitFor();
      assert.equal(await own.getByRole('button', { name: /^(Approve|Deny)$/ }).count(), 0, 'no decision for the caller');
    } finally {
      await agentPage.close();
    }

    await card.getByLabel('Reason').fill('not this one');
    await card.getByLabel('Reason').press('Tab');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate<string>('document.activeElement.textContent'), 'Deny', 'Tab reaches Deny after Approve');
    await page.keyboard.press('Enter');
    await page.getByText(/^Denied memory\/delete_entities/).waitFor();
    const result = await waiting;
    assert.equal(result.isError, true);
    assert.match(textOf(result), /denied.*not this one/);
  });

  test('the ledger verifies in Audit', async () => {
    const { page } = browser;
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Audit', exact: true }).click();
    await page.getByLabel(/From the first event/).check();
    await page.getByRole('button', { name: 'Verify the ledger' }).click();
    const verdict = page.getByRole('region', { name: 'Verification result' });
    await verdict.getByText('verified').waitFor();
    assert.match((await verdict.textContent()) ?? '', /verifies up to event \d+, its head: every event is intact/);
    await screenshot(page, 'audit');
  });

  test('with redaction on, a run page shows the arguments masked as the ledger stored them', async () => {
    const { page } = browser;
    const set = await fetch(`${punk.baseUrl}/api/v1/settings`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${punk.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'redaction', value: true }),
    });
    assert.equal(set.status, 200, await set.clone().text());
    // The gateway learns of the setting through a bucket watch: ask until a call's arguments come back masked.
    await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByLabel('Tool', { exact: true }).fill('search_nodes');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const masked = await eventually(async () => {
      const result = await agent.callTool({ name: 'memory__search_nodes', arguments: { query: 'ada@example.com' } });
      assert.notEqual(result.isError, true, textOf(result));
      const row = page.getByRole('table', { name: 'Runs' }).getByRole('row').filter({ hasText: 'search_nodes' }).first();
      await row.waitFor();
      await row.getByRole('link', { name: /^Run / }).click();
      const args = page.getByLabel('Arguments', { exact: true });
      await args.waitFor();
      const text = (await args.textContent()) ?? '';
      await page.getByRole('link', { name: 'Back to Runs' }).click();
      return text.includes('[email]') ? text : undefined;
    }, 30_000);
    assert.ok(masked, 'a call after the setting shows its arguments masked');
    assert.doesNotMatch(masked, /ada@example\.com/);
  });

  test('the views fit a phone (390x844) without sideways scrolling', async () => {
    const phone = await openBrowser(PHONE);
    try {
      await signIn(phone.page, punk.baseUrl, punk.adminKey);
      for (const path of ['runs', runPath, 'approvals', 'audit']) {
        await phone.page.goto(`${punk.baseUrl}/ui/${path}`);
        await phone.page.getByRole('heading', { level: 1 }).waitFor();
        const width = await phone.page.evaluate<number>('document.documentElement.scrollWidth');
        assert.ok(width <= PHONE.width, `/ui/${path} is ${String(width)} px wide`);
      }
      assert.deepEqual(phone.errors.filter(unexpected), []);
    } finally {
      await phone.close();
    }
  });

  test('the pages logged no error', () => {
    assert.deepEqual(browser.errors.filter(unexpected), []);
  });
});
