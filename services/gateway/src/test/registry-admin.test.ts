/**
 * The registry on `punk.gateway.admin`, driven as mcp-front drives it: a real gateway on a MemoryBus with a
 * scratch Postgres database, @modelcontextprotocol/server-everything over Streamable HTTP and the counter
 * fixture over stdio. An admin registers, lists, tests, replaces and deletes servers; managed servers are
 * listed read-only; every mutation is on the ledger without literal header or env values.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  anonymousPrincipal,
  createLogger,
  MemoryBus,
  PunkError,
  requestGateway,
  subjects,
  type McpServer,
  type Principal,
} from '@punk/lib';
import { destinationPolicyOf, startGateway } from '../index.js';
import { fixture, freePort, installed, manifest, startHarness, waitFor, type Harness } from './harness.js';

const log = createLogger('registry-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const everythingBin = installed('@modelcontextprotocol/server-everything/dist/index.js');

interface World extends Harness {
  admin: Principal;
  /** Sends one admin request (the tenant and admin principal filled in). */
  request(request: Record<string, unknown>): Promise<any>;
}

async function startWorld(options: { allowStdioRegistrations?: boolean; managed?: (tenant: string) => McpServer[] } = {}): Promise<World> {
  const h = await startHarness((tenant) => options.managed?.(tenant) ?? [], {
    startTimeoutMs: 30_000,
    ...(options.allowStdioRegistrations !== undefined && { allowStdioRegistrations: options.allowStdioRegistrations }),
  });
  const admin: Principal = { subject: 'admin-alice', tenant: h.tenant, groups: [], scopes: ['punk:admin'] };
  return {
    ...h,
    admin,
    request: (request) =>
      h.bus.request(
        subjects.gatewayAdmin,
        { tenant: h.tenant, principal: admin, ...request },
        {
          timeoutMs: 45_000,
        },
      ) as Promise<any>,
  };
}

