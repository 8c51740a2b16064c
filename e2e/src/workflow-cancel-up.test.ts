/**
 * Cancelling workflow runs, and the policy decision on their trigger, on `punk up` with authentication on, over a real
 * stdio MCP server of both eras (services/mcp-front/src/test/fixtures/dual-era.mjs: `hold` waits until cancelled and
 * logs the cancellation it saw, `slow` answers after 1.5 s). A run cancelled through the API mid-node stops there:
 * the upstream call is cancelled, the next node never starts, `workflow.cancelled` ends it on the ledger, and a
 * second cancellation is a 409 naming its state, as is one of a completed run; a client of either era that cancels
 * its `punk_workflow__…` call cancels the run; `punk mcp` cancels a run with `punk_cancel_workflow_run`, and its
 * client cancelling `punk_run_workflow` cancels that run; a rule denying a group the workflow refuses its trigger (MCP
 * and API), naming the rule, on the ledger, while another caller runs it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectClient, textOf, type Era } from './clients.js';
import { createApiKey, eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { call, punkMcp } from './punk-mcp-client.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');
const FIXTURE = join(repoRoot, 'services/mcp-front/src/test/fixtures/dual-era.mjs');

let dir: string;
let eventLog: string;
let punk: RunningPunk;
let userKey: string;
let internKey: string;
let internAdminKey: string;
const admin = { authorization: `Bearer ${BOOTSTRAP}` };

before(async () => {
  dir = await manifestDir('workflow-cancel-up', {});
  eventLog = join(dir, 'events.log');
  const manifests = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: dual }
spec:
  image: local/dual-era
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE)}, --stdio]
  env: [{ name: EVENT_LOG, value: ${JSON.stringify(eventLog)} }]
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: workflow-guard }
spec:
  rules:
    - { name: no-interns, groups: [interns], tools: [hold-on], decision: deny, reason: interns do not start hold-on }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: hold-on }
spec:
  start: first
  nodes:
    - { id: first, kind: tool_call, next: second, config: { server: dual, tool: hold } }
    - { id: second, kind: tool_call, config: { server: dual, tool: slow } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: quick }
spec:
  start: only
  nodes:
    - { id: only, kind: tool_call, config: { server: dual, tool: slow } }
`;
  await writeFile(join(dir, 'manifests.yaml'), manifests);
  punk = await startPunk({
    manifestDir: dir,
    env: { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'https://punk.example.test', PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP },
  });
  userKey = (await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'alice' })).key;
  internKey = (await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'intern', groups: ['interns'] })).key;
  internAdminKey = (await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'intern admin', groups: ['interns'], scopes: ['punk:admin'] })).key;
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

type Event = { type: string; data: Record<string, any> };

/** Cancellations the upstream server saw (lines `cancelled <requestId>` of its event log). */
const cancellations = async () =>
  (await readFile(eventLog, 'utf8').catch(() => '')).split('\n').filter((line) => line.startsWith('cancelled ')).length;

