/**
 * Workflow runs on `punk up` (PGlite, in-process bus, authentication off), over a real stdio MCP server
 * (e2e/fixtures/workflow-tools.mjs): a ready workflow is a tool `punk_workflow__<name>` on `/mcp` for clients of both
 * eras and runs from `POST /api/v1/workflows/<name>/runs`; structured content is saved and read by a later node,
 * JSON text is the fallback, a branch goes each way; a denied node, an approval_required node and an approval node
 * fail the run closed (the approval node passes once approved), as do a tool that errors and a server that goes
 * down mid-run; an invalid workflow is refused naming its field; the run's events are on the ledger in order and
 * the chain verifies; a workflow added to the directory reaches clients as list_changed, and its run (trigger
 * `mcp`) is listed.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectClient, listAllTools, textOf, type Era } from './clients.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const server = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: tools }
spec:
  image: local/workflow-tools
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(`${repoRoot}/e2e/fixtures/workflow-tools.mjs`)}]
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: workflows }
spec:
  rules:
    - { name: no-echo-for-workflows, principals: [workflow-engine], tools: [echo], decision: deny, reason: workflows do not echo }
`;

const workflows = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: summarize }
spec:
  description: Looks a key up, then describes what it found.
  input: { type: object, properties: { key: { type: string } }, required: [key] }
  start: look
  nodes:
    - id: look
      kind: tool_call
      next: check
      config: { server: tools, tool: lookup, args: { key: { kind: ref, path: input.key } }, saveAs: found }
    - id: check
      kind: branch
      next: missing
      config:
        cases:
          - when: { kind: eq, left: { kind: ref, path: vars.found.found }, right: { kind: literal, value: true } }
            next: describe
    - id: describe
      kind: tool_call
      next: done
      config: { server: tools, tool: describe, args: { title: { kind: template, template: "{{vars.found.items.0.title}}" } }, saveAs: info }
    - id: done
      kind: output
      config:
        value:
          kind: object
          fields: { key: { kind: ref, path: input.key }, title: { kind: ref, path: vars.info.title }, length: { kind: ref, path: vars.info.length } }
    - id: missing
      kind: output
      config: { value: { kind: object, fields: { key: { kind: ref, path: input.key }, found: { kind: literal, value: false } } } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: denied }
spec:
  start: say
  nodes:
    - { id: say, kind: tool_call, config: { server: tools, tool: echo, args: { text: { kind: literal, value: hi } } } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: erase }
spec:
  start: remove
  nodes:
    - { id: remove, kind: tool_call, config: { server: tools, tool: delete_record, args: { id: { kind: literal, value: r1 } } } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: gated }
spec:
  input: { type: object, properties: { key: { type: string } } }
  start: ask
  nodes:
    - { id: ask, kind: approval, next: look, config: { message: may the workflow look the key up? } }
    - { id: look, kind: tool_call, config: { server: tools, tool: lookup, args: { key: { kind: literal, value: known } } } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: failing }
spec:
  start: boom
  nodes:
    - { id: boom, kind: tool_call, config: { server: tools, tool: fail } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: crashing }
spec:
  start: crash
  nodes:
    - { id: crash, kind: tool_call, next: after, config: { server: tools, tool: crash } }
    - { id: after, kind: tool_call, config: { server: tools, tool: lookup, args: { key: { kind: literal, value: x } } } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: broken }
spec:
  start: look
  nodes:
    - { id: look, kind: tool_call, config: { server: tools, tol: lookup } }
`;

let dir: string;
let punk: RunningPunk;

before(async () => {
  dir = await manifestDir('workflow-runs-up', { 'tools.yaml': server, 'workflows.yaml': workflows });
  punk = await startPunk({ manifestDir: dir });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

/** POSTs a run and answers its status and body. */
async function runOf(name: string, body: unknown): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${punk.baseUrl}/api/v1/workflows/${name}/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** The events of a run once its last event (`workflow.completed` or `workflow.failed`) is on the ledger. */
async function eventsOf(runId: string): Promise<Array<{ type: string; data: Record<string, any>; principal?: Record<string, any> }>> {
  const events = await eventually(async () => {
    const response = await fetch(`${punk.baseUrl}/api/v1/runs/${runId}`);
    if (response.status !== 200) return undefined;
    const { events } = (await response.json()) as { events: Array<{ type: string; data: Record<string, any> }> };
    return events.some((e) => e.type === 'workflow.completed' || e.type === 'workflow.failed') ? events : undefined;
  }, 30_000);
  assert.ok(events, `run ${runId} ended on the ledger`);
  return events;
}

