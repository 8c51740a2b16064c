/**
 * The example workflow (examples/workflows.yaml) on `punk up` over the example servers: it reads the first line of
 * examples/files/hello.txt with the filesystem server and searches the memory graph for it; before the graph knows
 * that line the branch answers `found: false`, and once an entity observes it (created through /mcp) `found: true`
 * with the entity.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { exampleManifests, removeDir, startPunk, type RunningPunk } from './harness.js';

let dir: string;
let punk: RunningPunk;

before(async () => {
  dir = await exampleManifests();
  punk = await startPunk({ manifestDir: dir });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

async function summarize(): Promise<Record<string, any>> {
  const response = await fetch(`${punk.baseUrl}/api/v1/workflows/summarize-file/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ arguments: { path: join(dir, 'files/hello.txt') }, waitSeconds: 30 }),
  });
  assert.equal(response.status, 201);
  return (await response.json()) as Record<string, any>;
}

test(
  'the example workflow reads a file, searches the memory graph for it, and branches on what it found',
  { timeout: 180_000 },
  async () => {
    const first = await summarize();
    assert.equal(first.state, 'completed', JSON.stringify(first));
    assert.deepEqual(first.result, { path: join(dir, 'files/hello.txt'), subject: "Hello from Punk's filesystem example.", found: false });
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
    try {
      const created = await client.callTool({
        name: 'memory__create_entities',
        arguments: { entities: [{ name: 'greeting', entityType: 'line', observations: ["Hello from Punk's filesystem example."] }] },
      });
      assert.notEqual(created.isError, true, textOf(created));
    } finally {
      await client.close();
    }
    const second = await summarize();
    assert.equal(second.result.found, true, JSON.stringify(second));
    assert.equal(second.result.entities[0].name, 'greeting');
  },
);
