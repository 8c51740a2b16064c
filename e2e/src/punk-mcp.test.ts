/**
 * `punk mcp` against `punk up` with authentication on: the SDK's `Client` spawns `node services/cli/dist/main.js mcp`
 * over stdio (StdioClientTransport) with an admin key (2025 era) and with a non-admin key (2026-07-28 era) and drives every platform tool,
 * including deciding an approval that the held call, retried, then uses, and listing and running workflows; stdout carries nothing but the protocol.
 * `punk mcp --selfcheck` is green against the live deployment and red with a wrong key and with the deployment
 * stopped; the admin commands print tables and `--json`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk, createApiKey } from './harness.js';
import { PLATFORM_TOOLS as TOOLS, call, punkCli, punkMcp } from './punk-mcp-client.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');
/** Three workflows over the memory server: one that runs, one whose tool call fails, one that is not ready. */
const WORKFLOWS = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: find }
spec:
  description: Finds the graph's nodes about a topic.
  input: { type: object, properties: { topic: { type: string } }, required: [topic] }
  start: search
  nodes:
    - id: search
      kind: tool_call
      next: done
      config: { server: memory, tool: search_nodes, args: { query: { kind: ref, path: input.topic } }, saveAs: hits }
    - id: done
      kind: output
      config: { value: { kind: ref, path: vars.hits } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: note-nobody }
spec:
  start: note
  nodes:
    - id: note
      kind: tool_call
      config:
        server: memory
        tool: add_observations
        args: { observations: { kind: literal, value: [{ entityName: nobody-at-all, contents: [x] }] } }
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: unready }
spec:
  start: open
  nodes:
    - { id: open, kind: tool_call, config: { server: memory, tool: open_nodes, args: {} } }