test('an invalid workflow is refused naming its field; the API lists the others with their tool, levels and readiness', async () => {
  assert.match(
    punk.output(),
    /manifest error: workflows\.yaml \(document 7\) spec\.nodes\.0\.config: McpWorkflow default\/broken node look: Unrecognized key: \\"tol\\"/,
  );
  const response = await fetch(`${punk.baseUrl}/api/v1/workflows`);
  assert.equal(response.status, 200);
  const { workflows: listed } = (await response.json()) as { workflows: Array<Record<string, any>> };
  assert.deepEqual(
    listed.map((w) => w.name),
    ['crashing', 'denied', 'erase', 'failing', 'gated', 'summarize'],
  );
  const summarize = listed.find((w) => w.name === 'summarize')!;
  assert.equal(summarize.tool, 'punk_workflow__summarize');
  assert.equal(summarize.ready, true);
  assert.deepEqual(summarize.errors, []);
  assert.deepEqual(summarize.inputSchema.required, ['key']);
  assert.equal(listed.find((w) => w.name === 'erase')!.sideEffectLevel, 4);
  const one = await fetch(`${punk.baseUrl}/api/v1/workflows/summarize`);
  const { workflow } = (await one.json()) as { workflow: Record<string, any> };
  assert.equal(workflow.spec.start, 'look');
  assert.equal((await fetch(`${punk.baseUrl}/api/v1/workflows/nowhere`)).status, 404);
});

for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
  test(`a ${era} client sees the workflow tools on /mcp and runs one each way of its branch`, async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, era);
    try {
      const tools = await listAllTools(client);
      const tool = tools.find((t) => t.name === 'punk_workflow__summarize') as Record<string, any> | undefined;
      assert.ok(tool, tools.map((t) => t.name).join(', '));
      assert.equal(tool.description, 'Looks a key up, then describes what it found.');
      // lookup and describe are reads (levels 1); delete_record is level 4.
      assert.deepEqual(tool.annotations?.readOnlyHint, true);
      const erase = tools.find((t) => t.name === 'punk_workflow__erase') as Record<string, any> | undefined;
      assert.deepEqual([erase?.annotations?.readOnlyHint, erase?.annotations?.destructiveHint], [false, true]);
      assert.ok(!tools.some((t) => t.name === 'punk_workflow__broken'));
      const found = await client.callTool({ name: 'punk_workflow__summarize', arguments: { key: 'known' } });
      assert.notEqual(found.isError, true, textOf(found));
      // Structured content of lookup read by describe's template; describe's JSON text parsed as the fallback.
      assert.deepEqual(found.structuredContent, { key: 'known', title: 'the known thing', length: 15 });
      const missing = await client.callTool({ name: 'punk_workflow__summarize', arguments: { key: 'other' } });
      assert.deepEqual(missing.structuredContent, { key: 'other', found: false });
      const bad = await client.callTool({ name: 'punk_workflow__summarize', arguments: {} });
      assert.equal(bad.isError, true);
    } finally {
      await client.close();
    }
  });
}

