/**
 * Cancelling a workflow run from the Workflows view, in Debian's Chromium against `punk up` (authentication on) with
 * a real stdio server of both eras (services/mcp-front/src/test/fixtures/dual-era.mjs, whose `hold` waits until
 * cancelled and logs the cancellation it saw): a run still running after the form's wait shows its trace with a
 * "Cancel run" button; a click cancels it, the trace ends `cancelled` at the node in flight naming who cancelled it,
 * the upstream call is cancelled, and the button is gone.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { eventually, repoRoot } from '../harness.js';
import { openBrowser, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

const FIXTURE = join(repoRoot, 'services/mcp-front/src/test/fixtures/dual-era.mjs');

let punk: DashboardPunk;
let browser: TestBrowser;
let eventLog: string;

before(async () => {
  eventLog = join(tmpdir(), `punk-workflow-cancel-${randomUUID()}.log`);
  punk = await startDashboardPunk({
    files: {
      'dual.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: dual }
spec:
  image: local/dual-era
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE)}, --stdio]
  env: [{ name: EVENT_LOG, value: ${JSON.stringify(eventLog)} }]
`,
      'workflow.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: hold-on }
spec:
  description: Holds until cancelled, then answers slowly.
  input: { type: object, properties: { note: { type: string, description: Not used } } }
  start: first
  nodes:
    - { id: first, kind: tool_call, next: second, config: { server: dual, tool: hold } }
    - { id: second, kind: tool_call, config: { server: dual, tool: slow } }
`,
    },
  });
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
  await rm(eventLog, { force: true });
});

test('a running workflow run is cancelled from its trace', { timeout: 180_000 }, async () => {
  const { page } = browser;
  await signIn(page, punk.baseUrl, punk.adminKey);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Workflows', exact: true }).click();
  const panel = page.getByRole('region', { name: /hold-on/ });
  // The workflow is ready once the server it calls has started and listed its tools.
  for (;;) {
    await panel.waitFor();
    if ((await panel.getByText('ready', { exact: true }).count()) > 0) break;
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.waitForTimeout(500);
  }
  await panel.getByRole('button', { name: 'Run workflow' }).click();
  // The form waits 10 s for the run to end; it holds, so the trace shows it running.
  const trace = page.getByRole('region', { name: 'Run trace' });
  const cancel = trace.getByRole('button', { name: 'Cancel run' });
  await cancel.waitFor({ timeout: 30_000 });
  await trace.getByText('running', { exact: true }).first().waitFor();
  await cancel.click();
  await trace.getByText('cancelled', { exact: true }).waitFor({ timeout: 30_000 });
  assert.equal(await cancel.count(), 0, 'no cancel button once the run ended');
  await trace.getByText(/cancelled at node first: cancelled by bootstrap-admin through the API/).waitFor();
  const nodes = trace.getByRole('list', { name: 'Nodes' }).getByRole('listitem');
  assert.deepEqual(
    (await nodes.allTextContents()).map((text) => text.split(' ')[0]),
    ['first'],
    'the next node never ran',
  );
  assert.match((await nodes.nth(0).textContent()) ?? '', /first tool_call dual\/hold · \d+ ms · error/);
  const seen = await eventually(async () => ((await readFile(eventLog, 'utf8').catch(() => '')).includes('cancelled ') ? true : undefined));
  assert.equal(seen, true, 'the upstream server saw its call cancelled');
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
    'no page error but the sign-in check before the key',
  );
});
