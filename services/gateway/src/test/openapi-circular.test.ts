/**
 * A request body schema with a circular `$ref` (a tree of books) is validated by the gateway itself, so a call that
 * does not pass through mcp-front's check (a workflow's node, say) is refused as well: the listed input schema keeps
 * the recursion as `$defs`, a bad argument is a tool error naming its path, and nothing reaches the API.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { BOOKS_API_KEY, TREE_DOCUMENT, startBooksApi } from './fixtures/books-api.js';
import { manifest, startHarness } from './harness.js';

type Result = { content: Array<{ text: string }>; structuredContent?: Record<string, unknown>; isError?: boolean };

test('a circular $ref schema is validated by the gateway: a bad argument deep in the tree is refused by its path, nothing sent', async (t) => {
  const api = await startBooksApi();
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), 'punk-openapi-circular-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const document = join(dir, 'tree.json');
  await writeFile(document, JSON.stringify(TREE_DOCUMENT));
  const harness = await startHarness((tenant) => [
    manifest(tenant, 'tree', { openapi: { file: document, baseUrl: api.url }, headers: [{ name: 'X-Api-Key', value: BOOKS_API_KEY }] }),
  ]);
  t.after(() => harness.close());
  const call = async (args: Record<string, unknown>) =>
    (await harness.call({ method: 'tools/call', server: 'tree', name: 'createbook', arguments: args })) as Result;

  const bad = await call({ body: { title: 'root', children: [{ title: 'leaf', children: [{ title: 42 }] }] } });
  assert.equal(bad.isError, true);
  assert.equal(
    bad.content[0]!.text,
    'tool createbook: arguments.body.children.0.children.0.title must be string; nothing was sent to the API',
  );
  assert.equal(api.seen.length, 0, 'nothing was sent');
  const good = await call({ body: { title: 'root', children: [{ title: 'leaf' }] } });
  assert.equal(good.isError, undefined, good.content[0]?.text);
  assert.equal(good.structuredContent?.title, 'root');
});
