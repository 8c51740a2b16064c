/**
 * OpenAPI servers through the whole gateway path on a private NATS: a real HTTP API started here with its own
 * OpenAPI 3.1 document (a file with an external $ref beside it), and the Petstore 3.0 example as inline content.
 * Tool names and collisions, x-mcp rules, every answer kind, the credential sent only to its API, no Authorization
 * or cookie forwarded, the SSRF guard, a DELETE held by the default policy, the ledger, and bad documents reported
 * on the server's status while the other servers serve.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGovernance, type GovernanceService } from '@punk/governance';
import {
  anonymousPrincipal,
  createLogger,
  NatsBus,
  requestGateway,
  streams,
  subjects,
  type GatewayRequest,
  type LedgerEvent,
  type Principal,
  type ServerCatalog,
} from '@punk/lib';
import { startGateway, type Gateway } from '../index.js';
import { buildRequest, pathParameterProblem } from '../openapi/call.js';
import type { OpenApiOperation } from '../openapi/tools.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';
import { keyringOf, newKeySpec } from './credentials-harness.js';
import { fixture, manifest, waitFor } from './harness.js';
import { BOOKS_API_KEY as API_KEY, startBooksApi } from './fixtures/books-api.js';

const log = createLogger('openapi-test', process.env.TEST_LOG_LEVEL ?? 'silent');

type Result = {
  content: Array<Record<string, any>>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: { status?: number };
};

describe('openapi servers', () => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const admin: Principal = { subject: 'admin', tenant, groups: [], scopes: ['punk:admin'] };
  let nats: PrivateNats;
  let bus: NatsBus;
  let database: ScratchDb;
  let governance: GovernanceService;
  let gateway: Gateway;
  let workDir: string;
  let books: Awaited<ReturnType<typeof startBooksApi>>;
  let other: Awaited<ReturnType<typeof startBooksApi>>;
  const events: LedgerEvent[] = [];

  const call = async (server: string, name: string, args: Record<string, unknown> = {}): Promise<Result> =>
    (await requestGateway(
      bus,
      {
        method: 'tools/call',
        tenant,
        server,
        principal: anonymousPrincipal(tenant),
        runId: `run-${randomUUID()}`,
        name,
        arguments: args,
      } as GatewayRequest,
      30_000,
    )) as Result;
  const catalog = async (): Promise<ServerCatalog[]> =>
    ((await requestGateway(bus, { method: 'catalog/list', tenant } as GatewayRequest, 30_000)) as { servers: ServerCatalog[] }).servers;
  const one = async (name: string) => (await catalog()).find((s) => s.name === name)!;

  before(async () => {
    nats = await startPrivateNats();
    workDir = await mkdtemp(join(tmpdir(), 'punk-openapi-'));
    database = await openScratchDb(log);
    books = await startBooksApi();
    other = await startBooksApi();
    bus = await NatsBus.connect({ url: nats.url, name: 'openapi-test', log });
    await bus.ensureStream(streams.ledger);
    await bus.consume(streams.ledger.name, 'test-reader', async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)));
    governance = await startGovernance({ bus, log });
    const petstore = await readFile(fixture('openapi/petstore.yaml'), 'utf8');
    const duplicate = (await readFile(fixture('openapi/books.yaml'), 'utf8'))
      // Two operations declare x-mcp.name getbook: the crash operation's own name and a new one on getBook.
      .replace('name: explode', 'name: getbook')
      .replace('operationId: getBook', 'operationId: getBook\n      x-mcp: { name: getbook }');
    gateway = await startGateway({
      // Loopback is allowed by network (the APIs run here); the metadata address is refused like in production.
      egress: { allowPrivate: false, allowedNetworks: ['127.0.0.1/32'] },
      bus,
      log,
      db: database.db,
      keyring: keyringOf(newKeySpec()),
      servers: [
        manifest(tenant, 'books', {
          openapi: { file: fixture('openapi/books.yaml'), baseUrl: books.url },
          headers: [{ name: 'X-Api-Key', value: 'cred:books-key' }],
        }),
        manifest(tenant, 'slowbooks', {
          openapi: { file: fixture('openapi/books.yaml'), baseUrl: books.url, operations: ['slow'] },
          headers: [{ name: 'X-Api-Key', value: 'cred:books-key' }],
          timeout: '2s',
        }),
        manifest(tenant, 'other', { openapi: { file: fixture('openapi/books.yaml'), baseUrl: other.url, operations: ['listBooks'] } }),
        manifest(tenant, 'petstore', { openapi: { content: petstore } }),
        manifest(tenant, 'metadata', { openapi: { content: petstore, baseUrl: 'http://169.254.169.254/latest' } }),
        manifest(tenant, 'broken', {
          openapi: { content: 'openapi: 3.1.0\ninfo: { title: x }\npaths:\n  /x:\n    get:\n      responses: 12\n' },
        }),
        manifest(tenant, 'dupes', { openapi: { content: duplicate, baseUrl: books.url } }),
      ],
      workDir,
      startTimeoutMs: 30_000,
      callTimeoutMs: 30_000,
      // 1 MiB results: an API answer past twice that is refused while it is read.
      maxResultBytes: 1024 * 1024,
    });
    await bus.request(
      subjects.gatewayAdmin,
      { tenant, principal: admin, op: 'credentials.create', body: { id: 'books-key', data: { value: API_KEY } } },
      { timeoutMs: 30_000 },
    );
    await waitFor(
      async () => (await catalog()).every((s) => s.state === 'ready' || s.state === 'failed' || s.state === 'idle'),
      60_000,
      'servers started',
    );
  });

  after(async () => {
    await gateway?.stop();
    await governance?.stop();
    await bus?.close();
    await database?.close();
    await nats?.stop();
    await books?.close();
    await other?.close();
    await rm(workDir, { recursive: true, force: true });
  });

  it('names tools from operationIds (collisions numbered, routes for the unnamed), applies x-mcp and the operations list', async () => {
    // A call connects the server if it is idle; the listing then holds every tool.
    await call('books', 'listbooks');
    const served = await one('books');
    assert.equal(served.state, 'ready', served.lastError);
    const names = served.tools.map((t) => t.name);
    assert.deepEqual(names, [
      'listbooks',
      'createbook',
      'getbook',
      'updatebook',
      'deletebook',
      'get_cover',
      'get_cover_2',
      'whoami',
      'explode',
      'get_health',
      'slow',
      'big',
    ]);
    // The operation without operationId is served, and its catalog entry warns of it, naming the path; so does
    // the registry API's view of the server (what GET /api/v1/mcp/servers/books answers).
    assert.deepEqual(served.warnings, ['paths./health.get: no operationId; named get_health']);
    const view = (await bus.request(
      subjects.gatewayAdmin,
      { tenant, principal: admin, op: 'servers.get', id: 'books' },
      { timeoutMs: 30_000 },
    )) as { server: { warnings?: string[] } };
    assert.deepEqual(view.server.warnings, ['paths./health.get: no operationId; named get_health']);
    const listed = (await bus.request(
      subjects.gatewayAdmin,
      { tenant, principal: admin, op: 'servers.tools', id: 'books' },
      { timeoutMs: 30_000 },
    )) as {
      warnings?: string[];
    };
    assert.deepEqual(listed.warnings, ['paths./health.get: no operationId; named get_health']);
    const byName: Record<string, any> = Object.fromEntries(served.tools.map((t) => [t.name, t]));
    assert.equal(byName.listbooks.description, 'List books\n\nEvery book, newest first.');
    assert.deepEqual(byName.explode.annotations, { readOnlyHint: true, openWorldHint: false });
    assert.equal(byName.explode.title, 'Explode');
    assert.equal(byName.explode.description, 'Always fails with HTTP 500.');
    assert.deepEqual(byName.deletebook.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: true });
    assert.deepEqual(byName.createbook.annotations, { readOnlyHint: false, destructiveHint: false, idempotentHint: false });
    // The body's schema came from the external $ref beside the document; the cookie parameter is not an input.
    assert.deepEqual(byName.createbook.inputSchema.required, ['body']);
    assert.deepEqual(byName.createbook.inputSchema.properties.body.required, ['title']);
    assert.deepEqual(Object.keys(byName.whoami.inputSchema.properties), ['X-Trace']);
    assert.deepEqual(served.sideEffectLevels, {
      listbooks: 1,
      createbook: 3,
      getbook: 1,
      updatebook: 2,
      deletebook: 4,
      get_cover: 1,
      get_cover_2: 1,
      whoami: 1,
      explode: 1,
      get_health: 1,
      slow: 1,
      big: 1,
    });
    await call('other', 'listbooks');
    assert.deepEqual(
      (await one('other')).tools.map((t) => t.name),
      ['listbooks'],
    );
    await call('petstore', 'listpets');
    assert.deepEqual(
      (await one('petstore')).tools.map((t) => t.name),
      ['listpets', 'createpets', 'showpetbyid'],
    );
  });

  it('answers JSON objects as structured content, other bodies as text or a binary resource, errors with their status', async () => {
    const listed = await call('books', 'listbooks', { limit: 5, tag: ['a', 'b'] });
    assert.equal(listed.isError, undefined);
    assert.equal(listed._meta?.status, 200);
    assert.deepEqual(listed.structuredContent, { books: [{ id: '1', title: 'Dune', author: 'Herbert' }], limit: '5', tags: ['a', 'b'] });
    assert.deepEqual(JSON.parse(listed.content[0]!.text), listed.structuredContent);
    const created = await call('books', 'createbook', { body: { title: 'Emma' } });
    assert.deepEqual(created.structuredContent, { id: '2', title: 'Emma' });
    assert.equal(created._meta?.status, 201);
    const updated = await call('books', 'updatebook', { id: '2', body: { title: 'Emma', author: 'Austen' } });
    assert.deepEqual(updated.structuredContent, { id: '2', title: 'Emma', author: 'Austen' });
    const missing = await call('books', 'getbook', { id: 'a b/c' });
    assert.equal(missing.isError, true);
    assert.equal(missing._meta?.status, 404);
    assert.match(missing.content[0]!.text, /no book a b\/c/);
    assert.ok(
      books.seen.some((r) => r.url === '/api/books/a%20b%2Fc'),
      'the path parameter was percent-encoded',
    );
    const refused = await call('books', 'createbook', { body: { title: 'bad' } });
    assert.equal(refused.isError, true);
    assert.equal(refused._meta?.status, 422);
    const crashed = await call('books', 'explode');
    assert.equal(crashed.isError, true);
    assert.equal(crashed._meta?.status, 500);
    assert.equal(crashed.content[0]!.text, 'boom');
    const cover = await call('books', 'get_cover', { id: '1' });
    assert.equal(cover.content[0]!.type, 'resource');
    assert.equal(cover.content[0]!.resource.mimeType, 'application/octet-stream');
    assert.deepEqual([...Buffer.from(cover.content[0]!.resource.blob as string, 'base64')], [0, 1, 2, 255]);
    const health = await call('books', 'get_health');
    assert.equal(health.structuredContent, undefined, 'a JSON array is text only');
    assert.equal(health.content[0]!.text, '["ok"]');
    const session = await call('books', 'whoami', { 'X-Trace': 't-1' });
    assert.equal(session.content[0]!.text, 'trace=t-1');
  });

  it('bounds a call by the server timeout (the request is aborted) and an answer by the result size limit', async () => {
    const late = await call('slowbooks', 'slow').catch((error: unknown) => error as Error);
    const text = late instanceof Error ? late.message : (late.content[0]!.text as string);
    assert.match(text, /time|deadline/i);
    await waitFor(() => books.aborted.includes('/api/slow'), 20_000, 'the API request aborted');
    const big = await call('books', 'big');
    assert.equal(big.isError, true);
    assert.match(big.content[0]!.text, /larger than 2097152 bytes/);
  });

  it('validates arguments against the operation before sending anything', async () => {
    const before = books.seen.length;
    const invalid = await call('books', 'createbook', { body: { title: '' } });
    assert.equal(invalid.isError, true);
    assert.match(invalid.content[0]!.text, /arguments\.body\.title must NOT have fewer than 1 characters; nothing was sent/);
    const extra = await call('books', 'whoami', { sid: 'stolen-session' });
    assert.equal(extra.isError, true);
    assert.match(extra.content[0]!.text, /must NOT have additional properties \(sid\)/);
    assert.equal(books.seen.length, before);
  });

  it('keeps every path parameter in its own segment under baseUrl: dot and empty segments are refused, the rest encoded', async () => {
    // An empty, `.` or `..` value would be removed by URL normalisation and reach another path (issue 28 item 1).
    for (const id of ['..', '.', '']) {
      const before = books.seen.length;
      const refused = await call('books', 'getbook', { id });
      assert.equal(refused.isError, true, id);
      assert.match(
        refused.content[0]!.text,
        /^tool getbook: arguments\.id is "[.]{0,2}", which is not a path segment of its own \(path parameter "id" of \/books\/\{id\}\).*nothing was sent to the API$/,
      );
      assert.equal(books.seen.length, before, `nothing sent for ${JSON.stringify(id)}`);
    }
    // Whatever else a value holds stays one segment of /api/books/{id}, as the recording API saw it.
    for (const id of ['%2e%2e', '%2E.', '..%2f', 'a/../b', '../../health', '\uff0e\uff0e', '\u2024\u2024', '...', '..;x']) {
      const before = books.seen.length;
      await call('books', 'getbook', { id });
      const sent = books.seen.slice(before).map((r) => r.url);
      assert.deepEqual(sent, [`/api/books/${encodeURIComponent(id)}`], JSON.stringify(id));
    }
  });

  it('refuses a dot segment in either parameter of a two-parameter template, and builds the rest under baseUrl', () => {
    const operation: OpenApiOperation = {
      method: 'get',
      path: '/shelves/{shelf}/books/{book}',
      parameters: [
        { name: 'shelf', in: 'path', key: 'shelf', explode: false },
        { name: 'book', in: 'path', key: 'book', explode: false },
      ],
      level: 1,
      tool: { name: 'getshelfbook', inputSchema: { type: 'object' } },
    };
    assert.match(pathParameterProblem(operation, { shelf: '..', book: '..' }) ?? '', /^arguments\.shelf is "\.\."/);
    assert.match(pathParameterProblem(operation, { shelf: 'a', book: '.' }) ?? '', /^arguments\.book is "\."/);
    assert.equal(pathParameterProblem(operation, { shelf: 'a..', book: '..b' }), undefined);
    const built = buildRequest('http://api.test/v1/', operation, { shelf: '%2e%2e', book: 'x/../../y' });
    assert.equal(built.url.pathname, '/v1/shelves/%252e%252e/books/x%2F..%2F..%2Fy');
    assert.throws(() => buildRequest('http://api.test/v1', operation, { shelf: '..', book: '..' }), /is not the operation's path/);
  });

  it('sends the credential to its own API only, and never an Authorization or a cookie', async () => {
    await call('other', 'listbooks');
    assert.ok(books.seen.length > 0 && books.seen.every((r) => r.headers['x-api-key'] === API_KEY));
    assert.ok(other.seen.length > 0);
    assert.ok(
      other.seen.every((r) => r.headers['x-api-key'] === undefined),
      'the other API never got the key',
    );
    for (const request of [...books.seen, ...other.seen]) {
      assert.equal(request.headers.authorization, undefined);
      assert.equal(request.headers.cookie, undefined);
    }
    const unauthorized = await call('other', 'listbooks');
    assert.equal(unauthorized.isError, true);
    assert.equal(unauthorized._meta?.status, 401);
  });

  it('refuses a base URL the egress guard refuses, as a tool error', async () => {
    const result = await call('metadata', 'listpets');
    assert.equal(result.isError, true);
    assert.match(result.content[0]!.text, /169\.254\.169\.254/);
    assert.match(result.content[0]!.text, /PUNK_UPSTREAM_ALLOWED_NETWORKS/);
  });

  it('holds a DELETE (level 4) under the default policy, sends nothing, and puts the calls on the ledger', async () => {
    const before = books.seen.length;
    const result = await call('books', 'deletebook', { id: '1' });
    assert.equal(result.isError, true);
    assert.match(result.content[0]!.text, /approval/i);
    assert.equal(books.seen.length, before, 'the DELETE was not sent');
    await waitFor(() => events.some((e) => e.type === 'tool.completed' && (e as any).data?.name === 'listbooks'), 20_000, 'ledger events');
    const called = events.filter((e) => e.type === 'tool.called' && e.tenant === tenant).map((e) => (e as any).data);
    assert.ok(called.some((d) => d.name === 'createbook' && d.sideEffectLevel === 3));
    assert.ok(!called.some((d) => d.name === 'deletebook'), 'the held DELETE never reached the upstream');
  });

  it('reports an invalid document and a duplicate x-mcp name on the server status, naming where', async () => {
    await call('broken', 'x').catch(() => undefined);
    await call('dupes', 'x').catch(() => undefined);
    await waitFor(async () => (await one('broken')).state === 'failed' && (await one('dupes')).state === 'failed', 30_000, 'failed states');
    const broken = await one('broken');
    assert.match(broken.lastError!, /OpenAPI document \(openapi\.content\) is invalid/);
    assert.match(broken.lastError!, /responses/);
    const dupes = await one('dupes');
    assert.match(
      dupes.lastError!,
      /paths\.\/crash\.get\.x-mcp\.name: the tool name getbook is already the x-mcp\.name of paths\.\/books\/\{id\}\.get/,
    );
    assert.equal((await one('books')).state, 'ready');
  });

  it('accepts an openapi registration through the registry API and serves it', async () => {
    const petstore = await readFile(fixture('openapi/petstore.yaml'), 'utf8');
    const request = (body: Record<string, unknown>) =>
      bus.request(subjects.gatewayAdmin, { tenant, principal: admin, ...body }, { timeoutMs: 30_000 });
    const created = (await request({
      op: 'servers.create',
      body: {
        name: 'pets',
        type: 'openapi',
        openapi: { content: petstore, baseUrl: books.url },
        headers: { 'X-Api-Key': 'cred:books-key' },
      },
    })) as any;
    assert.equal(created.server.type, 'openapi', JSON.stringify(created));
    assert.equal(created.server.warnings, undefined, 'every petstore operation has an operationId');
    await waitFor(async () => (await catalog()).some((s) => s.name === 'pets'), 20_000, 'registered server');
    const pet = await call('pets', 'showpetbyid', { petId: '1' });
    // The books API has no /pets route: its own 404 (not a 401) shows the request went there with the credential.
    assert.equal(pet._meta?.status, 404);
    assert.deepEqual(pet.structuredContent, { error: 'no route' });
    assert.ok(books.seen.some((r) => r.url === '/api/pets/1' && r.headers['x-api-key'] === API_KEY));
    const refused = (await request({
      op: 'servers.create',
      body: { name: 'pets2', type: 'openapi', openapi: { file: '/etc/passwd' } },
    }).catch((e: unknown) => e)) as any;
    assert.match(String(refused?.message ?? JSON.stringify(refused)), /body\.openapi\.file: applies only to manifests/);
    const metadata = (await request({
      op: 'servers.create',
      body: { name: 'pets3', type: 'openapi', openapi: { content: petstore, baseUrl: 'http://169.254.169.254/' } },
    }).catch((e: unknown) => e)) as any;
    assert.match(String(metadata?.message ?? JSON.stringify(metadata)), /body\.openapi\.baseUrl: .*169\.254\.169\.254/);
  });
});
