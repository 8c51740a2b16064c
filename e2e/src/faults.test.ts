/**
 * Bad input and faults on the main job: each answers with a clear error that
 * names the cause, the rest keeps serving, and the ledger keeps every event.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { eventually, exampleManifests, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const manifests = (fixtures: string) => ({
  'broken.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: broken
spec:
  transport: carrier-pigeon
---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: Not_A_Name
spec:
  command: ["true"]
---
this: [is not yaml
`,
  'missing-command.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: missing-command
spec:
  image: example.invalid/none
  command: ["/nonexistent/punk-no-such-server"]
`,
  'exits-at-start.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: exits-at-start
spec:
  image: example.invalid/none
  command: ["node", "-e", "console.error('cannot open the frobnicator'); process.exit(3)"]
`,
  'local-script.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: local-script
spec:
  command: ["node", "${join(fixtures, 'crasher.mjs')}"]
`,
  'crasher.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata:
  name: crasher
spec:
  image: example.invalid/none
  command: ["node", "${join(fixtures, 'crasher.mjs')}"]
  timeout: 20s
`,
});

interface ServerView {
  name: string;
  state: string;
  lastError?: string;
}

describe('faults and bad input', () => {
  let punk: RunningPunk;
  let dir: string;

  before(async () => {
    dir = await exampleManifests(manifests(join(repoRoot, 'e2e', 'fixtures')));
    punk = await startPunk({ manifestDir: dir, env: { PUNK_SERVER_START_TIMEOUT_MS: '15000' } });
  });
  after(async () => {
    assert.equal(await punk?.stop(), 0);
    await removeDir(dir);
  });

  test('a malformed manifest is reported with file, document and field, and the valid ones are served', async () => {
    const out = punk.output();
    assert.match(out, /broken\.yaml \(document 1\) spec\.transport/);
    assert.match(out, /broken\.yaml \(document 2\) metadata\.name/);
    assert.match(out, /broken\.yaml \(document 3\) \(document\): YAML/);
    assert.match(out, /3 manifest error\(s\)/);
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'still serving' } });
      assert.match(textOf(echo), /still serving/);
    } finally {
      await client.close();
    }
  });

  test('a manifest with only a command (a local script: no image, package or url) runs as a local child process', async () => {
    assert.doesNotMatch(punk.output(), /local-script\.yaml \(document/, 'no manifest error for it');
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const counted = await client.callTool({ name: 'local-script__count', arguments: {} });
      assert.equal(counted.isError, undefined, textOf(counted));
      assert.match(textOf(counted), /calls=1 pid=\d+/);
    } finally {
      await client.close();
    }
  });

  test('a server whose command does not exist and one that exits at start are failed with their cause', async () => {
    const { servers } = (await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers`)).json()) as { servers: ServerView[] };
    const missing = servers.find((s) => s.name === 'missing-command');
    assert.equal(missing?.state, 'failed');
    assert.match(missing?.lastError ?? '', /punk-no-such-server/);
    const exits = servers.find((s) => s.name === 'exits-at-start');
    assert.ok(exits && exits.state !== 'ready', JSON.stringify(exits));
    assert.match(exits?.lastError ?? '', /exit|code 3|frobnicator/i);
    assert.equal(servers.find((s) => s.name === 'everything')?.state, 'ready');
  });

  test("a failed server's tool says the server failed and why, and its own endpoint's tools/list answers the cause", async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const called = await client.callTool({ name: 'missing-command__anything', arguments: {} });
      assert.equal(called.isError, true);
      assert.match(
        textOf(called),
        /^tool missing-command__anything is not available: server missing-command is failed: .*punk-no-such-server/,
      );
    } finally {
      await client.close();
    }
    const own = await connectClient(`${punk.baseUrl}/servers/missing-command/mcp`, '2025-11-25');
    try {
      await assert.rejects(own.listTools(), /server missing-command is failed: .*punk-no-such-server/);
    } finally {
      await own.close();
    }
  });

  test('a server that crashes mid-call gives the call a clear tool error, then comes back', async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const started = Date.now();
      const crashed = await client.callTool({ name: 'crasher__crash', arguments: {} });
      assert.equal(crashed.isError, true);
      assert.match(textOf(crashed), /crasher/);
      assert.match(textOf(crashed), /exit/i);
      assert.ok(Date.now() - started < 15_000, 'the error comes quickly, not at the call deadline');
      let counted: { content?: unknown; isError?: boolean } | undefined;
      for (let attempt = 0; attempt < 40; attempt++) {
        counted = await client.callTool({ name: 'crasher__count', arguments: {} });
        if (!counted?.isError) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      assert.match(textOf(counted!), /calls=1/, 'a restarted process serves the next call');
    } finally {
      await client.close();
    }
  });

  test('an unknown tool and arguments that break the input schema get errors naming the cause', async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      await assert.rejects(client.callTool({ name: 'everything__no-such-tool', arguments: {} }), /no-such-tool/);
      const bad = await client.callTool({ name: 'everything__echo', arguments: { message: 42 } });
      assert.equal(bad.isError, true);
      assert.match(textOf(bad), /message/);
    } finally {
      await client.close();
    }
  });

  test('a level-4 tool fails closed with the rule named', async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const result = await client.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['x'] } });
      assert.equal(result.isError, true);
      assert.match(textOf(result), /approval/i);
      assert.match(textOf(result), /default\//);
    } finally {
      await client.close();
    }
  });

  test('invalid JSON is 400 with a parse error, and an oversized body is 413', async () => {
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const bad = await fetch(`${punk.baseUrl}/mcp`, { method: 'POST', headers, body: '{"jsonrpc": "2.0", "id": 1, "method": ' });
    assert.equal(bad.status, 400);
    const parseError = (await bad.json()) as { error: { code: number; message: string } };
    assert.equal(parseError.error.code, -32700);
    const big = await fetch(`${punk.baseUrl}/mcp`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(2 * 1024 * 1024) } }),
    });
    assert.equal(big.status, 413);
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28');
    try {
      const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'after bad input' } });
      assert.match(textOf(echo), /after bad input/);
    } finally {
      await client.close();
    }
  });

  test('the ledger kept every accepted event, including the failed calls, and the chain verifies', async () => {
    type Run = { runId: string; types: string[]; tool?: string };
    const runs =
      (await eventually(async () => {
        const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?limit=500`)).json()) as { runs: Run[] };
        return runs.some((r) => r.tool === 'crash') && runs.some((r) => r.tool === 'delete_entities') ? runs : undefined;
      })) ?? [];
    const crashRun = runs.find((r) => r.tool === 'crash');
    assert.ok(crashRun, 'the crashed call is a run');
    assert.ok(crashRun.types.includes('tool.called') && crashRun.types.includes('tool.completed'));
    const denied = runs.find((r) => r.tool === 'delete_entities');
    assert.ok(denied?.types.includes('governance.decision'));
    const verify = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`)).json()) as { ok: boolean };
    assert.equal(verify.ok, true);
  });
});
