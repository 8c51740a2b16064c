/**
 * Approvals on `punk up` (PGlite, in-process bus, authentication off): the examples' memory server's
 * `delete_entities` (level 4 by its name) fails closed naming its approval; approved through the API (which acts as
 * an admin without authentication), the same call runs once; the run holds the approval's events and the chain
 * verifies.
 */
import assert from 'node:assert/strict';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

let dir: string;
let punk: RunningPunk;

before(async () => {
  dir = await manifestDir('approvals-up', {});
  await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
  punk = await startPunk({ manifestDir: dir });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

function textOf(result: unknown): string {
  return ((result as { content?: Array<{ text?: string }> }).content ?? []).map((c) => c.text ?? '').join('');
}

test('memory__delete_entities runs once after its approval through the API', { timeout: 180_000 }, async () => {
  const client = new Client({ name: 'approvals-up', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${punk.baseUrl}/mcp`)));
  try {
    const { tools } = await client.listTools();
    assert.match(tools.find((tool) => tool.name === 'memory__delete_entities')?.description ?? '', /needs an approval/);
    const call = () => client.callTool({ name: 'memory__delete_entities', arguments: { entityNames: ['nobody'] } });
    const refused = await call();
    assert.equal(refused.isError, true);
    assert.match(textOf(refused), /destroy:memory\/delete_entities requires an approval \(policy rule default\/approval-for-level-4\)/);
    const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
    assert.ok(id, textOf(refused));

    const approved = await fetch(`${punk.baseUrl}/api/v1/approvals/${id}/approve`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ reason: 'a test entity' }),
    });
    assert.equal(approved.status, 200, await approved.clone().text());
    const ran = await call();
    assert.notEqual(ran.isError, true, textOf(ran));
    assert.equal((await call()).isError, true, 'the approval was used once');

    const { approval } = (await (await fetch(`${punk.baseUrl}/api/v1/approvals/${id}`)).json()) as {
      approval: { state: string; runId: string; consumedRunId: string };
    };
    assert.equal(approval.state, 'consumed');
    const run = await eventually(async () => {
      const response = await fetch(`${punk.baseUrl}/api/v1/runs/${approval.consumedRunId}`);
      if (response.status !== 200) return undefined;
      const body = (await response.json()) as { events: Array<{ type: string }> };
      return body.events.some((e) => e.type === 'tool.completed') ? body : undefined;
    }, 30_000);
    assert.ok(run, 'the run of the approved call is on the ledger');
    assert.ok(run.events.some((e) => e.type === 'approval.consumed'));
    const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`)).json()) as { ok: boolean };
    assert.equal(verified.ok, true);
  } finally {
    await client.close();
  }
});
