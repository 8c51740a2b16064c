/**
 * Workflows in the cluster's services: two gateway processes and governance over a nats-server of their own and a
 * scratch Postgres, the tally fixture as the server. A workflow published to bucket `PUNK_MCP_WORKFLOWS` (as the
 * operator publishes one) runs from the workflows API on `punk.gateway.admin` on whichever replica takes it, its
 * node events in order on the ledger stream; a run cancelled through `workflows.cancel` stops mid-node whichever
 * replica takes the cancellation (`workflow.cancelled`), and a second cancellation names its state; and when the
 * gateway running a run is killed (SIGKILL), the other replica records the run failed, outcome interrupted.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  buckets,
  PunkError,
  publishWorkflow,
  streams,
  subjects,
  workflowEntryOf,
  type LedgerEvent,
  type NatsBus,
  type WorkflowRunReply,
} from '@punk/lib';
import { startService, type ServiceProcess } from './processes.js';
import { tallyWorld, testBus, type TallyWorld } from './distributed.js';

let world: TallyWorld;
let bus: NatsBus;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  running.push(await startService('governance', world.env));
  running.push(await startService('gateway', world.env), await startService('gateway', world.env));
  bus = await testBus(world.nats.url);
  const parsed = workflowEntryOf({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpWorkflow',
    metadata: { name: 'count-then-read', namespace: world.setup.tenant },
    spec: {
      input: { type: 'object', properties: { ms: { type: 'number' } }, required: ['ms'] },
      start: 'count',
      nodes: [
        {
          id: 'count',
          kind: 'tool_call',
          next: 'read',
          config: { server: 'tally', tool: 'count', args: { n: { kind: 'literal', value: 7 } } },
        },
        {
          id: 'read',
          kind: 'tool_call',
          config: { server: 'tally', tool: 'read_slowly', args: { ms: { kind: 'ref', path: 'input.ms' } } },
        },
      ],
    },
  });
  assert.ok(parsed.success);
  await publishWorkflow(await bus.keyValue(buckets.mcpWorkflows), parsed.data);
});

after(async () => {
  await bus?.close();
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

/** Runs the workflow through the workflows API, waiting `waitSeconds`. */
async function run(ms: number, waitSeconds: number): Promise<WorkflowRunReply> {
  return (await bus.request(
    subjects.gatewayAdmin,
    {
      op: 'workflows.run',
      tenant: world.setup.tenant,
      principal: { subject: 'carol', tenant: world.setup.tenant, groups: [] },
      name: 'count-then-read',
      body: { arguments: { ms }, waitSeconds },
    },
    { timeoutMs: 40_000 },
  )) as WorkflowRunReply;
}

/** The ledger stream's events of run `runId` once `done` holds for them. */
async function eventsOf(runId: string, done: (events: LedgerEvent[]) => boolean, timeoutMs: number): Promise<LedgerEvent[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const messages = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 });
    const events = messages.map((m) => m.data as LedgerEvent).filter((e) => e.runId === runId);
    if (done(events)) return events;
    if (Date.now() > until) throw new Error(`run ${runId}: ${events.map((e) => e.type).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test('a workflow published to the bucket runs on a gateway replica over NATS, its events in order', { timeout: 120_000 }, async () => {
  // Each replica serves the workflow once it listed tally's tools: until then it is not ready.
  let reply: WorkflowRunReply | undefined;
  const until = Date.now() + 30_000;
  while (reply?.state !== 'completed') {
    reply = await run(10, 20).catch((error: unknown) => {
      if (Date.now() > until) throw error;
      return undefined;
    });
    if (reply?.state !== 'completed') await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const events = await eventsOf(reply.runId, (e) => e.some((x) => x.type === 'workflow.completed'), 10_000);
  assert.deepEqual(
    events.filter((e) => e.type !== 'governance.decision').map((e) => e.type),
    [
      'workflow.started',
      'node.started',
      'tool.called',
      'tool.completed',
      'node.completed',
      'node.started',
      'tool.called',
      'tool.completed',
      'node.completed',
      'workflow.completed',
    ],
  );
  assert.ok(events.every((e) => e.principal?.subject === 'workflow-engine' && e.principal.actingFor?.subject === 'carol'));
  assert.ok((await world.setup.lines()).some((line) => line.startsWith('count done#7')));
});

test('a run is cancelled mid-node on whichever replica runs it, wherever the cancellation lands', { timeout: 120_000 }, async () => {
  const cancel = (runId: string) =>
    bus.request(
      subjects.gatewayAdmin,
      {
        op: 'workflows.cancel',
        tenant: world.setup.tenant,
        principal: { subject: 'dave', tenant: world.setup.tenant, groups: [] },
        name: 'count-then-read',
        runId,
      },
      { timeoutMs: 40_000 },
    ) as Promise<WorkflowRunReply>;
  // Three runs: the queue group hands their cancellations to either replica, the one running the run or the other.
  for (let i = 0; i < 3; i++) {
    const started = await run(60_000, 0);
    assert.equal(started.state, 'running');
    await eventsOf(started.runId, (e) => e.some((x) => x.type === 'node.started' && x.data.node === 'read'), 15_000);
    assert.deepEqual(await cancel(started.runId), { runId: started.runId, state: 'cancelled' });
    const events = await eventsOf(started.runId, (e) => e.some((x) => x.type === 'workflow.cancelled'), 15_000);
    const cancelled = events.at(-1)!;
    assert.equal(cancelled.type, 'workflow.cancelled');
    assert.deepEqual([cancelled.data.node, cancelled.data.reason], ['read', 'cancelled by dave through the API']);
    assert.ok((cancelled.data.durationMs as number) < 30_000, 'the node in flight (60 s) was cancelled');
    assert.equal(events.find((e) => e.type === 'tool.completed' && e.data.name === 'read_slowly')?.data.isError, true);
    await assert.rejects(
      cancel(started.runId),
      (error: unknown) =>
        error instanceof PunkError && error.code === 'WorkflowRunNotRunning' && /is cancelled, not running/.test(error.message),
    );
  }
});

test('a run whose gateway is killed is recorded failed, outcome interrupted, by the other replica', { timeout: 120_000 }, async () => {
  const before = (await world.setup.lines()).filter((l) => l.startsWith('read_slowly start')).length;
  const started = await run(60_000, 0);
  assert.equal(started.state, 'running');
  // The replica running it is the parent of the tally process whose read_slowly started.
  let line: string | undefined;
  const until = Date.now() + 15_000;
  while (!line) {
    line = (await world.setup.lines()).filter((l) => l.startsWith('read_slowly start'))[before];
    if (!line && Date.now() > until) throw new Error('read_slowly never started');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const gateway = running.find((s) => s.name === 'gateway' && s.process.pid === Number(line.split(' ')[3]));
  assert.ok(gateway, 'the run is in a gateway replica');
  await gateway.stop('SIGKILL');
  const events = await eventsOf(started.runId, (e) => e.some((x) => x.type === 'workflow.failed'), 60_000);
  const failed = events.find((e) => e.type === 'workflow.failed')!;
  assert.deepEqual([failed.data.outcome, failed.data.code], ['interrupted', 'WorkflowInterrupted']);
  assert.deepEqual([failed.principal?.subject, failed.principal?.actingFor?.subject], ['workflow-engine', 'carol']);
  assert.equal(events.filter((e) => e.type === 'workflow.failed').length, 1);
});
