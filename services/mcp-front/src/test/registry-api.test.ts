/**
 * The registry API over HTTP through real fronts (createFront) in front of the real gateway (scratch Postgres
 * database, stdio registrations allowed as in `punk up`) and governance on a MemoryBus, with
 * @modelcontextprotocol/server-everything as the registered server. One front has authentication off (every
 * route open, the anonymous principal), the other on (admins only: 401 without a token, 403 without the scope).
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, streams, type LedgerEvent } from '@punk/lib';
import { listen } from './listen.js';
import { createFront, type Front } from '../index.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';

const log = createLogger('registry-api-test', 'silent');
const MAX_BODY_BYTES = 16 * 1024;
const BOOTSTRAP = randomBytes(24).toString('base64url');
const everythingBin = resolve(
  fileURLToPath(new URL('.', import.meta.url)),
  '../../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
);

/** A request to `/api/v1<path>`; a `body` that is not a string is sent as JSON. */
async function api(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; contentType?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; json: any; headers: Headers }> {
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  const response = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: {
      ...(options.token !== undefined && { authorization: `Bearer ${options.token}` }),
      ...(body !== undefined && { 'content-type': options.contentType ?? 'application/json' }),
      ...options.headers,
    },
    ...(body !== undefined && { body }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text), headers: response.headers };
}

