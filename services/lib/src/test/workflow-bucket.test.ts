/**
 * Bucket `PUNK_MCP_WORKFLOWS` over NATS, as the operator and `punk up` fill it: an object is checked by
 * `workflowEntryOf` (its bad field and node named), published once (an unchanged one writes nothing), seen by a
 * watch of another connection, and gone from it when withdrawn; an entry that is not a valid workflow is not served.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { buckets, createLogger, kvKey, NatsBus, publishWorkflow, watchWorkflows, withdrawWorkflow, workflowEntryOf } from '../index.js';
import { startPrivateNats, type PrivateNats } from './natstest.js';

const log = createLogger('workflow-bucket-test', 'silent');
let nats: PrivateNats;
let writer: NatsBus;
let reader: NatsBus;

before(async () => {
  nats = await startPrivateNats();
  writer = await NatsBus.connect({ url: nats.url, name: 'writer', log });
  reader = await NatsBus.connect({ url: nats.url, name: 'reader', log });
});

after(async () => {
  await writer?.close();
  await reader?.close();
  await nats?.stop();
});

const object = (spec: unknown) => ({
  apiVersion: 'mcp.punk.dev/v1alpha1',
  kind: 'McpWorkflow',
  metadata: { name: 'find', namespace: 'team-a', generation: 3 },
  spec,
});

const spec = {
  start: 'search',
  nodes: [
    { id: 'search', kind: 'tool_call', next: 'done', config: { server: 'memory', tool: 'search_nodes', args: {} } },
    { id: 'done', kind: 'output', config: { value: { kind: 'ref', path: 'vars.search' } } },
  ],
};

/** Resolves once `check` holds, re-checking after each change the watch reports. */
async function until(workflows: Awaited<ReturnType<typeof watchWorkflows>>, check: () => boolean): Promise<void> {
  if (check()) return;
  await new Promise<void>((resolve) => {
    const off = workflows.onChange(() => {
      if (check()) {
        off();
        resolve();
      }
    });
  });
}

test('workflowEntryOf names the bad field and its node, and the graph problems', () => {
  const bad = workflowEntryOf(object({ ...spec, nodes: [{ ...spec.nodes[0], config: { server: 'memory' } }, spec.nodes[1]] }));
  assert.equal(bad.success, false);
  assert.deepEqual(!bad.success && bad.errors.map((e) => [e.workflow, e.node, e.field]), [
    ['team-a/find', 'search', 'spec.nodes.0.config.tool'],
  ]);
  const cycle = workflowEntryOf(object({ ...spec, nodes: [{ ...spec.nodes[0], next: 'search' }, spec.nodes[1]] }));
  assert.deepEqual(!cycle.success && cycle.errors.map((e) => e.field), ['spec.nodes.0.next', 'spec.nodes.1']);
});

test('a published workflow is served by the watch of another replica, once, and withdrawn from it', async () => {
  const workflows = await watchWorkflows(reader, log);
  try {
    const parsed = workflowEntryOf(object(spec));
    assert.ok(parsed.success);
    const bucket = await writer.keyValue(buckets.mcpWorkflows);
    assert.equal(await publishWorkflow(bucket, parsed.data), true);
    assert.equal(await publishWorkflow(bucket, parsed.data), false, 'an unchanged workflow writes nothing');
    await until(workflows, () => workflows.get('team-a', 'find') !== undefined);
    assert.deepEqual(
      workflows.of('team-a').map((w) => [w.metadata.name, w.spec.nodes.length]),
      [['find', 2]],
    );
    assert.deepEqual(workflows.of('team-b'), []);
    // An entry that is not a valid workflow stops the one under its key from being served.
    await bucket.put(kvKey('team-a', 'find'), { ...object(spec), spec: { ...spec, start: 'nowhere' } });
    await until(workflows, () => workflows.get('team-a', 'find') === undefined);
    assert.equal(await publishWorkflow(bucket, parsed.data), true);
    await until(workflows, () => workflows.get('team-a', 'find') !== undefined);
    await withdrawWorkflow(bucket, 'team-a', 'find');
    await until(workflows, () => workflows.get('team-a', 'find') === undefined);
    assert.deepEqual(workflows.of('team-a'), []);
  } finally {
    await workflows.stop();
  }
});
