/**
 * Workflows in the gateway over a real stdio server (fixtures/counter.mjs), as the operator or `punk up` publish
 * them to bucket `PUNK_MCP_WORKFLOWS`: a ready workflow joins `catalog/list` as a tool of server `punk.workflow`
 * and its changes are broadcast (list_changed); a policy naming the caller matches the calls of the caller's run;
 * the limits on nodes, run time and result size fail a run naming the limit; a run whose replica died (its row
 * in gateway.workflow_runs not renewed) is recorded failed, outcome interrupted, once; and a text result that is
 * not JSON is saved as the text, a run without an output node answering the saved results.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import {
  buckets,
  catalogReplySchema,
  policyEntryOf,
  publishPolicy,
  publishWorkflow,
  subjects,
  withdrawWorkflow,
  workflowEntryOf,
  type Principal,
  type WorkflowRunReply,
  type WorkflowView,
} from '@punk/lib';
import { fixture, manifest, startHarness, waitFor, type Harness } from './harness.js';

let h: Harness;

before(async () => {
  h = await startHarness((tenant) => [manifest(tenant, 'counter', { command: [process.execPath, fixture('counter.mjs')] })], {
    workflowLimits: { maxNodes: 3, maxRunMs: 1_000, maxResultBytes: 200 },
  });
  await h.gateway.ready();
});

after(async () => {
  await h?.close();
});

/** Publishes workflow `name` of the harness's tenant with these nodes (the first is the start). */
async function publish(name: string, nodes: Array<Record<string, unknown>>): Promise<void> {
  const parsed = workflowEntryOf({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpWorkflow',
    metadata: { name, namespace: h.tenant },
    spec: { start: nodes[0]!.id, nodes },
  });
  assert.ok(parsed.success, JSON.stringify(!parsed.success && parsed.errors));
  await publishWorkflow(await h.bus.keyValue(buckets.mcpWorkflows), parsed.data);
}

const principal = (subject: string): Principal => ({ subject, tenant: h.tenant, groups: [] });

/** Runs workflow `name` through the workflows API on `punk.gateway.admin`, as `subject`. */
async function run(name: string, subject = 'alice'): Promise<WorkflowRunReply> {
  return (await h.bus.request(
    subjects.gatewayAdmin,
    { op: 'workflows.run', tenant: h.tenant, principal: principal(subject), name, body: { waitSeconds: 20 } },
    { timeoutMs: 30_000 },
  )) as WorkflowRunReply;
}

const count = (id: string, next?: string) => ({
  id,
  kind: 'tool_call',
  ...(next && { next }),
  config: { server: 'counter', tool: 'count' },
});

test('a published workflow joins catalog/list as a tool of punk.workflow, with list_changed on each change', async () => {
  await publish('counting', [count('one')]);
  await waitFor(() => h.changes.some((c) => c.server === 'punk.workflow' && c.change === 'list_changed'), 10_000, 'list_changed');
  const { servers } = catalogReplySchema.parse(await h.call({ method: 'catalog/list' }));
  const entry = servers.find((s) => s.name === 'punk.workflow');
  assert.deepEqual(
    entry?.tools.map((t) => t.name),
    ['counting'],
  );
  // count is a read by the verb heuristics (level 1): the workflow is read-only.
  assert.equal((entry?.tools[0] as { annotations?: { readOnlyHint?: boolean } }).annotations?.readOnlyHint, true);
  assert.equal(entry?.sideEffectLevels['counting'], 1);
  const before = h.changes.length;
  await withdrawWorkflow(await h.bus.keyValue(buckets.mcpWorkflows), h.tenant, 'counting');
  await waitFor(() => h.changes.slice(before).some((c) => c.server === 'punk.workflow'), 10_000, 'list_changed after withdraw');
  const again = catalogReplySchema.parse(await h.call({ method: 'catalog/list' }));
  assert.equal(
    again.servers.find((s) => s.name === 'punk.workflow'),
    undefined,
  );
});

test('a workflow calling a tool the catalog does not list is not ready, its level unknown (not guessed from the name)', async () => {
  await publish('reads-nothing', [{ id: 'look', kind: 'tool_call', config: { server: 'counter', tool: 'read_missing' } }]);
  const get = (): Promise<WorkflowView | undefined> =>
    h.bus
      .request(
        subjects.gatewayAdmin,
        { op: 'workflows.get', tenant: h.tenant, principal: principal('alice'), name: 'reads-nothing' },
        { timeoutMs: 10_000 },
      )
      .then((reply) => (reply as { workflow: WorkflowView }).workflow)
      .catch(() => undefined);
  await waitFor(async () => (await get()) !== undefined, 10_000, 'the workflow served');
  const view = (await get())!;
  assert.equal(view.ready, false);
  assert.equal(view.sideEffectLevel, null);
  assert.equal(view.readOnly, false);
  assert.match(view.errors.join('; '), /read_missing/);
  await withdrawWorkflow(await h.bus.keyValue(buckets.mcpWorkflows), h.tenant, 'reads-nothing');
});