/** POSTs to the API as `headers` and answers status and body. */
async function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = admin,
): Promise<{ status: number; body: Record<string, any> }> {
  const response = await fetch(`${punk.baseUrl}/api/v1${path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** The events of run `runId` once `done` holds for them (30 s at most). */
async function eventsOf(runId: string, done: (events: Event[]) => boolean): Promise<Event[]> {
  const events = await eventually(async () => {
    const response = await fetch(`${punk.baseUrl}/api/v1/runs/${runId}`, { headers: admin });
    if (response.status !== 200) return undefined;
    const { events } = (await response.json()) as { events: Event[] };
    return done(events) ? events : undefined;
  }, 30_000);
  assert.ok(events, `run ${runId}: the events awaited are on the ledger`);
  return events;
}

const holding = (events: Event[]) => events.some((e) => e.type === 'tool.called' && e.data.name === 'hold');
const ended = (events: Event[]) => events.some((e) => e.type.startsWith('workflow.') && e.type !== 'workflow.started');

/** The cancelled run's story on the ledger: the hold node cancelled, the next one never started, workflow.cancelled last. */
function assertCancelledAtFirst(events: Event[], reason: RegExp): void {
  const last = events.at(-1)!;
  assert.equal(last.type, 'workflow.cancelled', events.map((e) => e.type).join(', '));
  assert.equal(last.data.outcome, 'cancelled');
  assert.equal(last.data.node, 'first');
  assert.match(String(last.data.reason), reason);
  const first = events.find((e) => e.type === 'node.completed' && e.data.node === 'first');
  assert.equal(first?.data.isError, true);
  assert.match(String(first?.data.error), /node first: the run was cancelled/);
  assert.ok(!events.some((e) => e.type === 'node.started' && e.data.node === 'second'), 'the next node never started');
}

test('a run cancelled through the API mid-node: the upstream call is cancelled, workflow.cancelled ends it, a second cancel is a 409', async () => {
  const seen = await cancellations();
  const started = await post('/workflows/hold-on/runs', { waitSeconds: 0 });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  const { runId } = started.body as { runId: string };
  await eventsOf(runId, holding);
  const cancelled = await post(`/workflows/hold-on/runs/${runId}/cancel`, {});
  assert.equal(cancelled.status, 200, JSON.stringify(cancelled.body));
  assert.deepEqual(cancelled.body, { runId, state: 'cancelled' });
  assertCancelledAtFirst(await eventsOf(runId, ended), /cancelled by bootstrap-admin through the API/);
  assert.ok(await eventually(async () => ((await cancellations()) > seen ? true : undefined), 10_000), 'the upstream saw the cancellation');
  const { run } = (await (await fetch(`${punk.baseUrl}/api/v1/runs/${runId}`, { headers: admin })).json()) as { run: { outcome: string } };
  assert.equal(run.outcome, 'cancelled');
  const again = await post(`/workflows/hold-on/runs/${runId}/cancel`, {});
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, 'WorkflowRunNotRunning');
  assert.match(again.body.error.message, new RegExp(`run ${runId} of workflow hold-on is cancelled, not running`));
});

test('cancelling a completed run is a 409 naming its state; an unknown run is a 404', async () => {
  const done = await post('/workflows/quick/runs', { waitSeconds: 20 });
  assert.equal(done.body.state, 'completed', JSON.stringify(done.body));
  const late = await post(`/workflows/quick/runs/${done.body.runId as string}/cancel`, {});
  assert.equal(late.status, 409);
  assert.match(late.body.error.message, /is completed, not running: only a running run can be cancelled/);
  const unknown = await post(`/workflows/quick/runs/00000000-0000-4000-8000-000000000000/cancel`, {});
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.error.code, 'WorkflowRunNotFound');
  // A run of another workflow is not found under this one.
  const other = await post(`/workflows/hold-on/runs/${done.body.runId as string}/cancel`, {});
  assert.equal(other.status, 404);
});

for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
  test(`a ${era} client cancelling its punk_workflow__ call cancels the run and its upstream call`, async () => {
    const seen = await cancellations();
    const listed = async () =>
      (
        (await (
          await fetch(`${punk.baseUrl}/api/v1/runs?trigger=mcp&tool=punk_workflow__hold-on&limit=500`, { headers: admin })
        ).json()) as {
          runs: Array<{ runId: string }>;
        }
      ).runs.map((r) => r.runId);
    const before = new Set(await listed());
    const client = await connectClient(`${punk.baseUrl}/mcp`, era, { authorization: `Bearer ${userKey}` });
    try {
      const abort = new AbortController();
      const call = client.callTool({ name: 'punk_workflow__hold-on', arguments: {} }, { signal: abort.signal });
      call.catch(() => undefined);
      const runId = await eventually(async () => (await listed()).find((id) => !before.has(id)), 30_000);
      assert.ok(runId, 'the run is on the ledger');
      await eventsOf(runId, holding);
      abort.abort('the user changed their mind');
      await assert.rejects(call);
      assertCancelledAtFirst(await eventsOf(runId, ended), /./);
      assert.ok(
        await eventually(async () => ((await cancellations()) > seen ? true : undefined), 10_000),
        'the upstream saw the cancellation',
      );
    } finally {
      await client.close();
    }
  });
}

test('punk mcp: punk_cancel_workflow_run cancels a running run, then names its state; cancelling punk_run_workflow cancels its run', async () => {
  const { client, stderr } = await punkMcp(punk.baseUrl, BOOTSTRAP);
  try {
    const started = await post('/workflows/hold-on/runs', { waitSeconds: 0 });
    const { runId } = started.body as { runId: string };
    await eventsOf(runId, holding);
    const cancelled = await call(client, 'punk_cancel_workflow_run', { name: 'hold-on', runId });
    assert.notEqual(cancelled.isError, true, `${textOf(cancelled)}\n${stderr()}`);
    assert.deepEqual(cancelled.structuredContent, { runId, state: 'cancelled' });
    assertCancelledAtFirst(await eventsOf(runId, ended), /cancelled by bootstrap-admin through the API/);
    const again = await call(client, 'punk_cancel_workflow_run', { name: 'hold-on', runId });
    assert.equal(again.isError, true);
    assert.match(textOf(again), /is cancelled, not running/);

    const mcpRuns = async () =>
      (
        (await (
          await fetch(`${punk.baseUrl}/api/v1/runs?trigger=mcp&tool=punk_workflow__hold-on&limit=500`, { headers: admin })
        ).json()) as {
          runs: Array<{ runId: string }>;
        }
      ).runs.map((r) => r.runId);
    const before = new Set(await mcpRuns());
    const abort = new AbortController();
    const running = client.callTool({ name: 'punk_run_workflow', arguments: { name: 'hold-on' } }, { signal: abort.signal });
    running.catch(() => undefined);
    const relayed = await eventually(async () => (await mcpRuns()).find((id) => !before.has(id)), 30_000);
    assert.ok(relayed, 'the run punk mcp started is on the ledger');
    await eventsOf(relayed, holding);
    abort.abort('no longer needed');
    await assert.rejects(running);
    assertCancelledAtFirst(await eventsOf(relayed, ended), /./);
  } finally {
    await client.close();
  }
});

test('a rule denying a group the workflow refuses its trigger, over MCP and the API, naming the rule, on the ledger', async () => {
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28', { authorization: `Bearer ${internKey}` });
  try {
    const refused = await client.callTool({ name: 'punk_workflow__quick', arguments: {} });
    assert.notEqual(refused.isError, true, `another workflow runs for the intern: ${textOf(refused)}`);
    const denied = await client.callTool({ name: 'punk_workflow__hold-on', arguments: {} });
    assert.equal(denied.isError, true);
    assert.match(
      textOf(denied),
      /workflow hold-on on server punk\.workflow was not run: .* is denied by policy rule workflow-guard\/no-interns/,
    );
  } finally {
    await client.close();
  }
  const api = await post('/workflows/hold-on/runs', { waitSeconds: 0 }, { authorization: `Bearer ${internAdminKey}` });
  assert.equal(api.status, 403, JSON.stringify(api.body));
  assert.equal(api.body.error.code, 'PolicyDenied');
  assert.match(api.body.error.message, /denied by policy rule workflow-guard\/no-interns \(interns do not start hold-on\)/);
  const { runs } = (await (
    await fetch(`${punk.baseUrl}/api/v1/runs?server=punk.workflow&outcome=denied&limit=50`, { headers: admin })
  ).json()) as {
    runs: Array<{ runId: string; tool: string }>;
  };
  assert.deepEqual(
    runs.map((r) => r.tool),
    ['punk_workflow__hold-on', 'punk_workflow__hold-on'],
    'each denied start is a run of the workflow tool',
  );
  const events = await eventsOf(runs[0]!.runId, (list) => list.length > 0);
  assert.deepEqual(
    events.map((e) => [e.type, e.data.decision, e.data.rule, e.data.target]),
    [['governance.decision', 'deny', 'workflow-guard/no-interns', 'hold-on']],
    'the denial is the run, and no node ran',
  );
});
