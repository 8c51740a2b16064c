/**
 * `punk mcp` against `punk cluster` (two fronts, two gateways, governance and two ledgers over a nats-server and a
 * scratch Postgres database of the test's own) with authentication on. The SDK's `Client` drives `punk mcp` over
 * stdio with an admin key through every tool, deciding an approval that a waiting call then uses: a user's
 * `memory__delete_entities`, made through `punk mcp --relay` and held by a rule with `wait`, waits (progress passed
 * through) until the admin approves it in its own `punk mcp`, then runs. A non-admin key gets tool errors naming
 * the scope; `--selfcheck` is green with the admin key. An admin whose client takes elicitation decides the approval
 * of its own `memory__create_entities` in conversation, through the relay, in both eras. Through both ledgers, runs
 * of one same time page once each by the API's cursor, and a prompt over 100,000 characters is recorded truncated, a
 * body over 4 MiB as refused.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { scratchDatabase } from './distributed.js';
import { eventually, manifestDir, removeDir, repoRoot, startAuthCluster, type RunningPunk, createApiKey } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';
import { PLATFORM_TOOLS, call, punkCli, punkMcp } from './punk-mcp-client.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');

describe('punk mcp against punk cluster with authentication on', () => {
  let nats: OwnNats;
  let db: { url: string; drop(): Promise<void> };
  let dir: string;
  let cluster: RunningPunk;
  let adminKey: string;
  let userKey: string;

  before(async () => {
    nats = await startOwnNats();
    db = await scratchDatabase();
    dir = await manifestDir('punk-mcp-cluster', {});
    await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
    await writeFile(
      join(dir, 'policy.yaml'),
      `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: deletions }
spec:
  rules:
    - name: wait-for-a-person
      servers: [memory]
      tools: [delete_entities]
      decision: approval_required
      reason: a person decides what the graph forgets
      approval: { wait: 2m }
    - name: the-caller-decides
      servers: [memory]
      tools: [create_entities]
      decision: approval_required
      reason: its caller says whether the graph grows
      approval: { allowSelf: true }
`,
    );
    cluster = await startAuthCluster(dir, nats.url, db.url, BOOTSTRAP);
    const make = async (body: Record<string, unknown>) => (await createApiKey(cluster.baseUrl, BOOTSTRAP, body)).key;
    adminKey = await make({ name: 'cluster admin', scopes: ['punk:admin'] });
    userKey = await make({ name: 'cluster user' });
  });

  after(async () => {
    await cluster?.stop();
    await nats?.stop();
    await db?.drop();
    await removeDir(dir);
  });

  test('an admin key drives every tool; its decision lets a waiting call through the relay run', { timeout: 240_000 }, async () => {
    const { client } = await punkMcp(cluster.baseUrl, adminKey);
    const { client: user } = await punkMcp(cluster.baseUrl, userKey, { era: '2026-07-28', args: ['--relay'] });
    try {
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name).sort(), [...PLATFORM_TOOLS].sort());
      const servers = await call(client, 'punk_list_servers');
      const memory = (servers.structuredContent!['servers'] as Array<{ name: string; state: string }>).find((s) => s.name === 'memory');
      assert.equal(memory?.state, 'ready', textOf(servers));
      const found = await call(client, 'punk_search_tools', { query: 'delete entities' });
      assert.equal((found.structuredContent!['matches'] as Array<{ name: string }>)[0]?.name, 'memory__delete_entities', textOf(found));
      const tested = await call(client, 'punk_test_server', { name: 'memory' });
      assert.equal(tested.structuredContent!['ok'], true, textOf(tested));

      // The user's call waits for a decision (the rule's wait), reporting progress through the relay.
      const progress: number[] = [];
      const waiting = user.callTool(
        { name: 'memory__delete_entities', arguments: { entityNames: ['nobody'] } },
        { onprogress: (p) => progress.push(p.progress), timeout: 180_000 },
      );
      const pending = await eventually(async () => {
        const listed = await call(client, 'punk_list_approvals', {});
        return (listed.structuredContent!['approvals'] as Array<{ id: string; tool: string; rule: string }>).find(
          (a) => a.tool === 'delete_entities',
        );
      }, 60_000);
      assert.ok(pending, 'the waiting call asked for an approval');
      assert.equal(pending.rule, 'deletions/wait-for-a-person');
      // The gateway reports progress every 5 s while the call waits; it reaches the user through the relay.
      assert.ok(await eventually(async () => (progress.length > 0 ? true : undefined), 60_000), 'progress while waiting');
      const decided = await call(client, 'punk_decide_approval', { id: pending.id, decision: 'approve', reason: 'nobody is a test' });
      assert.equal(decided.structuredContent!['state'], 'approved', textOf(decided));
      const ran = await waiting;
      assert.notEqual(ran.isError, true, textOf(ran));

      const consumed = await eventually(async () => {
        const listed = await call(client, 'punk_list_runs', { tool: 'delete_entities', type: 'approval.consumed' });
        return (listed.structuredContent!['runs'] as Array<{ runId: string }>)[0];
      }, 60_000);
      assert.ok(consumed, 'the run that used the approval is listed');
      const explained = await call(client, 'punk_explain_run', { runId: consumed.runId });
      assert.notEqual(explained.isError, true, textOf(explained));
      assert.deepEqual(explained.structuredContent!['approvals'], [pending.id]);
      assert.match(textOf(explained), /decision approval_required by rule deletions\/wait-for-a-person/);
      const verified = await call(client, 'punk_verify_ledger');
      assert.equal(verified.structuredContent!['ok'], true, textOf(verified));
    } finally {
      await user.close();
      await client.close();
    }
  });

  for (const era of ['2025', '2026-07-28'] as const) {
    test(`a ${era} admin decides the approval of its own call in conversation, through the relay`, { timeout: 180_000 }, async () => {
      const { client, stderr } = await punkMcp(cluster.baseUrl, adminKey, {
        era,
        args: ['--relay'],
        client: { capabilities: { elicitation: { form: {} } } },
      });
      try {
        const asked: string[] = [];
        client.setRequestHandler('elicitation/create', (request) => {
          asked.push(request.params.message);
          return Promise.resolve({
            action: 'accept' as const,
            content: { decision: 'approve', reason: `approved in a ${era} conversation` },
          });
        });
        const entity = `relay-${era}-${randomBytes(4).toString('hex')}`;
        const created = await client.callTool({
          name: 'memory__create_entities',
          arguments: { entities: [{ name: entity, entityType: 'test', observations: [] }] },
        });
        assert.notEqual(created.isError, true, `${textOf(created)}\n${stderr()}`);
        assert.equal(asked.length, 1, 'asked once');
        assert.match(asked[0]!, /create_entities/);
        const approvals = await call(client, 'punk_list_approvals', { state: 'consumed' });
        const approval = (approvals.structuredContent!['approvals'] as Array<{ tool: string; reason?: string }>).find(
          (a) => a.tool === 'create_entities' && a.reason === `approved in a ${era} conversation`,
        );
        assert.ok(approval, `the approval holds the answer: ${textOf(approvals)}`);
      } finally {
        await client.close();
      }
    });
  }

  test('a non-admin key gets tool errors naming the scope; it may not decide', { timeout: 180_000 }, async () => {
    const { client } = await punkMcp(cluster.baseUrl, userKey);
    const direct = await connectClient(`${cluster.baseUrl}/mcp`, '2025-11-25', { authorization: `Bearer ${userKey}` });
    try {
      for (const tool of ['punk_list_servers', 'punk_list_runs', 'punk_verify_ledger']) {
        const refused = await call(client, tool);
        assert.equal(refused.isError, true, tool);
        assert.match(textOf(refused), /403.*the key needs the scope punk:admin/, tool);
      }
      const found = await call(client, 'punk_search_tools', { query: 'graph' });
      assert.notEqual(found.isError, true, textOf(found));
      // Its own call, held by the built-in level-4 rule (no wait): it may see the request, not decide it.
      const held = await direct.callTool({
        name: 'memory__delete_relations',
        arguments: { relations: [{ from: 'a', to: 'b', relationType: 'knows' }] },
      });
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(held))?.[1];
      assert.ok(id, textOf(held));
      const own = await call(client, 'punk_list_approvals', {});
      assert.ok(
        (own.structuredContent!['approvals'] as Array<{ id: string }>).some((a) => a.id === id),
        textOf(own),
      );
      const decided = await call(client, 'punk_decide_approval', { id, decision: 'approve' });
      assert.equal(decided.isError, true);
      assert.match(textOf(decided), /403.*scope punk:admin/);
    } finally {
      await direct.close();
      await client.close();
    }
  });

  test(
    'through both ledgers, runs of one same time page once each by cursor; an oversized prompt is marked',
    { timeout: 180_000 },
    async () => {
      const headers = { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' };
      const post = (body: string) => fetch(`${cluster.baseUrl}/api/v1/ingest/prompt`, { method: 'POST', headers, body });
      const time = new Date(Date.now() - 60_000).toISOString();
      for (let i = 0; i < 6; i++) {
        const prompt = i === 3 ? 'w'.repeat(120_000) : `cluster prompt ${String(i)}`;
        const posted = await post(JSON.stringify({ prompt, time }));
        assert.equal(posted.status, 201, await posted.text());
      }
      const tooLarge = await post(JSON.stringify({ prompt: 'v'.repeat(5 * 1024 * 1024) }));
      assert.equal(tooLarge.status, 413);
      type Page = { runs: Array<{ runId: string; outcome?: string; types: string[] }>; nextCursor?: string };
      const get = async (query: string) => {
        const answer = await fetch(`${cluster.baseUrl}/api/v1/runs?${query}`, { headers });
        assert.equal(answer.status, 200, await answer.clone().text());
        return (await answer.json()) as Page;
      };
      const stored = await eventually(async () => {
        const { runs } = await get('type=observed.completed&limit=500');
        return runs.length === 7 ? runs : undefined;
      }, 60_000);
      assert.ok(stored, 'six observed prompts and a refused one are stored');

      // Pages of two, each asked of whichever front and ledger the proxy picks.
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await get(`type=prompt.observed&limit=2${cursor === undefined ? '' : `&cursor=${cursor}`}`);
        seen.push(...page.runs.map((r) => r.runId));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      assert.equal(seen.length, 6, seen.join());
      assert.equal(new Set(seen).size, 6, 'each run once');

      assert.deepEqual(stored.map((r) => r.outcome).sort(), ['ok', 'ok', 'ok', 'ok', 'ok', 'refused', 'truncated']);
      const truncated = stored.find((r) => r.outcome === 'truncated')!;
      const { events } = (await (await fetch(`${cluster.baseUrl}/api/v1/runs/${truncated.runId}`, { headers })).json()) as {
        events: Array<{ type: string; data: Record<string, unknown> }>;
      };
      // By type, not position: the two ledgers may each take one of the run's events and chain them in either order.
      const observed = events.find((event) => event.type === 'prompt.observed');
      assert.ok(observed, `a prompt.observed event: ${events.map((event) => event.type).join(', ')}`);
      assert.deepEqual(
        [observed.data['truncated'], observed.data['promptChars'], (observed.data['prompt'] as string).length],
        [true, 120_000, 100_000],
      );
      assert.ok(stored.find((r) => r.outcome === 'refused')!.types.includes('prompt.refused'));
    },
  );

  test('--selfcheck is green against the cluster with the admin key', { timeout: 180_000 }, async () => {
    const green = await punkCli(cluster.baseUrl, adminKey, ['mcp', '--selfcheck']);
    assert.equal(green.code, 0, green.stdout + green.stderr);
    for (const tool of PLATFORM_TOOLS) assert.match(green.stdout, new RegExp(`^ok +${tool}: `, 'm'));
  });
});