test("a policy rule naming the caller matches its run's calls (the agent acts for it)", async () => {
  const policy = policyEntryOf({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpPolicy',
    metadata: { name: 'no-alice', namespace: h.tenant },
    spec: {
      rules: [{ name: 'alice-counts-not', principals: ['alice'], tools: ['count'], decision: 'deny', reason: 'alice may not count' }],
    },
  });
  assert.ok(policy.success);
  await publishPolicy(await h.bus.keyValue(buckets.mcpPolicies), policy.data);
  await publish('count-once', [count('one')]);
  await waitFor(async () => (await run('count-once', 'bob')).state === 'completed', 10_000, 'the workflow runs for bob');
  const denied = await run('count-once', 'alice');
  assert.equal(denied.state, 'failed');
  assert.match(denied.error?.message ?? '', /denied by policy rule no-alice\/alice-counts-not/);
  const decision = h.events.find((e) => e.runId === denied.runId && e.type === 'governance.decision');
  assert.deepEqual([decision?.principal?.subject, decision?.principal?.actingFor?.subject], ['workflow-engine', 'alice']);
});

test('the limits on nodes, run time and result size fail the run naming the limit', async () => {
  await publish('too-long', [count('a', 'b'), count('b', 'c'), count('c', 'd'), count('d')]);
  await publish('too-slow', [
    { id: 'nap', kind: 'tool_call', config: { server: 'counter', tool: 'sleep', args: { ms: { kind: 'literal', value: 3_000 } } } },
  ]);
  await publish('too-big', [
    count('one', 'out'),
    { id: 'out', kind: 'output', config: { value: { kind: 'literal', value: 'x'.repeat(500) } } },
  ]);
  await waitFor(async () => (await run('too-big', 'bob').catch(() => undefined)) !== undefined, 10_000, 'the workflows are served');
  const long = await run('too-long', 'bob');
  assert.deepEqual([long.state, long.error?.code, long.error?.node], ['failed', 'WorkflowLimit', 'd']);
  assert.match(long.error?.message ?? '', /limit of 3 nodes \(maxNodes\)/);
  const slow = await run('too-slow', 'bob');
  assert.deepEqual([slow.error?.code, slow.error?.node], ['WorkflowTimeout', 'nap']);
  assert.match(slow.error?.message ?? '', /longer than its limit of 1000 ms \(maxRunMs\)/);
  const big = await run('too-big', 'bob');
  assert.deepEqual([big.error?.code, big.error?.node], ['WorkflowLimit', 'out']);
  assert.match(big.error?.message ?? '', /the result of the run is \d+ bytes as JSON, above the limit of 200 bytes \(maxResultBytes\)/);
});

test('a run whose replica died is recorded failed, outcome interrupted, once', async () => {
  const runId = randomUUID();
  await h.database.db.query(
    "INSERT INTO gateway.workflow_runs (tenant, run_id, workflow, instance, principal, started_at, renewed_at) VALUES ($1, $2, 'lost', 'gone-replica', $3, now() - interval '1 hour', now() - interval '1 hour')",
    [h.tenant, runId, JSON.stringify(principal('alice'))],
  );
  await waitFor(() => h.events.some((e) => e.runId === runId), 20_000, 'the interrupted run on the ledger');
  const events = h.events.filter((e) => e.runId === runId);
  assert.deepEqual(
    events.map((e) => [e.type, e.data.outcome, e.data.workflow]),
    [['workflow.failed', 'interrupted', 'lost']],
  );
  const { rows } = await h.database.db.query<{ state: string }>('SELECT state FROM gateway.workflow_runs WHERE run_id = $1', [runId]);
  assert.deepEqual(
    rows.map((r) => r.state),
    ['interrupted'],
  );
});

test('text that is not JSON is saved as the text; a run ending on a tool_call node answers the saved results', async () => {
  await publish('count-twice', [
    count('first', 'second'),
    { ...count('second'), config: { server: 'counter', tool: 'count', saveAs: 'again' } },
  ]);
  const reply = await run('count-twice', 'bob');
  assert.equal(reply.state, 'completed', JSON.stringify(reply));
  const result = reply.result as Record<string, unknown>;
  assert.deepEqual(Object.keys(result).sort(), ['again', 'first']);
  assert.match(String(result.first), /^calls=\d+ pid=\d+$/);
  assert.match(String(result.again), /^calls=\d+ pid=\d+$/);
  const completedOf = () => h.events.find((e) => e.runId === reply.runId && e.type === 'workflow.completed');
  await waitFor(() => completedOf() !== undefined, 10_000, 'workflow.completed on the ledger');
  const completed = completedOf();
  assert.deepEqual(completed?.data.result, result);
});