`;

describe('punk mcp against punk up with authentication on', () => {
  let dir: string;
  let punk: RunningPunk;
  let adminKey: string;
  let userKey: string;

  before(async () => {
    dir = await manifestDir('punk-mcp', { 'workflows.yaml': WORKFLOWS });
    await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
    punk = await startPunk({
      manifestDir: dir,
      env: { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'https://punk.example.test', PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP },
    });
    const make = async (body: Record<string, unknown>) => (await createApiKey(punk.baseUrl, BOOTSTRAP, body)).key;
    adminKey = await make({ name: 'punk-mcp admin', scopes: ['punk:admin'] });
    userKey = await make({ name: 'punk-mcp user' });
  });

  after(async () => {
    await punk?.stop();
    await removeDir(dir);
  });

  test('an admin key drives every tool over stdio, and its decision lets the held call run once', { timeout: 180_000 }, async () => {
    const { client, stderr } = await punkMcp(punk.baseUrl, adminKey);
    const user = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { authorization: `Bearer ${userKey}` });
    try {
      assert.equal(client.getNegotiatedProtocolVersion(), '2025-11-25');
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
      for (const tool of tools) {
        assert.ok(tool.description && tool.title && tool.outputSchema && tool.annotations, `${tool.name} is fully described`);
      }

      const servers = await call(client, 'punk_list_servers');
      assert.notEqual(servers.isError, true, textOf(servers));
      const memory = (servers.structuredContent!['servers'] as Array<{ name: string; state: string; toolCount: number }>).find(
        (s) => s.name === 'memory',
      );
      assert.equal(memory?.state, 'ready');
      assert.ok(memory.toolCount > 0);
      assert.match(textOf(servers), /memory: ready, \d+ tool/);

      const found = await call(client, 'punk_search_tools', { query: 'delete entities' });
      const matches = found.structuredContent!['matches'] as Array<{ name: string }>;
      assert.equal(matches[0]?.name, 'memory__delete_entities', textOf(found));
      assert.ok((found.structuredContent!['total'] as number) >= matches.length);

      const tested = await call(client, 'punk_test_server', { name: 'memory' });
      assert.equal(tested.structuredContent!['ok'], true, textOf(tested));
      assert.ok((tested.structuredContent!['tools'] as string[]).includes('delete_entities'));
      const missing = await call(client, 'punk_test_server', { name: 'no-such-server' });
      assert.equal(missing.isError, true);
      assert.match(textOf(missing), /404/);

      // The user's call is held for an approval (level 4 by its name: the default approval rule).
      const held = () => user.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['nobody'] } });
      const refused = await held();
      assert.equal(refused.isError, true);
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
      assert.ok(id, textOf(refused));

      const pending = await call(client, 'punk_list_approvals', {});
      const listed = (
        pending.structuredContent!['approvals'] as Array<{ id: string; tool: string; rule: string; mayDecide: boolean }>
      ).find((a) => a.id === id);
      assert.equal(listed?.tool, 'delete_entities', textOf(pending));
      assert.match(listed.rule, /approval-for-level-4/);
      assert.equal(listed.mayDecide, true, 'an admin key may decide a call of another principal');
      assert.match(textOf(pending), new RegExp(`${id}: .*; you may decide it`));

      const decided = await call(client, 'punk_decide_approval', { id, decision: 'approve', reason: 'a test entity' });
      assert.notEqual(decided.isError, true, textOf(decided));
      assert.equal(decided.structuredContent!['state'], 'approved');
      const ran = await held();
      assert.notEqual(ran.isError, true, textOf(ran));
      assert.equal((await held()).isError, true, 'the approval is used once');

      const runs = await eventually(async () => {
        const listedRuns = await call(client, 'punk_list_runs', { limit: 50 });
        const all = listedRuns.structuredContent!['runs'] as Array<{ runId: string; tool?: string; types: string[] }>;
        return all.some((r) => r.types.includes('approval.consumed')) ? all : undefined;
      }, 30_000);
      assert.ok(runs, 'the run of the approved call is listed');
      const consumed = runs.find((r) => r.types.includes('approval.consumed'))!;
      assert.equal(consumed.tool, 'delete_entities');
      const filtered = await call(client, 'punk_list_runs', { server: 'memory', tool: 'delete_entities', type: 'approval.consumed' });
      assert.deepEqual(
        (filtered.structuredContent!['runs'] as Array<{ runId: string }>).map((r) => r.runId),
        [consumed.runId],
        textOf(filtered),
      );
      const badTime = await call(client, 'punk_list_runs', { since: 'yesterday' });
      assert.equal(badTime.isError, true);
      assert.match(textOf(badTime), /400 InvalidParameter: .*since/);

      const explained = await call(client, 'punk_explain_run', { runId: consumed.runId });
      assert.notEqual(explained.isError, true, textOf(explained));
      const data = explained.structuredContent!;
      const types = (data['events'] as Array<{ type: string }>).map((e) => e.type);
      assert.ok(
        types.includes('governance.decision') && types.includes('approval.consumed') && types.includes('tool.completed'),
        types.join(),
      );
      const decisions = data['decisions'] as Array<{ decision: string; rule?: string; reason?: string }>;
      assert.ok(decisions.some((d) => d.decision === 'approval_required' && /approval-for-level-4/.test(d.rule ?? '') && d.reason));
      assert.deepEqual(data['approvals'], [id]);
      assert.equal((data['chain'] as { ok: boolean }).ok, true);
      assert.match(textOf(explained), /delete_entities/);
      assert.match(textOf(explained), /decision approval_required by rule default\/approval-for-level-4/);
      assert.match(textOf(explained), /chain of tenant default's ledger verifies/);

      // The workflows: listed with their readiness, one run through /mcp (trigger mcp), a failed one, an unready one.
      const workflows = await eventually(async () => {
        const listed = await call(client, 'punk_list_workflows');
        const all = listed.structuredContent?.['workflows'] as Array<{ name: string; ready: boolean; errors: string[] }> | undefined;
        return all?.find((w) => w.name === 'find')?.ready ? all : undefined;
      }, 30_000);
      assert.ok(workflows, 'the workflow find is listed ready');
      const unready = workflows.find((w) => w.name === 'unready');
      assert.equal(unready?.ready, false);
      assert.match(unready.errors.join(' '), /open_nodes requires argument names/);
      const completed = await call(client, 'punk_run_workflow', { name: 'find', arguments: { topic: 'nothing-like-it' } });
      assert.notEqual(completed.isError, true, textOf(completed));
      assert.equal(completed.structuredContent!['state'], 'completed');
      assert.deepEqual(completed.structuredContent!['result'], { entities: [], relations: [] });
      const failed = await call(client, 'punk_run_workflow', { name: 'note-nobody' });
      assert.equal(failed.isError, true);
      assert.match(textOf(failed), /workflow note-nobody failed \(run [^)]+\): .*nobody-at-all/);
      const notReady = await call(client, 'punk_run_workflow', { name: 'unready' });
      assert.equal(notReady.isError, true);
      assert.match(textOf(notReady), /no ready workflow unready is served to this key/);
      const badArguments = await call(client, 'punk_run_workflow', { name: 'find', arguments: {} });
      assert.equal(badArguments.isError, true);
      assert.match(textOf(badArguments), /topic/);
      const byMcp = await eventually(async () => {
        const listed = await call(client, 'punk_list_runs', { trigger: 'mcp', type: 'workflow.completed' });
        const all = listed.structuredContent!['runs'] as Array<{ runId: string }>;
        return all.length > 0 ? all : undefined;
      }, 30_000);
      assert.equal(byMcp?.length, 1, 'the completed run has trigger mcp');

      const verified = await call(client, 'punk_verify_ledger');
      assert.equal(verified.structuredContent!['ok'], true, textOf(verified));
      assert.ok((verified.structuredContent!['events'] as number) > 0);
      assert.equal(typeof verified.structuredContent!['checked'], 'number', 'how many this call checked itself');
      assert.match(textOf(verified), /^ok: the chain of tenant default's ledger verifies: events 1 to \d+ end at its head record/);
      assert.match(stderr(), /serving the platform tools/);
    } finally {
      await user.close();
      await client.close();
    }
  });

  test('a non-admin key gets tool errors naming the scope it lacks, never a crash', { timeout: 180_000 }, async () => {
    // This client speaks the 2026-07-28 era over stdio (no initialize handshake); the admin's above the 2025 one.
    const { client } = await punkMcp(punk.baseUrl, userKey, { era: '2026-07-28' });
    assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28');
    const user = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28', { authorization: `Bearer ${userKey}` });
    try {
      for (const [tool, args] of [
        ['punk_list_servers', {}],
        ['punk_test_server', { name: 'memory' }],
        ['punk_list_runs', {}],
        ['punk_explain_run', { runId: 'any' }],
        ['punk_verify_ledger', {}],
        ['punk_list_workflows', {}],
      ] as const) {
        const refused = await call(client, tool, args);
        assert.equal(refused.isError, true, `${tool}: ${textOf(refused)}`);
        assert.match(textOf(refused), /403.*the key needs the scope punk:admin/, tool);
      }
      // The tools a user may use: search (the /mcp catalog), running a workflow and the approvals of its own calls.
      const ran = await call(client, 'punk_run_workflow', { name: 'find', arguments: { topic: 'x' } });
      assert.equal(ran.structuredContent?.['state'], 'completed', textOf(ran));
      const found = await call(client, 'punk_search_tools', { query: 'entities' });
      assert.notEqual(found.isError, true, textOf(found));
      assert.ok((found.structuredContent!['matches'] as unknown[]).length > 0);

      const refused = await user.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['someone'] } });
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
      assert.ok(id, textOf(refused));
      const own = await call(client, 'punk_list_approvals', {});
      const mine = (own.structuredContent!['approvals'] as Array<{ id: string; mayDecide: boolean; decideRefusal?: string }>).find(
        (a) => a.id === id,
      );
      assert.equal(mine?.mayDecide, false, textOf(own));
      assert.match(mine.decideRefusal ?? '', /may not approve it|decided by an admin/, 'the refusal says why not');
      const decided = await call(client, 'punk_decide_approval', { id, decision: 'approve' });
      assert.equal(decided.isError, true);
      assert.match(textOf(decided), /403/);
      assert.match(textOf(decided), /may not approve it|decided by an admin/);
      assert.match(textOf(decided), /scope punk:admin/);
    } finally {
      await user.close();
      await client.close();
    }
  });

  test('--selfcheck is green against the deployment and red with a wrong key', { timeout: 180_000 }, async () => {
    const green = await punkCli(punk.baseUrl, adminKey, ['mcp', '--selfcheck']);
    assert.equal(green.code, 0, green.stdout + green.stderr);
    for (const tool of TOOLS) assert.match(green.stdout, new RegExp(`^ok +${tool}: `, 'm'));
    assert.match(green.stdout, new RegExp(`^${String(TOOLS.length)} of ${String(TOOLS.length)} tools ok$`, 'm'));

    const wrong = await punkCli(punk.baseUrl, 'pk_not-a-key', ['mcp', '--selfcheck']);
    assert.equal(wrong.code, 1, wrong.stdout + wrong.stderr);
    assert.match(wrong.stdout, /FAIL the deployment refused the API key/);

    // A key without the admin scope is a working install: what it may not use is skipped, naming the scope, and
    // a tool that needs such a tool's answer is skipped with it; the rest runs.
    const user = await punkCli(punk.baseUrl, userKey, ['mcp', '--selfcheck']);
    assert.equal(user.code, 0, user.stdout + user.stderr);
    assert.match(user.stdout, /^skip punk_list_servers: this key may not use it \(it needs the scope punk:admin\)$/m);
    assert.match(user.stdout, /^skip punk_test_server: needs what an earlier tool this key may not use answers$/m);
    assert.match(user.stdout, /^ok +punk_search_tools: /m);
    assert.doesNotMatch(user.stdout, /^FAIL/m);
    assert.match(user.stdout, /tools ok; \d+ skipped: this key may not use them$/m);
  });

  test('the admin commands print tables and --json', { timeout: 180_000 }, async () => {
    const servers = await punkCli(punk.baseUrl, adminKey, ['servers']);
    assert.equal(servers.code, 0, servers.stderr);
    assert.match(servers.stdout, /^NAME +STATE +TOOLS +LAST ERROR\n/);
    assert.match(servers.stdout, /^memory +ready +\d+/m);
    const json = JSON.parse((await punkCli(punk.baseUrl, adminKey, ['servers', '--json'])).stdout) as { servers: Array<{ name: string }> };
    assert.ok(json.servers.some((s) => s.name === 'memory'));

    const runs = await punkCli(punk.baseUrl, adminKey, ['runs', '--limit', '5', '--json']);
    const runIds = (JSON.parse(runs.stdout) as { runs: Array<{ runId: string }> }).runs.map((r) => r.runId);
    assert.ok(runIds.length > 0 && runIds.length <= 5);
    assert.match((await punkCli(punk.baseUrl, adminKey, ['runs'])).stdout, /^RUN +LAST +SERVER +TOOL +OUTCOME +SUBJECT\n/);
    const tested = await punkCli(punk.baseUrl, adminKey, ['runs', '--type', 'server.tested', '--server', 'memory', '--json']);
    const testedRuns = (JSON.parse(tested.stdout) as { runs: Array<{ server: string; types: string[] }> }).runs;
    assert.ok(testedRuns.length > 0 && testedRuns.every((r) => r.server === 'memory' && r.types.includes('server.tested')));
    const run = await punkCli(punk.baseUrl, adminKey, ['run', runIds[0]!]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, new RegExp(`^Run ${runIds[0]!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));

    // A held call of the user, denied from the command line.
    const user = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { authorization: `Bearer ${userKey}` });
    try {
      const refused = await user.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['cli'] } });
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
      assert.ok(id, textOf(refused));
      const approvals = await punkCli(punk.baseUrl, adminKey, ['approvals']);
      assert.match(approvals.stdout, new RegExp(`^${id} +pending +memory +delete_entities .* yes *$`, 'm'), 'an admin may decide it');
      const denied = await punkCli(punk.baseUrl, adminKey, ['deny', id, '--reason', 'not today']);
      assert.equal(denied.code, 0, denied.stderr);
      assert.match(denied.stdout, /: denied\n/);
      const again = await punkCli(punk.baseUrl, adminKey, ['approve', id]);
      assert.equal(again.code, 1);
      assert.match(again.stderr, /409/);
    } finally {
      await user.close();
    }

    const keys = await punkCli(punk.baseUrl, adminKey, ['keys']);
    assert.match(keys.stdout, /punk-mcp user/);
    const verify = await punkCli(punk.baseUrl, adminKey, ['verify']);
    assert.equal(verify.code, 0);
    assert.match(verify.stdout, /^ok: the chain of tenant default's ledger verifies: events 1 to \d+ end at its head record \(/);
    const forbidden = await punkCli(punk.baseUrl, userKey, ['verify']);
    assert.equal(forbidden.code, 1);
    assert.match(forbidden.stderr, /the key needs the scope punk:admin/);
  });

  test('punk_list_runs and punk runs page with the cursor: runs of one same time are each listed once', { timeout: 180_000 }, async () => {
    // Eight prompts typed in one same second: pages of three cut them twice.
    const time = new Date(Date.now() - 60_000).toISOString();
    for (let i = 0; i < 8; i++) {
      const posted = await fetch(`${punk.baseUrl}/api/v1/ingest/prompt`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: `same second ${String(i)}`, time }),
      });
      assert.equal(posted.status, 201, await posted.text());
    }
    const { client } = await punkMcp(punk.baseUrl, adminKey);
    try {
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const listed = await call(client, 'punk_list_runs', { type: 'prompt.observed', limit: 3, ...(cursor !== undefined && { cursor }) });
        assert.notEqual(listed.isError, true, textOf(listed));
        seen.push(...(listed.structuredContent!['runs'] as Array<{ runId: string }>).map((r) => r.runId));
        cursor = listed.structuredContent!['nextCursor'] as string | undefined;
        if (cursor !== undefined) assert.match(textOf(listed), new RegExp(`^More runs: cursor ${cursor}$`, 'm'));
      } while (cursor !== undefined);
      assert.equal(seen.length, 8, seen.join());
      assert.equal(new Set(seen).size, 8, 'each run once');
      const bad = await call(client, 'punk_list_runs', { cursor: 'not-a-cursor' });
      assert.equal(bad.isError, true);
      assert.match(textOf(bad), /400 InvalidParameter: query parameter cursor is not a nextCursor this API returned/);
    } finally {
      await client.close();
    }

    const fromCli: string[] = [];
    let args = ['runs', '--type', 'prompt.observed', '--limit', '3', '--json'];
    for (;;) {
      const page = JSON.parse((await punkCli(punk.baseUrl, adminKey, args)).stdout) as {
        runs: Array<{ runId: string }>;
        nextCursor?: string;
      };
      fromCli.push(...page.runs.map((r) => r.runId));
      if (page.nextCursor === undefined) break;
      args = ['runs', '--type', 'prompt.observed', '--limit', '3', '--json', '--cursor', page.nextCursor];
    }
    assert.equal(new Set(fromCli).size, 8);
    assert.equal(fromCli.length, 8);
    const table = await punkCli(punk.baseUrl, adminKey, ['runs', '--type', 'prompt.observed', '--limit', '3']);
    assert.match(table.stdout, /\nMore runs: --cursor [A-Za-z0-9_-]+\n$/);
  });

  test('--selfcheck says so when the deployment cannot be reached', { timeout: 180_000 }, async () => {
    const url = punk.baseUrl;
    await punk.stop();
    const down = await punkCli(url, adminKey, ['mcp', '--selfcheck']);
    assert.equal(down.code, 1, down.stdout + down.stderr);
    assert.match(down.stdout, /FAIL the deployment cannot be reached/);
    const cli = await punkCli(url, adminKey, ['servers']);
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /cannot be reached/);
  });
});
