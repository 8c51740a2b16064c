/**
 * McpServer documents reload live under the real `punk up`, as the workflows beside them do: a file holding a new
 * server (the tally fixture) and a workflow that calls it is dropped into the watched directory, and a connected
 * client sees the server's tools and the workflow's tool without a restart, and the workflow runs (no manifest error
 * about a missing server); an edit restarts the server with its new definition; a typo in its document keeps the
 * server as last loaded; removing the document stops it and its tools go away.
 */
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, listAllTools, textOf } from './clients.js';
import { eventually, manifestDir, removeDir, startPunk, tallyManifest, type RunningPunk } from './harness.js';

let dir: string;
let punk: RunningPunk;
let client: Client;

const tally = (tools: string) => `${tallyManifest(join(dir, 'tally.log'), tools)}---
apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: tally-once }
spec:
  start: count
  nodes:
    - { id: count, kind: tool_call, next: done, config: { server: tally, tool: count, args: { n: { kind: literal, value: 7 } }, saveAs: counted } }
    - { id: done, kind: output, config: { value: { kind: ref, path: vars.counted } } }
`;

const toolNames = async () => (await listAllTools(client)).map((t) => t.name).sort();

before(async () => {
  dir = await manifestDir('servers-reload-up', {});
  punk = await startPunk({ manifestDir: dir });
  client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
});

after(async () => {
  await client?.close();
  await punk?.stop();
  await removeDir(dir);
});

test(
  'a server added to the watched directory is served without a restart, and the workflow beside it runs',
  { timeout: 180_000 },
  async () => {
    assert.deepEqual(
      (await toolNames()).filter((n) => n.startsWith('tally__')),
      [],
    );
    await writeFile(join(dir, 'tally.yaml'), tally('{}'));
    const names = await eventually(async () => {
      const now = await toolNames();
      return now.includes('tally__count') && now.includes('punk_workflow__tally-once') ? now : undefined;
    }, 60_000);
    assert.ok(names, `the new server's and the workflow's tools are listed: ${punk.output().slice(-3000)}`);
    assert.deepEqual(
      names.filter((n) => n.startsWith('tally__')),
      ['tally__charge', 'tally__count', 'tally__read_slowly'],
    );
    assert.match(punk.output(), /loaded McpServer default\/tally from tally\.yaml \(document 1\): starting it/);
    const counted = await client.callTool({ name: 'tally__count', arguments: { n: 1 } });
    assert.equal(textOf(counted), 'counted 1');

    const run = await fetch(`${punk.baseUrl}/api/v1/workflows/tally-once/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ arguments: {}, waitSeconds: 30 }),
    });
    assert.equal(run.status, 201, await run.clone().text());
    const body = (await run.json()) as { state: string };
    assert.equal(body.state, 'completed', JSON.stringify(body));
    assert.match(await readFile(join(dir, 'tally.log'), 'utf8'), /^count done#7 /m, 'the workflow called the new server');
    assert.doesNotMatch(punk.output(), /manifest error: tally\.yaml/, 'the workflow was checked against the started server');
  },
);

test(
  'an edit restarts the server with its new definition; a typo in its document keeps it as last loaded',
  { timeout: 180_000 },
  async () => {
    await writeFile(join(dir, 'tally.yaml'), tally('{ deny: [charge] }'));
    const names = await eventually(async () => {
      const now = await toolNames();
      return now.includes('tally__count') && !now.includes('tally__charge') ? now : undefined;
    }, 60_000);
    assert.ok(names, `the denied tool is gone: ${punk.output().slice(-3000)}`);
    assert.match(punk.output(), /changed McpServer default\/tally from tally\.yaml \(document 1\): restarting it/);

    // A typo in the server's own document: the document is refused, and the server stays as it was.
    await writeFile(join(dir, 'tally.yaml'), tally('{ deny: [charge] }\n  transport: carrier-pigeon'));
    const kept = await eventually(
      async () => (/McpServer default\/tally kept as last loaded: tally\.yaml has errors/.test(punk.output()) ? true : undefined),
      30_000,
    );
    assert.ok(kept, punk.output().slice(-3000));
    assert.match(punk.output(), /manifest error: tally\.yaml \(document 1\) spec\.transport: /);
    assert.equal(textOf(await client.callTool({ name: 'tally__count', arguments: { n: 2 } })), 'counted 2', 'still served');
  },
);

test('a removed server is stopped and its tools are no longer listed', { timeout: 180_000 }, async () => {
  await rm(join(dir, 'tally.yaml'));
  const names = await eventually(async () => {
    const now = await toolNames();
    return now.some((n) => n.startsWith('tally__')) ? undefined : now;
  }, 60_000);
  assert.ok(names, punk.output().slice(-3000));
  assert.match(punk.output(), /removed McpServer default\/tally: its document is gone; stopping it/);
  const servers = (await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers`)).json()) as { servers: Array<{ name: string }> };
  assert.deepEqual(
    servers.servers.map((s) => s.name),
    [],
  );
});
