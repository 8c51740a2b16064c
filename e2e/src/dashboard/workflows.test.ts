/**
 * The Workflows view in Debian's Chromium against `punk up` (authentication on) with the examples' memory server and
 * a workflow that adds entities, searches them and branches on what it found: the list shows it ready, its form is
 * generated from its input JSON Schema (a required text field, the array of objects as a fieldset of items, each a
 * nested fieldset with its own array of strings, a hint from each description), a missing required field of an
 * item is named by its path before anything runs, and a run started from the form shows its
 * node-by-node trace and result (fitting a 390x844 phone too), linked to the run's page. A workflow calling a tool
 * the server lacks is not ready, its side-effect level unknown.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { repoRoot } from '../harness.js';
import { DESKTOP, openBrowser, PHONE, screenshot, signIn, startDashboardPunk, type DashboardPunk, type TestBrowser } from './browser.js';

const WORKFLOW = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: remember-and-find }
spec:
  description: Adds entities to the memory graph, then looks a topic up and says whether anything was found.
  input:
    type: object
    properties:
      topic: { type: string, description: What to look for after adding }
      entities:
        type: array
        description: Entities to add to the graph
        items:
          type: object
          properties:
            name: { type: string }
            entityType: { type: string, description: 'person, place, …' }
            observations: { type: array, items: { type: string } }
          required: [name, entityType, observations]
    required: [topic, entities]
  start: add
  nodes:
    - id: add
      kind: tool_call
      next: find
      config: { server: memory, tool: create_entities, args: { entities: { kind: ref, path: input.entities } } }
    - id: find
      kind: tool_call
      next: found
      config: { server: memory, tool: search_nodes, args: { query: { kind: ref, path: input.topic } }, saveAs: hits }
    - id: found
      kind: branch
      next: nothing
      config:
        cases:
          - when: { kind: ne, left: { kind: ref, path: vars.hits.entities }, right: { kind: literal, value: [] } }
            next: summary
    - id: summary
      kind: output
      config:
        value: { kind: object, fields: { topic: { kind: ref, path: input.topic }, found: { kind: literal, value: true }, hits: { kind: ref, path: vars.hits.entities } } }
    - id: nothing
      kind: output
      config:
        value: { kind: object, fields: { topic: { kind: ref, path: input.topic }, found: { kind: literal, value: false } } }
`;

/** A workflow whose tool the memory server lacks: never ready, its level unknown. */
const NOT_READY = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: zz-looks-everywhere }
spec:
  start: look
  nodes:
    - { id: look, kind: tool_call, config: { server: memory, tool: read_everywhere, args: {} } }
`;

/** A workflow without input: its form has no field, and Run workflow runs it with `{}`. */
const NO_INPUT = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: show-the-graph }
spec:
  start: read
  nodes:
    - { id: read, kind: tool_call, config: { server: memory, tool: read_graph, args: {} } }
`;

let punk: DashboardPunk;
let browser: TestBrowser;

before(async () => {
  punk = await startDashboardPunk({
    files: {
      'memory.yaml': await readFile(join(repoRoot, 'examples/memory.yaml'), 'utf8'),
      'workflow.yaml': WORKFLOW,
      'not-ready.yaml': NOT_READY,
      'no-input.yaml': NO_INPUT,
    },
  });
  browser = await openBrowser();
});

after(async () => {
  await browser?.close();
  await punk?.close();
});

