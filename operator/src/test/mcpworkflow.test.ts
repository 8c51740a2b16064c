// McpWorkflows on a real kube-apiserver, checked against McpServers the real gateway lists (server-everything over
// Streamable HTTP) and published by the operator to PUNK_MCP_WORKFLOWS on a nats-server of the test's own: a valid
// workflow Ready, published and run by the gateway, and nothing written when nothing changed; a cycle, an unknown
// node, an unreachable node, an unknown server, an unknown tool and a bad argument each Degraded with the workflow,
// node and field named, and withdrawn (200 problems: as many as a condition holds, then a count); a fix makes it
// Ready; deleting the McpServer it calls degrades it and bringing the server back makes it Ready; a server whose
// tools were never listed leaves it Ready=Unknown; deleting the workflow withdraws it; an entry no object backs is
// swept when the operator leads; a new leader that has not listed the tools yet keeps the decisions made with their
// schemas.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buckets, kvKey, subjects, workflowRunReplySchema, type Bus, type KvStore } from '@punk/lib';
import { registryValue } from '../../../services/lib/dist/test/metricstest.js';
import { controlPlaneAvailability, freePort } from './control-plane.js';
import {
  conditionOf,
  CustomResources,
  startEverything,
  startOperatorFixture,
  until,
  type OperatorFixture,
  type TestMcpServer,
} from './harness.js';

const availability = controlPlaneAvailability();

type Node = { id: string; kind: string; next?: string; config: Record<string, unknown> };

/** An McpWorkflow `name` of `nodes` starting at the first. */
function workflow(name: string, nodes: Node[]): object {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpWorkflow',
    metadata: { name },
    spec: { input: { type: 'object', properties: { text: { type: 'string' } } }, start: nodes[0]!.id, nodes },
  };
}

/** A tool_call node of McpServer `server`. */
function call(id: string, server: string, tool: string, args: Record<string, unknown>, next?: string): Node {
  return { id, kind: 'tool_call', ...(next !== undefined && { next }), config: { server, tool, args } };
}

const echo = (id: string, next?: string) =>
  call(id, 'everything', 'echo', { message: { kind: 'template', template: 'said {{input.text}}' } }, next);
const done: Node = { id: 'done', kind: 'output', config: { value: { kind: 'ref', path: 'vars.say' } } };