test('a run from the API: 201 with its result, its events on the ledger in order under the agent, trigger api', async () => {
  const { status, body } = await runOf('summarize', { arguments: { key: 'known' } });
  assert.equal(status, 201, JSON.stringify(body));
  assert.equal(body.state, 'completed');
  assert.deepEqual(body.result, { key: 'known', title: 'the known thing', length: 15 });
  const events = await eventsOf(body.runId);
  const steps = events
    .filter((e) => e.type !== 'governance.decision')
    .map((e) => (e.type.startsWith('node.') ? `${e.type} ${e.data.node}` : e.type));
  assert.deepEqual(steps, [
    'workflow.started',
    'node.started look',
    'tool.called',
    'tool.completed',
    'node.completed look',
    'node.started check',
    'node.completed check',
    'node.started describe',
    'tool.called',
    'tool.completed',
    'node.completed describe',
    'node.started done',
    'node.completed done',
    'workflow.completed',
  ]);
  for (const event of events) {
    assert.equal(event.principal?.subject, 'workflow-engine', event.type);
    assert.equal(event.principal?.actingFor?.subject, 'anonymous', event.type);
  }
  assert.equal(events.find((e) => e.type === 'node.completed' && e.data.node === 'look')!.data.sideEffectLevel, 1);
  const runs = (await (await fetch(`${punk.baseUrl}/api/v1/runs?trigger=api&limit=50`)).json()) as {
    runs: Array<{ runId: string; trigger: string; server: string; tool: string; outcome: string; subject: string }>;
  };
  const run = runs.runs.find((r) => r.runId === body.runId);
  assert.deepEqual(
    run && [run.trigger, run.server, run.tool, run.outcome, run.subject],
    ['api', 'punk.workflow', 'punk_workflow__summarize', 'ok', 'anonymous'],
    'a workflow run is filed under punk.workflow, not under the server of its first node',
  );
  const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`)).json()) as { ok: boolean };
  assert.equal(verified.ok, true);
});

test('bad run requests name the field; a run that does not finish within its wait answers 202', async () => {
  const missing = await runOf('summarize', { arguments: {} });
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.code, 'InvalidArguments');
  assert.match(missing.body.error.message, /arguments: must have required property 'key'/);
  const wrong = await runOf('summarize', { arguments: { key: 'k' }, waitSeconds: 99 });
  assert.equal(wrong.status, 400);
  assert.match(wrong.body.error.message, /^body\.waitSeconds: /);
  const quick = await runOf('summarize', { arguments: { key: 'known' }, waitSeconds: 0 });
  assert.ok(quick.status === 202 || quick.status === 201, String(quick.status));
  if (quick.status === 202) assert.equal(quick.body.state, 'running');
  await eventsOf(quick.body.runId);
});

test('a denied node, an approval_required node and a tool error fail the run closed at their node', async () => {
  const denied = await runOf('denied', {});
  assert.equal(denied.body.state, 'failed');
  assert.equal(denied.body.error.node, 'say');
  assert.match(denied.body.error.message, /read:tools\/echo is denied by policy rule workflows\/no-echo-for-workflows/);
  const erase = await runOf('erase', {});
  assert.equal(erase.body.state, 'failed');
  assert.match(erase.body.error.message, /destroy:tools\/delete_record requires an approval/);
  // The gateway refused it: the message says it was not run, not that the tool answered an error.
  assert.match(erase.body.error.message, /tool delete_record on server tools was not run/);
  assert.doesNotMatch(erase.body.error.message, /answered an error/);
  const failing = await runOf('failing', {});
  assert.equal(failing.body.state, 'failed');
  assert.match(failing.body.error.message, /node boom: tool fail on server tools answered an error: this tool always fails/);
  const events = await eventsOf(failing.body.runId);
  assert.deepEqual(events.at(-1)!.data.outcome, 'failed');
  const run = (await (await fetch(`${punk.baseUrl}/api/v1/runs/${denied.body.runId}`)).json()) as { run: { outcome: string } };
  assert.equal(run.run.outcome, 'failed');
});

test('an approval node fails closed unattended, then passes once approved', async () => {
  const first = await runOf('gated', { arguments: { key: 'k' } });
  assert.equal(first.body.state, 'failed');
  assert.equal(first.body.error.node, 'ask');
  const id = /approval ([0-9a-f-]{36}) is pending/.exec(first.body.error.message)?.[1];
  assert.ok(id, first.body.error.message);
  const approved = await fetch(`${punk.baseUrl}/api/v1/approvals/${id}/approve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'fine' }),
  });
  assert.equal(approved.status, 200, await approved.clone().text());
  const second = await runOf('gated', { arguments: { key: 'k' } });
  assert.equal(second.body.state, 'completed', JSON.stringify(second.body));
  const third = await runOf('gated', { arguments: { key: 'k' } });
  assert.equal(third.body.state, 'failed', 'the approval was used once');
});

test('a server that goes down mid-run fails the run at that node', async () => {
  const crashed = await runOf('crashing', {});
  assert.equal(crashed.body.state, 'failed', JSON.stringify(crashed.body));
  assert.equal(crashed.body.error.node, 'crash');
  const events = await eventsOf(crashed.body.runId);
  assert.ok(!events.some((e) => e.type === 'node.started' && e.data.node === 'after'));
  // The gateway starts the server again: the next test's runs find it ready.
  const back = await eventually(async () => {
    const { server: view } = (await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers/tools`)).json()) as { server: { state: string } };
    return view.state === 'ready' ? true : undefined;
  }, 60_000);
  assert.equal(back, true, 'the server is ready again');
});

test('a workflow added to the manifests directory reaches clients of both eras as list_changed and a new tool', async () => {
  const legacy = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
  const modern = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28');
  try {
    const legacyHeard = new Promise<void>((done) => legacy.setNotificationHandler('notifications/tools/list_changed', () => done()));
    const modernHeard = new Promise<void>((done) => modern.setNotificationHandler('notifications/tools/list_changed', () => done()));
    const subscription = await modern.listen({ toolsListChanged: true });
    // Let the 2025 client's GET stream open before the change.
    await new Promise((done) => setTimeout(done, 500));
    await writeFile(
      join(dir, 'added.yaml'),
      `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: added }
spec:
  start: look
  nodes:
    - { id: look, kind: tool_call, config: { server: tools, tool: lookup, args: { key: { kind: literal, value: known } } } }
`,
    );
    await Promise.all([legacyHeard, modernHeard]);
    await subscription.close();
    for (const client of [legacy, modern]) {
      const { tools } = await client.listTools(undefined, { cacheMode: 'refresh' });
      assert.ok(
        tools.some((t) => t.name === 'punk_workflow__added'),
        tools.map((t) => t.name).join(', '),
      );
    }
    const ran = await modern.callTool({ name: 'punk_workflow__added', arguments: {} });
    assert.deepEqual(ran.structuredContent, { look: { key: 'known', found: true, items: [{ title: 'the known thing' }] } });
    const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?trigger=mcp&tool=punk_workflow__added`)).json()) as {
      runs: Array<{ trigger: string; outcome: string }>;
    };
    assert.deepEqual(
      runs.map((r) => [r.trigger, r.outcome]),
      [['mcp', 'ok']],
    );
  } finally {
    await legacy.close();
    await modern.close();
  }
});