test('a workflow runs from the form generated from its input schema and shows its node-by-node trace', { timeout: 180_000 }, async () => {
  const { page } = browser;
  await signIn(page, punk.baseUrl, punk.adminKey);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Workflows', exact: true }).click();
  const panel = page.getByRole('region', { name: /remember-and-find/ });
  // The workflow is ready once the memory server listed its tools.
  for (;;) {
    await panel.waitFor();
    if ((await panel.getByText('ready', { exact: true }).count()) > 0) break;
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.waitForTimeout(500);
  }
  // A workflow that is not ready shows its level as unknown, not guessed from its tool's name (read_…: 1).
  await page.getByRole('button', { name: 'zz-looks-everywhere' }).click();
  await page.getByText('side-effect level unknown (a tool it calls is not in the catalog)').waitFor();
  await page.getByRole('button', { name: 'remember-and-find' }).click();

  const form = page.getByRole('form', { name: 'Run remember-and-find' });
  assert.equal(await form.getByLabel('topic').getAttribute('type'), 'text');
  assert.equal(await form.getByLabel('topic').getAttribute('aria-describedby'), 'wf-remember-and-find-topic-hint');
  await form.getByText('What to look for after adding').waitFor();
  const entities = form.getByRole('group', { name: 'entities', exact: true });
  await entities.getByText('Entities to add to the graph').waitFor();
  assert.equal(await form.locator('textarea').count(), 0, 'no JSON field: the array of objects is a nested form');

  await form.getByLabel('topic').fill('Ada');
  await entities.getByRole('button', { name: 'Add to entities' }).click();
  const entity = entities.getByRole('group', { name: 'entities 1', exact: true });
  await entity.getByRole('textbox', { name: 'entityType', exact: true }).fill('person');
  await form.getByRole('button', { name: 'Run workflow' }).click();
  await form.getByRole('alert').filter({ hasText: 'entities[0].name is required: fill it in' }).waitFor();

  await entity.getByRole('textbox', { name: 'name', exact: true }).fill('Ada');
  const observations = entity.getByRole('group', { name: 'observations', exact: true });
  await observations.getByRole('button', { name: 'Add to observations' }).click();
  await observations.getByRole('button', { name: 'Add to observations' }).click();
  await observations.getByRole('textbox', { name: 'observations 1', exact: true }).fill('wrote the first program');
  await observations.getByRole('textbox', { name: 'observations 2', exact: true }).fill('a stray line');
  await observations.getByRole('button', { name: 'Remove observations 2' }).click();
  assert.equal(await observations.getByRole('textbox').count(), 1);
  await form.getByRole('button', { name: 'Run workflow' }).click();
  const trace = page.getByRole('region', { name: 'Run trace' });
  await trace.getByText('ok', { exact: true }).waitFor();
  const nodes = trace.getByRole('list', { name: 'Nodes' }).getByRole('listitem');
  assert.deepEqual(
    (await nodes.allTextContents()).map((text) => text.split(' ')[0]),
    ['add', 'find', 'found', 'summary'],
    'each node in the order it ran',
  );
  assert.match((await nodes.nth(0).textContent()) ?? '', /add tool_call memory\/create_entities · \d+ ms → find/);
  assert.match((await nodes.nth(2).textContent()) ?? '', /found branch · \d+ ms → summary/);
  const result = JSON.parse((await trace.getByLabel('Workflow result').textContent()) ?? '') as { topic: string; found: boolean };
  assert.equal(result.topic, 'Ada');
  assert.equal(result.found, true);
  await screenshot(page, 'workflows');

  await page.setViewportSize(PHONE);
  assert.ok((await page.evaluate<number>('document.documentElement.scrollWidth')) <= PHONE.width, 'the view fits a phone');
  await page.setViewportSize(DESKTOP);

  await trace.getByRole('link', { name: /^[0-9a-f-]{36}$/ }).click();
  await page.getByRole('heading', { name: /^Run /, level: 1 }).waitFor();
  const events = await page.getByRole('list', { name: 'Events' }).textContent();
  assert.match(events ?? '', /workflow\.started[\s\S]*node\.started[\s\S]*tool\.called[\s\S]*workflow\.completed/);
  assert.deepEqual(
    browser.errors.filter((error) => !/status of 401/.test(error)),
    [],
    'no page error but the sign-in check before the key',
  );
});

test('a workflow without input runs from its form, which has no field', { timeout: 120_000 }, async () => {
  const { page } = browser;
  await page.goto(`${punk.baseUrl}/ui/servers`);
  await page.getByRole('navigation', { name: 'Views' }).getByRole('link', { name: 'Workflows', exact: true }).click();
  await page.getByRole('button', { name: 'show-the-graph' }).click();
  const form = page.getByRole('form', { name: 'Run show-the-graph' });
  assert.equal(await form.getByRole('textbox').count(), 0, 'no field to fill');
  await form.getByRole('button', { name: 'Run workflow' }).click();
  const trace = page.getByRole('region', { name: 'Run trace' });
  await trace.getByText('ok', { exact: true }).waitFor();
  assert.match(
    (await trace.getByRole('list', { name: 'Nodes' }).getByRole('listitem').nth(0).textContent()) ?? '',
    /read tool_call memory\/read_graph/,
  );
  assert.equal(await form.getByRole('alert').count(), 0, 'no error under the form');
});