describe('the operator reconciling McpWorkflows', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let ns: string;
  let everything: TestMcpServer;
  let entries: KvStore;
  let bus: Bus;

  const server = (name: string, url: string) => ({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { url },
  });
  const entry = async (name: string) =>
    (await entries.get(kvKey(ns, name)))?.value as { metadata: { generation: number }; spec: { nodes: Node[] } } | undefined;
  /** The workflow once its condition `type` has `status` (and `reason`, when given). */
  const whenCondition = (name: string, type: string, status: string, reason?: string) =>
    until(
      `${name} ${type}=${status}${reason ? ` ${reason}` : ''}`,
      async () => {
        const o = await crs.get('mcpworkflows', ns, name);
        const c = conditionOf(o, type);
        return c?.status === status &&
          (reason === undefined || c.reason === reason) &&
          o.status?.observedGeneration === o.metadata.generation
          ? o
          : undefined;
      },
      60_000,
    );

  /** McpWorkflow reconciles that ended well, in this process. */
  const successes = () => registryValue('punk_operator_reconcile_total', { kind: 'McpWorkflow', result: 'success' });

  before(async () => {
    fixture = await startOperatorFixture('workflows', { operator: false });
    ({ crs, ns } = fixture);
    ({ bus } = await fixture.startServices());
    entries = await bus.keyValue(buckets.mcpWorkflows);
    await entries.put(kvKey(ns, 'ghost'), { left: 'behind' });
    everything = await startEverything();
    await fixture.startOperator();
    await crs.create('mcpservers', ns, server('everything', everything.url));
    await until(
      'McpServer everything Ready with its tools',
      async () => conditionOf(await crs.get('mcpservers', ns, 'everything'), 'Ready')?.status === 'True',
      60_000,
    );
  });
  after(async () => {
    await fixture?.stop();
    everything?.stop();
  });

  it('sweeps a bucket entry no McpWorkflow backs when it starts leading', async () => {
    await until('the orphan removed', async () => (await entries.get(kvKey(ns, 'ghost'))) === undefined);
  });

  it('publishes a valid workflow, Ready with observedGeneration, and withdraws it when the object is deleted', async () => {
    await crs.create('mcpworkflows', ns, workflow('echoer', [echo('say', 'done'), done]));
    const ready = await whenCondition('echoer', 'Ready', 'True', 'Published');
    assert.equal(ready.status.observedGeneration, ready.metadata.generation);
    assert.equal(conditionOf(ready, 'Ready')!.observedGeneration, ready.metadata.generation);
    assert.equal(conditionOf(ready, 'Degraded')?.status, 'False');
    assert.match(
      conditionOf(ready, 'Ready')!.message,
      /^generation \d+ \(2 nodes\) is published to bucket PUNK_MCP_WORKFLOWS, which every gateway replica watches$/,
    );
    const published = await until('the bucket entry', () => entry('echoer'));
    assert.equal(published.metadata.generation, ready.metadata.generation);
    assert.deepEqual(
      published.spec.nodes.map((n) => n.id),
      ['say', 'done'],
    );

    await crs.delete('mcpworkflows', ns, 'echoer');
    await until('the entry withdrawn', async () => (await entry('echoer')) === undefined);
  });

  it('writes nothing when a reconcile finds nothing new: the workflows of a relabelled McpServer keep their status and entry', async () => {
    const created = await successes();
    await crs.create('mcpworkflows', ns, workflow('steady', [echo('say', 'done'), done]));
    const ready = await whenCondition('steady', 'Ready', 'True', 'Published');
    const published = await until('published', () => entries.get(kvKey(ns, 'steady')));
    // The reconcile that wrote Ready is counted once it returns, a moment after its status write.
    await until('the reconcile that made it Ready counted', async () => (await successes()) > created);
    const before = await successes();
    const queued = (await crs.list('mcpworkflows', ns)).length; // each calls McpServer everything
    await crs.patch('mcpservers', ns, 'everything', { metadata: { labels: { touched: 'yes' } } });
    await until('every workflow of the McpServer reconciled', async () => (await successes()) - before >= queued);
    assert.equal((await crs.get('mcpworkflows', ns, 'steady')).metadata.resourceVersion, ready.metadata.resourceVersion, 'no status write');
    assert.equal((await entries.get(kvKey(ns, 'steady')))!.revision, published.revision, 'no new bucket revision');
  });

  it('runs a workflow it published in the real gateway, which serves it from the bucket', async () => {
    await crs.create('mcpworkflows', ns, workflow('runnable', [echo('say', 'done'), done]));
    await whenCondition('runnable', 'Ready', 'True', 'Published');
    const principal = { subject: 'alice', tenant: ns, groups: [], scopes: ['punk:admin'] };
    const run = await until('a completed run', async () => {
      const reply = workflowRunReplySchema.parse(
        await bus.request(
          subjects.gatewayAdmin,
          { op: 'workflows.run', tenant: ns, principal, name: 'runnable', body: { arguments: { text: 'hello' }, waitSeconds: 10 } },
          { timeoutMs: 15_000 },
        ),
      );
      return reply.state === 'completed' ? reply : undefined;
    });
    assert.match(JSON.stringify(run.result), /said hello/, 'the echo of the template the node built');
  });

  for (const { name, nodes, reason, message } of [
    {
      name: 'looping',
      nodes: [echo('say', 'again'), echo('again', 'say')],
      reason: 'InvalidSpec',
      message: /^McpWorkflow (\S+)\/looping node again spec\.nodes\.1\.next: going to say makes a cycle/,
    },
    {
      name: 'lost',
      nodes: [echo('say', 'nowhere'), done],
      reason: 'InvalidSpec',
      message: /^McpWorkflow (\S+)\/lost node say spec\.nodes\.0\.next: no node has id nowhere;/,
    },
    {
      name: 'stranded',
      nodes: [echo('say'), done],
      reason: 'InvalidSpec',
      message: /^McpWorkflow (\S+)\/stranded node done spec\.nodes\.1: not reachable from start node say;/,
    },
    {
      name: 'strayed',
      nodes: [call('say', 'absent', 'echo', {}, 'done'), done],
      reason: 'ServerNotFound',
      message: /^McpWorkflow (\S+)\/strayed node say spec\.nodes\.0\.config\.server: no McpServer absent in this namespace/,
    },
    {
      name: 'misnamed',
      nodes: [call('say', 'everything', 'shout', {}, 'done'), done],
      reason: 'ToolNotFound',
      message:
        /^McpWorkflow (\S+)\/misnamed node say spec\.nodes\.0\.config\.tool: McpServer everything has no tool shout; it has: .*\becho\b/,
    },
    {
      name: 'mistyped',
      nodes: [call('say', 'everything', 'echo', { message: { kind: 'literal', value: 5 } }, 'done'), done],
      reason: 'ArgumentMismatch',
      message:
        /^McpWorkflow (\S+)\/mistyped node say spec\.nodes\.0\.config\.args\.message\.value: tool echo takes string for message, not integer/,
    },
  ]) {
    it(`marks ${name} Degraded ${reason}, naming the workflow, node and field, and does not publish it; a fix makes it Ready`, async () => {
      await crs.create('mcpworkflows', ns, workflow(name, nodes));
      const refused = await whenCondition(name, 'Degraded', 'True', reason);
      const text = conditionOf(refused, 'Degraded')!.message;
      assert.match(text, message);
      assert.equal(message.exec(text)![1], ns, 'the workflow is named with its namespace');
      assert.match(text, /; the workflow is not served \(not in bucket PUNK_MCP_WORKFLOWS\) until this is fixed$/);
      assert.equal(conditionOf(refused, 'Ready')?.status, 'False');
      assert.equal(await entry(name), undefined, 'not published');

      await crs.patchSpec('mcpworkflows', ns, name, { start: 'say', nodes: [echo('say', 'done'), done] });
      await whenCondition(name, 'Ready', 'True', 'Published');
      await until('published once fixed', () => entry(name));
    });
  }

  it('names as many problems as a condition message holds, then how many more there are', async () => {
    const server = `absent-${'x'.repeat(55)}`; // 63 characters: a message per node of about 170
    const nodes = Array.from({ length: 200 }, (_, i) => call(`n${i}`, server, 'echo', {}, i < 199 ? `n${i + 1}` : undefined));
    await crs.create('mcpworkflows', ns, workflow('crowded', nodes));
    const refused = await whenCondition('crowded', 'Degraded', 'True', 'ServerNotFound');
    const text = conditionOf(refused, 'Degraded')!.message;
    assert.ok(text.length <= 32_768, `${text.length} characters`);
    assert.match(text, /^McpWorkflow \S+\/crowded node n0 spec\.nodes\.0\.config\.server: no McpServer absent-x+ in this namespace; /);
    assert.match(text, /; and \d+ more; the workflow is not served \(not in bucket PUNK_MCP_WORKFLOWS\) until this is fixed$/);
  });

  it('withdraws a published workflow that becomes invalid instead of serving its last valid generation', async () => {
    await crs.create('mcpworkflows', ns, workflow('regressed', [echo('say', 'done'), done]));
    await until('published', () => entry('regressed'));
    await crs.patchSpec('mcpworkflows', ns, 'regressed', { nodes: [echo('say', 'done'), { ...echo('done'), next: 'say' }] });
    await whenCondition('regressed', 'Degraded', 'True', 'InvalidSpec');
    await until('withdrawn', async () => (await entry('regressed')) === undefined);
  });

  it('degrades the workflows that call a deleted McpServer, and makes them Ready again when it comes back', async () => {
    await crs.create('mcpworkflows', ns, workflow('dependent', [echo('say', 'done'), done]));
    await whenCondition('dependent', 'Ready', 'True', 'Published');
    await crs.delete('mcpservers', ns, 'everything');
    const refused = await whenCondition('dependent', 'Degraded', 'True', 'ServerNotFound');
    assert.match(
      conditionOf(refused, 'Degraded')!.message,
      /node say spec\.nodes\.0\.config\.server: no McpServer everything in this namespace/,
    );
    await until('withdrawn', async () => (await entry('dependent')) === undefined);

    await until('the McpServer gone', () =>
      crs.get('mcpservers', ns, 'everything').then(
        () => undefined,
        () => true,
      ),
    );
    await crs.create('mcpservers', ns, server('everything', everything.url));
    await whenCondition('dependent', 'Ready', 'True', 'Published');
    await until('published again', () => entry('dependent'));
  });

  it('publishes a workflow whose McpServer was never listed with Ready=Unknown, naming the server and its nodes', async () => {
    await crs.create('mcpservers', ns, server('unlisted', `http://127.0.0.1:${await freePort()}/mcp`)); // nothing listens there
    await crs.create('mcpworkflows', ns, workflow('hopeful', [call('ask', 'unlisted', 'anything', {}, 'done'), done]));
    const pending = await whenCondition('hopeful', 'Ready', 'Unknown', 'ToolsNotListed');
    assert.match(
      conditionOf(pending, 'Ready')!.message,
      /; the tools of McpServer unlisted have not been listed yet \(no status\.tools\), so nodes ask are checked once they are$/,
    );
    assert.equal(conditionOf(pending, 'Degraded')?.status, 'False');
    assert.ok(await until('published', () => entry('hopeful')));
  });

  it("keeps the previous leader's decisions until the new leader has listed the tools, and checks new arguments once it has", async () => {
    const mistaken = (name: string) =>
      workflow(name, [call('say', 'everything', 'echo', { message: { kind: 'literal', value: 5 } }, 'done'), done]);
    await crs.create('mcpworkflows', ns, mistaken('handed-over'));
    const refused = await whenCondition('handed-over', 'Degraded', 'True', 'ArgumentMismatch');
    // A new leader that cannot list any tool: the gateway is stopped before it starts.
    await fixture.operator!.stop();
    fixture.operator = undefined;
    await fixture.services!.stop();
    fixture.services = undefined;
    const before = await successes();
    await fixture.startOperator();
    const count = (await crs.list('mcpworkflows', ns)).length;
    await until('every workflow reconciled by the new leader', async () => (await successes()) - before >= count);
    const kept = await crs.get('mcpworkflows', ns, 'handed-over');
    assert.equal(kept.metadata.resourceVersion, refused.metadata.resourceVersion, 'its status stands');
    assert.equal(await entry('handed-over'), undefined, 'still not served');

    await crs.create('mcpworkflows', ns, mistaken('newcomer'));
    const pending = await whenCondition('newcomer', 'Ready', 'Unknown', 'ToolsNotListed');
    assert.match(
      conditionOf(pending, 'Ready')!.message,
      /; the arguments of nodes say are checked once this operator has listed the tools of McpServer everything \(it knows their names only, from status\.tools\)$/,
    );
    await fixture.startServices(); // the McpServer reconcile lists the tools again, which queues both workflows
    await whenCondition('newcomer', 'Degraded', 'True', 'ArgumentMismatch');
    await until('withdrawn', async () => (await entry('newcomer')) === undefined);
    assert.equal(conditionOf(await crs.get('mcpworkflows', ns, 'handed-over'), 'Degraded')?.reason, 'ArgumentMismatch');
  });
});
