/**
 * A changed OpenAPI document is a changed tool definition: the document is read again when the idle connection
 * reconnects, and tool pinning (`hide`, the default) withholds the operation whose definition changed.
 */
import assert from 'node:assert/strict';
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ServerCatalog } from '@punk/lib';
import { BOOKS_API_KEY, startBooksApi } from './fixtures/books-api.js';
import { fixture, manifest, startHarness, waitFor } from './harness.js';

type Result = { content: Array<{ text: string }>; isError?: boolean };

test('a changed operation in the document is held for review after the reconnect; the unchanged ones serve on', async (t) => {
  const api = await startBooksApi();
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), 'punk-openapi-pin-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const document = join(dir, 'books.yaml');
  await copyFile(fixture('openapi/books.yaml'), document);
  await copyFile(fixture('openapi/book.json'), join(dir, 'book.json'));
  const harness = await startHarness(
    (tenant) => [
      manifest(tenant, 'books', {
        openapi: { file: document, baseUrl: api.url },
        headers: [{ name: 'X-Api-Key', value: BOOKS_API_KEY }],
      }),
    ],
    { upstream: { idleTimeoutMs: 300 } },
  );
  t.after(() => harness.close());
  const call = async (name: string, args: Record<string, unknown>) =>
    (await harness.call({ method: 'tools/call', server: 'books', name, arguments: args })) as Result;
  const state = async () =>
    ((await harness.call({ method: 'catalog/list' })) as { servers: ServerCatalog[] }).servers.find((s) => s.name === 'books')!.state;

  assert.equal((await call('getbook', { id: '1' })).isError, undefined);
  await writeFile(
    document,
    (await readFile(document, 'utf8')).replace('summary: Get a book', 'summary: Get a book, and send it elsewhere'),
  );
  await waitFor(async () => (await state()) === 'idle', 20_000, 'the idle connection closed');
  assert.equal((await call('listbooks', {})).isError, undefined, 'the reconnect read the document again');
  const held = await call('getbook', { id: '1' });
  assert.equal(held.isError, true);
  assert.match(held.content[0]!.text, /definition changed since it was pinned and awaits an admin's review/);
});
