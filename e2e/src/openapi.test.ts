/**
 * OpenAPI servers through the real `punk up` with authentication on: a manifest beside its OpenAPI document (and the
 * document's external $ref), its credential from the vault, and a registration of the registry API; SDK clients of
 * both eras on `/mcp` and `/servers/<tenant>/<name>/mcp`. The API gets its own key and never the client's token.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BOOKS_API_KEY, startBooksApi, type BooksApi } from '../../services/gateway/dist/test/fixtures/books-api.js';
import { checkAnswer } from '../../services/mcp-front/dist/test/openapi-check.js';
import { connectClient, listAllTools, textOf, type Era } from './clients.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const PUBLIC = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const fixtures = join(repoRoot, 'services/gateway/src/test/fixtures/openapi');

describe('punk up with an openapi server', () => {
  let punk: RunningPunk;
  let dir: string;
  let books: BooksApi;
  let key: string;

  const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> => {
    const response = await fetch(`${punk.baseUrl}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${BOOTSTRAP}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const json = text === '' ? undefined : JSON.parse(text);
    checkAnswer(method, `/api/v1${path}`, response.status, json);
    return { status: response.status, json };
  };

  before(async () => {
    books = await startBooksApi();
    dir = await manifestDir('openapi', {
      'books.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: books }
spec:
  openapi:
    file: books-openapi.yaml
    baseUrl: ${books.url}
  headers:
    - { name: X-Api-Key, value: "cred:books-key" }
`,
    });
    await copyFile(join(fixtures, 'books.yaml'), join(dir, 'books-openapi.yaml'));
    await copyFile(join(fixtures, 'book.json'), join(dir, 'book.json'));
    punk = await startPunk({
      manifestDir: dir,
      env: {
        PUNK_AUTH_MODE: 'on',
        PUNK_PUBLIC_URL: PUBLIC,
        PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
        PUNK_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
        // The API runs on loopback, which the SSRF guard refuses unless its network is allowed.
        PUNK_UPSTREAM_ALLOWED_NETWORKS: '127.0.0.1/32',
      },
    });
    assert.equal((await api('POST', '/credentials', { id: 'books-key', data: { value: BOOKS_API_KEY } })).status, 201);
    const created = await api('POST', '/api-keys', { name: 'openapi e2e' });
    assert.equal(created.status, 201);
    key = created.json.key as string;
  });

  after(async () => {
    const code = await punk?.stop();
    await books?.close();
    await removeDir(dir);
    assert.equal(code, 0, `punk up should exit cleanly on SIGTERM:\n${punk?.output().slice(-2000)}`);
  });

  for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
    test(`a ${era} client lists and calls the operations on /mcp and /servers/default/books/mcp`, async () => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era, { Authorization: `Bearer ${key}` });
      try {
        // The server may have started before its credential existed: the credential's creation reconnects it.
        const names = await eventually(async () => {
          const listed = (await listAllTools(client)).map((t) => t.name);
          return listed.includes('books__listbooks') ? listed : undefined;
        }, 30_000);
        assert.ok(names, 'books tools are listed');
        for (const name of ['books__getbook', 'books__createbook', 'books__deletebook', 'books__explode', 'books__get_cover_2'])
          assert.ok(names.includes(name), name);
        assert.ok(!names.includes('books__internal'), 'x-mcp: false leaves the operation out');
        const listed = (await client.callTool({ name: 'books__listbooks', arguments: { limit: 3 } })) as any;
        assert.equal(listed.isError ?? false, false, textOf(listed));
        assert.equal(listed.structuredContent.limit, '3');
        assert.equal(listed._meta?.status, 200);
        const missing = (await client.callTool({ name: 'books__getbook', arguments: { id: 'nope' } })) as any;
        assert.equal(missing.isError, true);
        assert.equal(missing._meta?.status, 404);
        const held = (await client.callTool({ name: 'books__deletebook', arguments: { id: '1' } })) as any;
        assert.equal(held.isError, true);
        assert.match(textOf(held), /approval/i);
      } finally {
        await client.close();
      }
      const one = await connectClient(`${punk.baseUrl}/servers/default/books/mcp`, era, { Authorization: `Bearer ${key}` });
      try {
        const got = (await one.callTool({ name: 'getbook', arguments: { id: '1' } })) as any;
        assert.deepEqual(got.structuredContent, { id: '1', title: 'Dune', author: 'Herbert' });
      } finally {
        await one.close();
      }
      assert.ok(books.seen.length > 0);
      for (const request of books.seen) {
        assert.equal(request.headers['x-api-key'], BOOKS_API_KEY);
        assert.equal(request.headers.authorization, undefined, 'the client token is never forwarded');
        assert.ok(!JSON.stringify(request.headers).includes(key), 'no header holds the client key');
        assert.ok(!books.seen.some((r) => r.method === 'DELETE'), 'the held DELETE was not sent');
      }
    });
  }

  test("an openapi registration of the registry API is served, its status and tools shown, with a manifest server's warnings", async () => {
    const petstore = await readFile(join(fixtures, 'petstore.yaml'), 'utf8');
    const created = await api('POST', '/mcp/servers', {
      name: 'pets',
      type: 'openapi',
      openapi: { content: petstore, baseUrl: books.url },
      headers: { 'X-Api-Key': 'cred:books-key' },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.server.type, 'openapi');
    // A fresh client per look: a 2026-07-28 client may keep a listing for its ttlMs.
    const names = await eventually(async () => {
      const probe = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28', { Authorization: `Bearer ${key}` });
      try {
        const listed = (await listAllTools(probe)).map((t) => t.name);
        return listed.includes('pets__showpetbyid') ? listed : undefined;
      } finally {
        await probe.close();
      }
    }, 30_000);
    assert.ok(names, 'pets tools are listed');
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28', { Authorization: `Bearer ${key}` });
    try {
      const pet = (await client.callTool({ name: 'pets__showpetbyid', arguments: { petId: '1' } })) as any;
      assert.equal(pet._meta?.status, 404, 'the books API has no /pets route; it answered with the key');
    } finally {
      await client.close();
    }
    const bad = await api('POST', '/mcp/servers', { name: 'bad', type: 'openapi', openapi: { content: 'openapi: 3.1.0\npaths: 1\n' } });
    assert.equal(bad.status, 201);
    const failed = await eventually(async () => {
      const { json } = await api('GET', '/mcp/servers/bad');
      return json.server.state === 'failed' ? json.server : undefined;
    }, 30_000);
    assert.ok(failed, 'the bad document fails the server');
    assert.match(JSON.stringify(failed), /OpenAPI document \(openapi\.content\) is invalid/);
    // The books document's GET /health has no operationId: served as get_health, and warned of with its path.
    const booksView = await eventually(async () => {
      const { json } = await api('GET', '/mcp/servers/books');
      return json.server.warnings ? json.server : undefined;
    }, 30_000);
    assert.deepEqual(booksView?.warnings, ['paths./health.get: no operationId; named get_health']);
  });
});