describe('the registry API over HTTP', () => {
  const tenant = `reg-${randomBytes(4).toString('hex')}`;
  let bus: MemoryBus;
  let database: ScratchDb;
  let workDir: string;
  let governance: GovernanceService;
  let gateway: Gateway;
  let open: { front: Front; http: HttpServer; base: string };
  let guarded: { front: Front; http: HttpServer; base: string };
  const events: LedgerEvent[] = [];

  before(async () => {
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    await bus.consume(streams.ledger.name, 'test-reader', async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)));
    database = await openScratchDb(log);
    workDir = await mkdtemp(join(tmpdir(), 'punk-registry-api-'));
    governance = await startGovernance({ bus, log });
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
      allowStdioRegistrations: true,
    });
    const openFront = await createFront({ bus, log, tenant, maxBodyBytes: MAX_BODY_BYTES, callTimeoutMs: 30_000 });
    open = { front: openFront, ...(await listen(openFront)) };
    const guardedFront = await createFront({
      bus,
      log,
      tenant,
      maxBodyBytes: MAX_BODY_BYTES,
      callTimeoutMs: 30_000,
      auth: { publicUrl: 'https://punk.example.test', bootstrapAdminKey: BOOTSTRAP },
    });
    guarded = { front: guardedFront, ...(await listen(guardedFront)) };
  });

  after(async () => {
    for (const stack of [open, guarded]) {
      if (!stack) continue;
      await stack.front.close();
      stack.http.closeAllConnections();
      await new Promise((done) => stack.http.close(done));
    }
    await gateway?.stop();
    await governance?.stop();
    await bus?.close();
    await database?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  const everything = { name: 'everything', type: 'stdio', command: process.execPath, args: [everythingBin, 'stdio'] };

  it('with authentication off, anyone registers, reads, tests, lists tools of, replaces and deletes a server', async () => {
    const created = await api(open.base, 'POST', '/mcp/servers', { body: everything });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.headers.get('cache-control'), 'no-store');
    assert.equal(created.json.server.name, 'everything');
    assert.equal(created.json.server.createdBy, 'anonymous');

    const listed = await api(open.base, 'GET', '/mcp/servers');
    assert.equal(listed.status, 200);
    assert.equal(listed.headers.get('cache-control'), 'no-store');
    assert.deepEqual(
      listed.json.servers.map((s: { name: string }) => s.name),
      ['everything'],
    );

    const tested = await api(open.base, 'POST', '/mcp/servers/everything/test');
    assert.equal(tested.status, 200);
    assert.equal(tested.json.ok, true, tested.json.error);
    assert.ok(tested.json.tools.some((t: { name: string }) => t.name === 'echo'));
    const tools = await api(open.base, 'GET', '/mcp/servers/everything/tools');
    assert.equal(tools.status, 200);
    assert.equal(tools.json.cached, true);
    assert.equal(tools.json.tools.length, tested.json.toolCount);

    const replaced = await api(open.base, 'PUT', '/mcp/servers/everything', { body: { ...everything, tools: { deny: ['echo'] } } });
    assert.equal(replaced.status, 200);
    assert.deepEqual(replaced.json.server.registration.tools, { deny: ['echo'] });
    const got = await api(open.base, 'GET', '/mcp/servers/everything');
    assert.equal(got.status, 200);
    assert.equal(got.json.server.status, 'unknown');

    const deleted = await api(open.base, 'DELETE', '/mcp/servers/everything');
    assert.equal(deleted.status, 204);
    assert.equal(deleted.json, undefined);
    const gone = await api(open.base, 'GET', '/mcp/servers/everything');
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.json, { error: { code: 'ServerNotFound', message: `tenant ${tenant} has no server named everything` } });
    const registered = events.find((e) => e.type === 'server.registered' && e.tenant === tenant);
    assert.equal(registered?.principal?.subject, 'anonymous');
  });

  it("takes env as a manifest's list of { name, value | valueFrom } as well as a record", async () => {
    const env = [
      { name: 'MODE', value: 'list' },
      { name: 'TOKEN', valueFrom: { credentialRef: { name: 'api', key: 'token' } } },
    ];
    const created = await api(open.base, 'POST', '/mcp/servers', { body: { ...everything, name: 'listed-env', env } });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.deepEqual(created.json.server.registration.env, { MODE: '<redacted>', TOKEN: 'cred:api/token' });
    const refused = await api(open.base, 'POST', '/mcp/servers', { body: { ...everything, name: 'bad-env', env: [{ name: 'MODE' }] } });
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.json.error, { code: 'InvalidRegistration', message: 'body.env[0]: set exactly one of value and valueFrom' });
    assert.equal((await api(open.base, 'DELETE', '/mcp/servers/listed-env')).status, 204);
  });

  it('answers bad requests with the status of the error and a message naming what is wrong', async () => {
    const cases: Array<
      [string, string, { body?: unknown; contentType?: string; headers?: Record<string, string> }, number, string, RegExp]
    > = [
      [
        'POST',
        '/mcp/servers',
        { body: { name: 'x', type: 'http' } },
        400,
        'InvalidRegistration',
        /^body\.url: required for an http registration$/,
      ],
      ['POST', '/mcp/servers', { body: { ...everything, nickname: 'e' } }, 400, 'InvalidRegistration', /^body\.nickname: unknown field$/],
      [
        'POST',
        '/mcp/servers',
        { body: { name: 'x', type: 'http', url: 'ftp://x.test/' } },
        400,
        'InvalidRegistration',
        /^body\.url: must be an http or https URL$/,
      ],
      ['POST', '/mcp/servers', { body: '{"name": "x",' }, 400, 'InvalidRequest', /^body: not valid JSON$/],
      ['POST', '/mcp/servers', { body: [everything] }, 400, 'InvalidRequest', /^body: must be a JSON object$/],
      ['POST', '/mcp/servers', { body: 'null' }, 400, 'InvalidRequest', /^body: must be a JSON object$/],
      [
        'POST',
        '/mcp/servers',
        { body: 'name=x', contentType: 'application/x-www-form-urlencoded' },
        415,
        'UnsupportedMediaType',
        /Content-Type: application\/json/,
      ],
      [
        'POST',
        '/mcp/servers',
        { body: { ...everything, args: ['x'.repeat(MAX_BODY_BYTES)] } },
        413,
        'PayloadTooLarge',
        new RegExp(`larger than ${MAX_BODY_BYTES} bytes \\(PUNK_MAX_BODY_BYTES\\)`),
      ],
      [
        'PUT',
        '/mcp/servers/ghost',
        { body: { type: 'http', url: 'http://127.0.0.1:9/mcp' } },
        404,
        'ServerNotFound',
        /no server named ghost/,
      ],
      [
        'POST',
        '/mcp/servers',
        { body: everything, headers: { 'content-encoding': 'gzip' } },
        400,
        'InvalidRequest',
        /^the body does not match its Content-Encoding \(incorrect header check\)$/,
      ],
      [
        'POST',
        '/mcp/servers',
        { body: everything, headers: { 'content-encoding': 'x-punk' } },
        415,
        'UnsupportedMediaType',
        /^the body could not be read: unsupported content encoding "x-punk" \(encoding\.unsupported\)$/,
      ],
      [
        'POST',
        '/mcp/servers',
        { body: everything, contentType: 'application/json; charset=iso-8859-1' },
        415,
        'UnsupportedMediaType',
        /^the body could not be read: unsupported charset "ISO-8859-1" \(charset\.unsupported\)$/,
      ],
      ['GET', '/mcp/servers/%00', {}, 404, 'ServerNotFound', /no server named \0$/],
      ['DELETE', '/mcp/servers/x%00y', {}, 404, 'ServerNotFound', /no server named x\0y$/],
      ['PUT', '/mcp/servers/%00', { body: { type: 'http', url: 'http://127.0.0.1:9/mcp' } }, 404, 'ServerNotFound', /no server named \0$/],
      [
        'PUT',
        '/mcp/servers/ghost',
        { body: { name: 'other', type: 'http', url: 'http://127.0.0.1:9/mcp' } },
        400,
        'InvalidRegistration',
        /^body\.name: must be "ghost"/,
      ],
      ['DELETE', '/mcp/servers/ghost', {}, 404, 'ServerNotFound', /ghost/],
      ['POST', '/mcp/servers/ghost/test', {}, 404, 'ServerNotFound', /ghost/],
      ['GET', '/mcp/servers/ghost/tools', {}, 404, 'ServerNotFound', /ghost/],
      ['POST', '/mcp/servers/ghost/tools/echo/accept', {}, 404, 'ServerNotFound', /ghost/],
      ['POST', '/mcp/servers/ghost/tools/echo/accept', { body: { fingerprint: 'a'.repeat(64) } }, 404, 'ServerNotFound', /ghost/],
      [
        'POST',
        '/mcp/servers/ghost/tools/echo/accept',
        { body: 'fingerprint=x', contentType: 'text/plain' },
        415,
        'UnsupportedMediaType',
        /Content-Type: application\/json/,
      ],
      ['POST', '/mcp/servers/ghost/tools/echo/accept', { body: '{"fingerprint":' }, 400, 'InvalidRequest', /not valid JSON/],
      ['GET', '/mcp/servers?tenant=Not_A_Tenant', {}, 400, 'InvalidParameter', /query parameter tenant/],
      // A misspelt parameter is refused, not ignored (it would act on the caller's own tenant).
      ...['/mcp/servers', '/mcp/servers/ghost', '/mcp/servers/ghost/tools', '/credentials', '/credentials/some-id', '/settings'].map(
        (route): (typeof cases)[number] => [
          'GET',
          `${route}?tenat=team-a`,
          {},
          400,
          'InvalidParameter',
          new RegExp(`^unknown query parameter "tenat" of /api/v1${route}; accepted: tenant$`),
        ],
      ),
      ['DELETE', '/mcp/servers/ghost?force=1', {}, 400, 'InvalidParameter', /unknown query parameter "force".*accepted: tenant$/],
      ['GET', '/credentials', {}, 503, 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/],
      ['POST', '/credentials', { body: { name: 'x' } }, 503, 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/],
      ['GET', '/credentials/some-id', {}, 503, 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/],
      ['DELETE', '/credentials/some-id', {}, 503, 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/],
      ['PUT', '/credentials/some-id', { body: { data: { value: 'x' } } }, 503, 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/],
    ];
    for (const [method, path, options, status, code, message] of cases) {
      const answer = await api(open.base, method, path, options);
      assert.equal(answer.status, status, `${method} ${path}: ${JSON.stringify(answer.json)}`);
      assert.equal(answer.json.error.code, code, `${method} ${path}`);
      assert.match(answer.json.error.message, message, `${method} ${path}`);
      assert.equal(answer.headers.get('cache-control'), 'no-store');
    }
    const first = await api(open.base, 'POST', '/mcp/servers', { body: { name: 'dup', type: 'http', url: 'http://127.0.0.1:9/mcp' } });
    assert.equal(first.status, 201);
    const second = await api(open.base, 'POST', '/mcp/servers', { body: { name: 'dup', type: 'http', url: 'http://127.0.0.1:9/mcp' } });
    assert.equal(second.status, 409);
    assert.equal(second.json.error.code, 'ServerExists');
    assert.equal((await api(open.base, 'DELETE', '/mcp/servers/dup')).status, 204);
  });

  it("with authentication on, only admins get in; the admin's tenant is the default and ?tenant= picks another", async () => {
    assert.equal((await api(guarded.base, 'GET', '/mcp/servers')).status, 401);
    assert.equal((await api(guarded.base, 'POST', '/mcp/servers', { body: everything })).status, 401);
    const key = await api(guarded.base, 'POST', '/api-keys', { token: BOOTSTRAP, body: { name: 'a user' } });
    assert.equal(key.status, 201);
    for (const [method, path] of [
      ['GET', '/mcp/servers'],
      ['POST', '/mcp/servers'],
      ['DELETE', '/mcp/servers/x'],
      ['POST', '/mcp/servers/x/test'],
      ['GET', '/credentials'],
    ] as const) {
      const refused = await api(guarded.base, method, path, {
        token: key.json.key,
        ...(method === 'POST' && path === '/mcp/servers' && { body: everything }),
      });
      assert.equal(refused.status, 403, `${method} ${path}`);
      assert.equal(refused.json.error.code, 'Forbidden');
    }

    const body = { name: 'admins-only', type: 'http', url: 'http://127.0.0.1:9/mcp' };
    const created = await api(guarded.base, 'POST', '/mcp/servers', { token: BOOTSTRAP, body });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.server.createdBy, 'bootstrap-admin');
    assert.equal(created.json.server.namespace, tenant);
    const elsewhere = `other-${randomBytes(3).toString('hex')}`;
    const other = await api(guarded.base, 'POST', `/mcp/servers?tenant=${elsewhere}`, { token: BOOTSTRAP, body });
    assert.equal(other.status, 201);
    assert.equal(other.json.server.namespace, elsewhere);
    assert.deepEqual(
      (await api(guarded.base, 'GET', `/mcp/servers?tenant=${elsewhere}`, { token: BOOTSTRAP })).json.servers.map(
        (s: { name: string }) => s.name,
      ),
      ['admins-only'],
    );
    assert.equal((await api(guarded.base, 'DELETE', `/mcp/servers/admins-only?tenant=${elsewhere}`, { token: BOOTSTRAP })).status, 204);
    assert.equal((await api(guarded.base, 'DELETE', '/mcp/servers/admins-only', { token: BOOTSTRAP })).status, 204);
  });

  it("never shows an upstream URL's query values: not in answers, listings, tests or errors", async () => {
    const url = 'http://127.0.0.1:9/mcp?token=s3cr3t-q&flag';
    const answers = [await api(open.base, 'POST', '/mcp/servers', { body: { name: 'tokened', type: 'http', url } })];
    assert.equal(answers[0]!.status, 201, JSON.stringify(answers[0]!.json));
    assert.equal(answers[0]!.json.server.registration.url, 'http://127.0.0.1:9/mcp?token=<redacted>&<redacted>');
    answers.push(
      await api(open.base, 'GET', '/mcp/servers/tokened'),
      await api(open.base, 'GET', '/mcp/servers'),
      await api(open.base, 'POST', '/mcp/servers/tokened/test'),
      await api(open.base, 'GET', '/mcp/servers/tokened'),
    );
    // The registration as read, sent back whole, keeps the stored URL (the redacted one stands for it).
    const replaced = await api(open.base, 'PUT', '/mcp/servers/tokened', { body: answers[1]!.json.server.registration });
    assert.equal(replaced.status, 200, JSON.stringify(replaced.json));
    answers.push(replaced);
    // A refused URL is named with its query values redacted.
    const refused = await api(open.base, 'POST', '/mcp/servers', {
      body: { name: 'refused', type: 'http', url: 'http://127.0.0.1:9/latest?token=s3cr3t-q#top' },
    });
    assert.equal(refused.status, 400, JSON.stringify(refused.json));
    assert.match(refused.json.error.message, /127\.0\.0\.1:9\/latest\?token=<redacted>#top refused/);
    answers.push(refused);
    for (const answer of answers) assert.doesNotMatch(JSON.stringify(answer.json), /s3cr3t-q/);
    assert.equal((await api(open.base, 'DELETE', '/mcp/servers/tokened')).status, 204);
  });

  it('answers 503 while no gateway serves the registry', async () => {
    await gateway.stop();
    const answer = await api(open.base, 'GET', '/mcp/servers');
    assert.equal(answer.status, 503);
    assert.equal(answer.json.error.code, 'BusNoResponders');
  });
});