/** server-everything on a free port over Streamable HTTP (`/mcp`), or over the 2024-11-05 HTTP+SSE transport only (`/sse`). */
async function startEverythingHttp(
  mode: 'streamableHttp' | 'sse' = 'streamableHttp',
  port?: number,
): Promise<{ url: string; stop(): Promise<void> }> {
  port ??= await freePort();
  const child: ChildProcess = spawn(process.execPath, [everythingBin, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  const listening = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
  await waitFor(listening, 20_000, `server-everything ${mode} listening`).catch((error: unknown) => {
    child.kill();
    throw error;
  });
  return {
    url: `http://127.0.0.1:${port}/${mode === 'sse' ? 'sse' : 'mcp'}`,
    async stop() {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** Asserts that `promise` rejects with PunkError `code` and a message matching `message`. */
async function rejects(promise: Promise<unknown>, code: string, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof PunkError, String(error));
    assert.equal(error.code, code, error.message);
    assert.match(error.message, message);
    return true;
  });
}

const ready = (world: World, name: string) =>
  waitFor(() => world.gateway.catalog(world.tenant).some((s) => s.name === name && s.state === 'ready'), 30_000, `${name} ready`);

describe('the registry of http servers', () => {
  let world: World;
  let everything: { url: string; stop(): Promise<void> };

  before(async () => {
    everything = await startEverythingHttp();
    world = await startWorld();
  });
  after(async () => {
    await world?.close();
    await everything?.stop();
  });

  it('an admin registers a server over Streamable HTTP: it is served, listed, tested, replaced and deleted, each on the ledger', async () => {
    const body = {
      name: 'remote',
      type: 'http',
      url: everything.url,
      headers: { 'X-Punk-Test': 'literal-header-value-7d1' },
      tools: { deny: ['echo'] },
    };
    const created = await world.request({ op: 'servers.create', body });
    assert.equal(created.server.name, 'remote');
    assert.equal(created.server.namespace, world.tenant);
    assert.equal(created.server.managed, false);
    assert.equal(created.server.type, 'http');
    assert.equal(created.server.status, 'unknown');
    assert.equal(created.server.createdBy, 'admin-alice');
    assert.deepEqual(
      created.server.registration,
      { ...body, headers: { 'X-Punk-Test': '<redacted>' } },
      'literal header values are never answered',
    );

    await ready(world, 'remote');
    const served = world.gateway.catalog(world.tenant).find((s) => s.name === 'remote')!;
    assert.ok(served.tools.length > 0);
    assert.ok(!served.tools.some((t) => t.name === 'echo'), 'tools.deny applies to the registered server');
    const echo = await requestGateway(
      world.bus,
      {
        method: 'tools/call',
        tenant: world.tenant,
        server: 'remote',
        principal: anonymousPrincipal(world.tenant),
        runId: 'r1',
        name: 'get-sum',
        arguments: { a: 2, b: 3 },
      },
      30_000,
    );
    assert.match(JSON.stringify(echo), /5/);

    const { servers } = await world.request({ op: 'servers.list' });
    assert.deepEqual(
      servers.map((s: { name: string }) => s.name),
      ['remote'],
    );
    assert.equal(servers[0].state, 'ready');
    assert.equal(servers[0].toolCount, served.tools.length);

    const tested = await world.request({ op: 'servers.test', id: 'remote' });
    assert.equal(tested.ok, true);
    assert.equal(tested.toolCount, served.tools.length);
    assert.deepEqual(tested.tools.map((t: { name: string }) => t.name).sort(), served.tools.map((t) => t.name).sort());
    assert.equal(typeof tested.latencyMs, 'number');
    const got = (await world.request({ op: 'servers.get', id: 'remote' })).server;
    assert.equal(got.status, 'ok');
    assert.equal(got.latencyMs, tested.latencyMs);
    assert.ok(Date.parse(got.testedAt) > 0);

    // A registration read back (masked) and sent back whole keeps the stored literal value.
    await world.request({ op: 'servers.update', id: 'remote', body: got.registration });
    const stored = await world.database.db.query<{ body: { headers: Record<string, string> } }>(
      'SELECT body FROM gateway.registrations WHERE tenant = $1 AND name = $2',
      [world.tenant, 'remote'],
    );
    assert.deepEqual(stored.rows[0]?.body.headers, { 'X-Punk-Test': 'literal-header-value-7d1' });
    // Header names are case-insensitive: the mask under another spelling keeps the stored value too.
    await world.request({ op: 'servers.update', id: 'remote', body: { ...got.registration, headers: { 'x-punk-test': '<redacted>' } } });
    const respelled = await world.database.db.query<{ body: { headers: Record<string, string> } }>(
      'SELECT body FROM gateway.registrations WHERE tenant = $1 AND name = $2',
      [world.tenant, 'remote'],
    );
    assert.deepEqual(respelled.rows[0]?.body.headers, { 'x-punk-test': 'literal-header-value-7d1' });
    // So does the mask in a manifest's list form.
    await world.request({
      op: 'servers.update',
      id: 'remote',
      body: { ...got.registration, headers: [{ name: 'X-Punk-Test', value: '<redacted>' }] },
    });
    const listed = await world.database.db.query<{ body: { headers: Record<string, string> } }>(
      'SELECT body FROM gateway.registrations WHERE tenant = $1 AND name = $2',
      [world.tenant, 'remote'],
    );
    assert.deepEqual(listed.rows[0]?.body.headers, { 'X-Punk-Test': 'literal-header-value-7d1' });
    await rejects(
      world.request({
        op: 'servers.update',
        id: 'remote',
        body: { ...got.registration, headers: [{ name: 'X-New', value: '<redacted>' }] },
      }),
      'InvalidRegistration',
      /^body\.headers\[0\]\.value: is <redacted>, which stands for a stored value, but none is stored for this entry/,
    );
    // The mask of an entry with no stored value is refused, never stored or sent upstream.
    await rejects(
      world.request({
        op: 'servers.update',
        id: 'remote',
        body: { ...got.registration, headers: { 'X-Punk-Test': '<redacted>', 'X-New': '<redacted>' } },
      }),
      'InvalidRegistration',
      /^body\.headers\.X-New: is <redacted>, which stands for a stored value, but none is stored for this entry/,
    );
    await rejects(
      world.request({ op: 'servers.create', body: { ...body, name: 'masked', headers: { 'X-Punk-Test': '<redacted>' } } }),
      'InvalidRegistration',
      /^body\.headers\.X-Punk-Test: is <redacted>/,
    );

    const replaced = await world.request({
      op: 'servers.update',
      id: 'remote',
      body: { type: 'http', url: everything.url, tools: { deny: ['echo', 'get-sum'] } },
    });
    assert.equal(replaced.server.status, 'unknown', 'a replaced registration forgets the test of the old one');
    assert.equal(replaced.server.updatedBy, 'admin-alice');
    await waitFor(
      () =>
        world.gateway
          .catalog(world.tenant)
          .some((s) => s.name === 'remote' && s.state === 'ready' && !s.tools.some((t) => t.name === 'get-sum')),
      30_000,
      'the replaced server served',
    );

    assert.deepEqual(await world.request({ op: 'servers.delete', id: 'remote' }), {});
    assert.ok(!world.gateway.catalog(world.tenant).some((s) => s.name === 'remote'), 'a deleted server is no longer served');
    await rejects(world.request({ op: 'servers.get', id: 'remote' }), 'ServerNotFound', /no server named remote/);
    await waitFor(
      () => ['added', 'updated', 'removed'].every((change) => world.changes.some((c) => c.server === 'remote' && c.change === change)),
      5_000,
      'changes broadcast',
    );

    await waitFor(
      () => world.events.filter((e) => e.server === 'remote' && e.runId === `registry.${world.tenant}.remote`).length === 7,
      5_000,
      'seven registry events',
    );
    const registryEvents = world.events.filter((e) => e.runId === `registry.${world.tenant}.remote`);
    assert.deepEqual(
      registryEvents.map((e) => e.type),
      ['server.registered', 'server.tested', 'server.updated', 'server.updated', 'server.updated', 'server.updated', 'server.deregistered'],
    );
    for (const event of registryEvents) assert.equal(event.principal?.subject, 'admin-alice');
    assert.deepEqual(registryEvents[0]!.data.headers, [{ name: 'X-Punk-Test' }]);
    assert.equal(registryEvents[1]!.data.ok, true);
    assert.ok(!JSON.stringify(world.events).includes('literal-header-value-7d1'), 'no literal header value on the ledger');
  });

  it('tests a server that speaks only the old HTTP+SSE transport: the Streamable HTTP handshake is refused and the test falls back', async () => {
    const old = await startEverythingHttp('sse');
    try {
      await world.request({ op: 'servers.create', body: { name: 'old-sse', type: 'http', url: old.url } });
      const tested = await world.request({ op: 'servers.test', id: 'old-sse' });
      assert.equal(tested.ok, true, tested.error);
      assert.ok(tested.tools.some((t: { name: string }) => t.name === 'echo'));
      await waitFor(
        () => world.gateway.catalog(world.tenant).some((s) => s.name === 'old-sse' && s.state === 'ready' && s.transport === 'sse'),
        30_000,
        'the pooled connection on HTTP+SSE',
      );
      await world.request({ op: 'servers.delete', id: 'old-sse' });
    } finally {
      await old.stop();
    }
  });

  it("a failed test's error is not shown once a later listing finds the server answering (state ready)", async () => {
    const port = await freePort();
    await world.request({ op: 'servers.create', body: { name: 'late-riser', type: 'http', url: `http://127.0.0.1:${port}/mcp` } });
    const tested = await world.request({ op: 'servers.test', id: 'late-riser' });
    assert.equal(tested.ok, false);
    const failed = (await world.request({ op: 'servers.get', id: 'late-riser' })).server;
    assert.equal(failed.status, 'error');
    assert.equal(typeof failed.lastError, 'string', 'the failed test is the latest word');
    const upstream = await startEverythingHttp('streamableHttp', port);
    try {
      await ready(world, 'late-riser');
      // The pooled connection's first listing follows its ready state by a moment.
      let got: { state: string; status: string; lastError?: string } = failed;
      await waitFor(
        async () => (got = (await world.request({ op: 'servers.get', id: 'late-riser' })).server).lastError === undefined,
        30_000,
        'a ready server listed after its failed test shows no error',
      );
      assert.equal(got.state, 'ready');
      assert.equal(got.status, 'error', 'the last test itself did fail');
    } finally {
      await world.request({ op: 'servers.delete', id: 'late-riser' });
      await upstream.stop();
    }
  });

  it('a registration that cannot connect tests as ok: false with the error, stored on the registration', async () => {
    const closedPort = await freePort();
    await world.request({
      op: 'servers.create',
      body: { name: 'nowhere', type: 'http', url: `http://127.0.0.1:${closedPort}/mcp`, headers: { Authorization: 'cred:some-token' } },
    });
    const tested = await world.request({ op: 'servers.test', id: 'nowhere' });
    assert.equal(tested.ok, false);
    assert.equal(tested.toolCount, 0);
    assert.match(tested.error, /nowhere/);
    const got = (await world.request({ op: 'servers.get', id: 'nowhere' })).server;
    assert.equal(got.status, 'error');
    assert.match(got.lastError, /nowhere/);
    await rejects(
      world.request({ op: 'servers.tools', id: 'nowhere' }),
      'ServerUnavailable',
      /tools of server nowhere could not be listed/,
    );
    const registered = world.events.find((e) => e.type === 'server.registered' && e.server === 'nowhere');
    assert.deepEqual(
      registered?.data.headers,
      [{ name: 'Authorization', value: 'cred:some-token' }],
      'cred: references are recorded, they are not secrets',
    );
    await world.request({ op: 'servers.delete', id: 'nowhere' });
  });

  it('answers the tools from the last listing, and lists live once that is older than 10 minutes', async () => {
    await world.request({ op: 'servers.create', body: { name: 'cached', type: 'http', url: everything.url } });
    await ready(world, 'cached');
    // The pooled connection's listing is the first cache.
    await waitFor(
      async () =>
        (await world.database.db.query(`SELECT 1 FROM gateway.registrations WHERE name = 'cached' AND listed_at IS NOT NULL`)).rowCount ===
        1,
      5_000,
      'pool listing stored',
    );
    const first = await world.request({ op: 'servers.tools', id: 'cached' });
    assert.equal(first.cached, true);
    assert.ok(first.tools.some((t: { name: string }) => t.name === 'echo'));

    await world.database.db.query(
      `UPDATE gateway.registrations SET listed_at = now() - interval '11 minutes' WHERE tenant = $1 AND name = 'cached'`,
      [world.tenant],
    );
    const live = await world.request({ op: 'servers.tools', id: 'cached' });
    assert.equal(live.cached, false);
    assert.ok(Date.parse(live.listedAt) > Date.parse(first.listedAt));
    assert.deepEqual(live.tools.map((t: { name: string }) => t.name).sort(), first.tools.map((t: { name: string }) => t.name).sort());
    const again = await world.request({ op: 'servers.tools', id: 'cached' });
    assert.equal(again.cached, true, 'the live listing is the new cache');
    // The pooled connection may store a listing of its own right after (its listing is as fresh): never an older one.
    assert.ok(
      Date.parse(again.listedAt) >= Date.parse(live.listedAt),
      `${String(again.listedAt)} is not older than ${String(live.listedAt)}`,
    );
    await world.request({ op: 'servers.delete', id: 'cached' });
  });

  it("answers each tool's side-effect level: the registration's override as declared, the others from their names", async () => {
    await world.request({
      op: 'servers.create',
      body: { name: 'levels', type: 'http', url: everything.url, tools: { overrides: [{ name: 'echo', sideEffectLevel: 4 }] } },
    });
    await ready(world, 'levels');
    const { tools, levels } = await world.request({ op: 'servers.tools', id: 'levels' });
    assert.deepEqual(levels.echo, { level: 4, source: 'declared' });
    const others = tools.map((t: { name: string }) => t.name).filter((name: string) => name !== 'echo');
    assert.ok(others.length > 0);
    for (const name of others) assert.equal(levels[name]?.source, 'heuristic', name);
    await world.request({ op: 'servers.delete', id: 'levels' });
  });

  it("refuses what it must: bad bodies naming the field, stdio here, clashes, renames, unknown and other tenants' servers", async () => {
    await rejects(
      world.request({ op: 'servers.create', body: { name: 'x', type: 'http' } }),
      'InvalidRegistration',
      /^body\.url: required for an http registration$/,
    );
    await rejects(
      world.request({ op: 'servers.create', body: { name: 'x', type: 'http', url: everything.url, colour: 'red' } }),
      'InvalidRegistration',
      /^body\.colour: unknown field$/,
    );
    await rejects(
      world.request({ op: 'servers.create', body: { name: 'x', type: 'stdio', command: process.execPath } }),
      'StdioRegistrationsDisabled',
      /^body\.type: stdio registrations .* only in embedded mode/,
    );
    await world.request({ op: 'servers.create', body: { name: 'twice', type: 'http', url: everything.url } });
    await rejects(
      world.request({ op: 'servers.create', body: { name: 'twice', type: 'http', url: everything.url } }),
      'ServerExists',
      /already has a server named twice/,
    );
    await rejects(
      world.request({ op: 'servers.update', id: 'twice', body: { name: 'thrice', type: 'http', url: everything.url } }),
      'InvalidRegistration',
      /^body\.name: must be "twice"/,
    );
    await rejects(
      world.request({ op: 'servers.update', id: 'ghost', body: { type: 'http', url: everything.url } }),
      'ServerNotFound',
      /no server named ghost/,
    );
    await rejects(world.request({ op: 'servers.delete', id: 'ghost' }), 'ServerNotFound', /no server named ghost/);
    // An id that cannot be a server name (a NUL, which Postgres refuses) is unknown, not a database error.
    for (const op of ['servers.get', 'servers.delete', 'servers.test', 'servers.tools'])
      await rejects(world.request({ op, id: 'x\0y' }), 'ServerNotFound', /no server named x\0y$/);
    await rejects(
      world.request({ op: 'servers.update', id: '\0', body: { type: 'http', url: everything.url } }),
      'ServerNotFound',
      /no server named \0$/,
    );
    const other = 'other-tenant';
    const asOther = (request: Record<string, unknown>) =>
      world.bus.request(
        subjects.gatewayAdmin,
        { tenant: other, principal: { ...world.admin, tenant: other }, ...request },
        { timeoutMs: 10_000 },
      );
    await rejects(asOther({ op: 'servers.get', id: 'twice' }), 'ServerNotFound', /tenant other-tenant has no server named twice/);
    await rejects(asOther({ op: 'servers.delete', id: 'twice' }), 'ServerNotFound', /no server named twice/);
    assert.deepEqual(await asOther({ op: 'servers.list' }), { servers: [] });
    await rejects(world.request({ op: 'servers.list', tenant: '' }), 'InvalidMessage', /tenant/);
    await world.request({ op: 'servers.delete', id: 'twice' });
  });

  it('answers CredentialsUnavailable without an encryption key, and ServerNotFound for a tool of an unknown server', async () => {
    await rejects(world.request({ op: 'credentials.list' }), 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/);
    await rejects(world.request({ op: 'credentials.create', body: { name: 'x' } }), 'CredentialsUnavailable', /needs PUNK_ENCRYPTION_KEY/);
    await rejects(world.request({ op: 'servers.acceptTool', id: 'ghost', tool: 'echo' }), 'ServerNotFound', /ghost/);
  });
});

describe('managed servers and stdio registrations', () => {
  let world: World;

  before(async () => {
    world = await startWorld({
      allowStdioRegistrations: true,
      managed: (tenant) => [
        manifest(tenant, 'counter', {
          image: 'local/counter',
          command: [process.execPath, fixture('counter.mjs')],
          env: [{ name: 'LITERAL_SECRET', value: 'manifest-env-value-42' }],
        }),
      ],
    });
  });
  after(async () => world?.close());

  it('lists a manifest server as managed with a summary of its spec, refuses to change it, and tests it', async () => {
    await ready(world, 'counter');
    const { servers } = await world.request({ op: 'servers.list' });
    assert.equal(servers.length, 1);
    const [counter] = servers;
    assert.equal(counter.managed, true);
    assert.equal(counter.type, 'stdio');
    assert.equal(counter.state, 'ready');
    assert.equal(counter.status, 'unknown');
    assert.deepEqual(counter.registration.command, [process.execPath, fixture('counter.mjs')]);
    assert.deepEqual(counter.registration.env, [{ name: 'LITERAL_SECRET' }], 'env names only');
    assert.ok(!JSON.stringify(servers).includes('manifest-env-value-42'));

    const http = { type: 'http', url: 'http://127.0.0.1:9/mcp' };
    await rejects(
      world.request({ op: 'servers.create', body: { name: 'counter', ...http } }),
      'ServerManaged',
      /comes from a manifest or custom resource/,
    );
    await rejects(world.request({ op: 'servers.update', id: 'counter', body: http }), 'ServerManaged', /cannot be changed/);
    await rejects(world.request({ op: 'servers.delete', id: 'counter' }), 'ServerManaged', /cannot be deleted/);

    const tested = await world.request({ op: 'servers.test', id: 'counter' });
    assert.equal(tested.ok, true);
    assert.ok(tested.tools.some((t: { name: string }) => t.name === 'count'));
    const got = (await world.request({ op: 'servers.get', id: 'counter' })).server;
    assert.equal(got.status, 'ok');
    assert.equal(got.toolCount, tested.toolCount);
    assert.equal((await world.request({ op: 'servers.tools', id: 'counter' })).cached, true);
  });

  it('registers a stdio server where that is allowed: tested, served and called like a manifest', async () => {
    const body = {
      name: 'local-counter',
      type: 'stdio',
      command: process.execPath,
      args: [fixture('counter.mjs')],
      env: { COUNTER_MODE: 'registered' },
      tools: { overrides: [{ name: 'count', sideEffectLevel: 1 }] },
    };
    await world.request({ op: 'servers.create', body });
    const tested = await world.request({ op: 'servers.test', id: 'local-counter' });
    assert.equal(tested.ok, true, tested.error);
    assert.ok(tested.tools.some((t: { name: string }) => t.name === 'count'));
    await ready(world, 'local-counter');
    assert.equal(world.gateway.catalog(world.tenant).find((s) => s.name === 'local-counter')?.sideEffectLevels.count, 1);
    const result = await requestGateway(
      world.bus,
      {
        method: 'tools/call',
        tenant: world.tenant,
        server: 'local-counter',
        principal: anonymousPrincipal(world.tenant),
        runId: 'r2',
        name: 'count',
        arguments: {},
      },
      30_000,
    );
    assert.match(JSON.stringify(result), /calls=1/);
    const listed = (await world.request({ op: 'servers.list' })).servers.map((s: { name: string; managed: boolean }) => [
      s.name,
      s.managed,
    ]);
    assert.deepEqual(listed, [
      ['counter', true],
      ['local-counter', false],
    ]);
  });

  it('serves a stored registration again after a restart, and a managed server wins a name clash', async () => {
    await world.database.db.query(
      `INSERT INTO gateway.registrations (tenant, name, body, created_by, updated_by) VALUES ($1, 'counter', $2, 'someone', 'someone')`,
      [world.tenant, JSON.stringify({ name: 'counter', type: 'http', url: 'http://127.0.0.1:9/mcp' })],
    );
    const workDir = await mkdtemp(join(tmpdir(), 'punk-registry-restart-'));
    const second = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus: new MemoryBus(log),
      log,
      db: world.database.db,
      servers: [manifest(world.tenant, 'counter', { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')] })],
      workDir,
      startTimeoutMs: 30_000,
      callTimeoutMs: 30_000,
      allowStdioRegistrations: true,
    });
    try {
      await second.ready();
      const served = second
        .catalog(world.tenant)
        .map((s) => [s.name, s.state])
        .sort();
      assert.deepEqual(
        served,
        [
          ['counter', 'ready'],
          ['local-counter', 'ready'],
        ],
        'the manifest counter (stdio, ready), not the clashing http registration',
      );
    } finally {
      await second.stop();
      await rm(workDir, { recursive: true, force: true });
    }
  });
});

void describe('a managed server Punk starts over HTTP', () => {
  void it('is tested through its pooled process, which holds its port (a second process could not listen there)', async () => {
    const port = await freePort();
    const world = await startWorld({
      managed: (tenant) => [
        manifest(tenant, 'everything-http', {
          package: { name: '@modelcontextprotocol/server-everything' },
          args: ['streamableHttp'],
          transport: 'streamable-http',
          port,
          env: [{ name: 'PORT', value: String(port) }],
        }),
      ],
    });
    try {
      await ready(world, 'everything-http');
      const tested = (await world.request({ op: 'servers.test', id: 'everything-http' })) as {
        ok: boolean;
        error?: string;
        tools: { name: string }[];
      };
      assert.equal(tested.ok, true, tested.error);
      assert.ok(tested.tools.some((t) => t.name === 'echo'));
    } finally {
      await world.close();
    }
  });
});
