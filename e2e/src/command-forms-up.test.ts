/**
 * `command` in both forms on the real `punk up`: a manifest gives the executable alone (`command: node`, with
 * `args`), as the registration API takes it, and a registration gives a manifest's list (`["node", "tally.mjs"]`);
 * both servers (the tally fixture) start and answer a call on `/mcp`. A command that is neither form is refused
 * with a sentence naming the field and both forms.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { COMMAND_RULE } from '@punk/lib';
import { connectClient, listAllTools, textOf } from './clients.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const tallyScript = join(repoRoot, 'e2e/fixtures/tally.mjs');
let dir: string;
let punk: RunningPunk;
let client: Client;

before(async () => {
  dir = await manifestDir('command-forms-up', {});
  await writeFile(
    join(dir, 'tally.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: from-manifest }
spec:
  command: ${JSON.stringify(process.execPath)}
  args: [${JSON.stringify(tallyScript)}]
  env:
    - { name: TALLY_FILE, value: ${JSON.stringify(join(dir, 'manifest.log'))} }
`,
  );
  punk = await startPunk({ manifestDir: dir });
  client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
});

after(async () => {
  await client?.close();
  await punk?.stop();
  await removeDir(dir);
});

const register = (body: Record<string, unknown>) =>
  fetch(`${punk.baseUrl}/api/v1/mcp/servers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test("a manifest's string command and a registration's list command both run their server", { timeout: 180_000 }, async () => {
  const created = await register({
    name: 'from-api',
    type: 'stdio',
    command: [process.execPath, tallyScript],
    env: { TALLY_FILE: join(dir, 'api.log') },
  });
  assert.equal(created.status, 201, await created.clone().text());
  const names = await eventually(async () => {
    const now = (await listAllTools(client)).map((t) => t.name);
    return now.includes('from-manifest__count') && now.includes('from-api__count') ? now : undefined;
  }, 60_000);
  assert.ok(names, `both servers list their tools: ${punk.output().slice(-3000)}`);
  assert.equal(textOf(await client.callTool({ name: 'from-manifest__count', arguments: { n: 1 } })), 'counted 1');
  assert.equal(textOf(await client.callTool({ name: 'from-api__count', arguments: { n: 2 } })), 'counted 2');
  const view = (await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers/from-api`)).json()) as {
    server: { registration: { command: unknown } };
  };
  assert.deepEqual(view.server.registration.command, [process.execPath, tallyScript], 'kept as sent');
});

test('a command that is neither form is refused naming the field and both forms', async () => {
  for (const command of [42, [], '']) {
    const refused = await register({ name: 'wrong', type: 'stdio', command });
    assert.equal(refused.status, 400);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    assert.deepEqual(error, { code: 'InvalidRegistration', message: `body.command: ${COMMAND_RULE}` }, JSON.stringify(command));
  }
});
