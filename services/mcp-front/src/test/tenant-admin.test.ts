/**
 * Tenant admins and platform admins, through two real fronts (tenants `home-…` and `victim-…`, authentication
 * on, one bootstrap key) in front of the real gateway (scratch Postgres, a credentials key) and governance on a
 * MemoryBus. An admin key of `home` administers `home` only: every read, write, key minting and revocation that
 * reaches into `victim` (by `?tenant=`, a body's `tenant`, the key to revoke, or `victim`'s own front) is a 403
 * naming the tenant and the platform admin scope, and leaves `victim` as it was. A key with the platform admin
 * scope acts in both.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { destinationPolicyOf, Keyring, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, streams, type LedgerEvent } from '@punk/lib';
import { listen } from './listen.js';
import { createFront, type Front } from '../index.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';

const log = createLogger('tenant-admin-test', 'silent');
const BOOTSTRAP = randomBytes(24).toString('base64url');
const PLATFORM_SCOPE = 'punk:platform-admin';

interface Answer {
  status: number;
  json: any;
  headers: Headers;
}

/** A request to `/api/v1<path>` with `token`; `body` is sent as JSON. */
async function api(base: string, token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text), headers: response.headers };
}

/** A raw 2025-11-25 `initialize` on `<base>/mcp` with `token`. */
function initialize(base: string, token: string): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tenant-admin-test', version: '1.0.0' } },
    }),
  });
}

describe('tenant admins and platform admins', () => {
  const home = `home-${randomBytes(4).toString('hex')}`;
  const victim = `victim-${randomBytes(4).toString('hex')}`;
  let bus: MemoryBus;
  let database: ScratchDb;
  let workDir: string;
  let governance: GovernanceService;
  let gateway: Gateway;
  const fronts: Array<{ front: Front; http: HttpServer; base: string }> = [];
  let homeBase: string;
  let victimBase: string;
  const events: LedgerEvent[] = [];
  /** Keys minted in `before`: a tenant admin of `home`, a platform admin (of `home`), an admin of `victim`. */
  const keys = {} as Record<'tenantAdmin' | 'platform' | 'victimAdmin', { key: string; id: string }>;
  const crown = { name: 'crown', type: 'http', url: 'http://127.0.0.1:9/mcp' };
  /** The victim's credentials as its admin listed them after making them. */
  let victimCredentials: unknown;

  /** Asserts a 403 refusal of a cross-tenant request: the code, and a message and challenge naming `tenant` and the platform admin scope. */
  function assertCrossTenant(answer: Answer, tenant: string, what: string): void {
    assert.equal(answer.status, 403, `${what}: ${JSON.stringify(answer.json)}`);
    assert.equal(answer.json.error.code, 'Forbidden', what);
    assert.match(answer.json.error.message, new RegExp(`tenant ${tenant}\\b`), what);
    assert.match(answer.json.error.message, new RegExp(PLATFORM_SCOPE), what);
    assert.match(answer.headers.get('www-authenticate') ?? '', new RegExp(`error="insufficient_scope"`), what);
    assert.match(answer.headers.get('www-authenticate') ?? '', new RegExp(`scope="${PLATFORM_SCOPE}"`), what);
  }

  before(async () => {
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    await bus.consume(streams.ledger.name, 'test-reader', async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)));
    database = await openScratchDb(log);
    workDir = await mkdtemp(join(tmpdir(), 'punk-tenant-admin-'));
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
      keyring: Keyring.fromConfig({ encryptionKey: `tenants:${randomBytes(32).toString('base64')}`, encryptionPreviousKeys: [] }),
    });
    for (const tenant of [home, victim]) {
      const front = await createFront({
        bus,
        log,
        tenant,
        maxBodyBytes: 64 * 1024,
        callTimeoutMs: 30_000,
        auth: { publicUrl: 'https://punk.example.test', bootstrapAdminKey: BOOTSTRAP },
      });
      fronts.push({ front, ...(await listen(front)) });
    }
    [homeBase, victimBase] = fronts.map((f) => f.base) as [string, string];

    const mint = async (body: Record<string, unknown>) => {
      const created = await api(homeBase, BOOTSTRAP, 'POST', '/api-keys', body);
      assert.equal(created.status, 201, JSON.stringify(created.json));
      return created.json as { key: string; id: string };
    };
    keys.tenantAdmin = await mint({ name: 'home admin', scopes: ['punk:admin'] });
    keys.platform = await mint({ name: 'platform team', scopes: [PLATFORM_SCOPE] });
    keys.victimAdmin = await mint({ name: 'victim admin', tenant: victim, scopes: ['punk:admin'] });
    // What the victim tenant holds: a server and a credential, made on its own front by its own admin.
    assert.equal((await api(victimBase, keys.victimAdmin.key, 'POST', '/mcp/servers', crown)).status, 201);
    const jewels = await api(victimBase, keys.victimAdmin.key, 'POST', '/credentials', { id: 'jewels', data: { value: 'S3CR3T-jewels' } });
    assert.equal(jewels.status, 201, JSON.stringify(jewels.json));
    victimCredentials = (await api(victimBase, keys.victimAdmin.key, 'GET', '/credentials')).json;
  });

  after(async () => {
    for (const stack of fronts) {
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

  it('a tenant admin administers its own tenant: servers, credentials, and keys of its tenant', async () => {
    const token = keys.tenantAdmin.key;
    const created = await api(homeBase, token, 'POST', '/mcp/servers', { ...crown, name: 'home-server' });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.equal(created.json.server.namespace, home);
    for (const path of ['/mcp/servers', `/mcp/servers?tenant=${home}`]) {
      const listed = await api(homeBase, token, 'GET', path);
      assert.equal(listed.status, 200, path);
      assert.deepEqual(
        listed.json.servers.map((s: { name: string }) => s.name),
        ['home-server'],
        path,
      );
    }
    assert.equal((await api(homeBase, token, 'POST', '/credentials', { id: 'home-cred', data: { value: 'x' } })).status, 201);
    assert.equal((await api(homeBase, token, 'DELETE', '/credentials/home-cred')).status, 204);
    assert.equal((await api(homeBase, token, 'DELETE', '/mcp/servers/home-server')).status, 204);

    // Keys: a tenant admin may make another tenant admin of its tenant, list its tenant's keys and revoke them.
    const deputy = await api(homeBase, token, 'POST', '/api-keys', { name: 'deputy', scopes: ['punk:admin'] });
    assert.equal(deputy.status, 201, JSON.stringify(deputy.json));
    assert.equal(deputy.json.tenant, home);
    assert.equal(deputy.json.createdBy, `api-key:${keys.tenantAdmin.id}`);
    const listed = await api(homeBase, token, 'GET', '/api-keys');
    assert.equal(listed.status, 200);
    const tenants = new Set(listed.json.apiKeys.map((k: { tenant: string }) => k.tenant));
    assert.deepEqual([...tenants], [home], 'a tenant admin lists only its tenant’s keys');
    assert.ok(listed.json.apiKeys.some((k: { id: string }) => k.id === deputy.json.id));
    assert.equal((await api(homeBase, token, 'DELETE', `/api-keys/${String(deputy.json.id)}`)).status, 204);
  });

  it('a tenant admin cannot read another tenant: servers, tools, credentials, keys', async () => {
    for (const path of [
      '/mcp/servers',
      '/mcp/servers/crown',
      '/mcp/servers/crown/tools',
      '/credentials',
      '/credentials/jewels',
      '/api-keys',
    ]) {
      const answer = await api(homeBase, keys.tenantAdmin.key, 'GET', `${path}?tenant=${victim}`);
      assertCrossTenant(answer, victim, `GET ${path}`);
      assert.doesNotMatch(JSON.stringify(answer.json), /crown|jewels|S3CR3T/, `GET ${path} shows nothing of the tenant`);
    }
  });

  it('a tenant admin cannot write to another tenant; the tenant is left as it was and no change is on the ledger', async () => {
    const token = keys.tenantAdmin.key;
    const planted = { ...crown, url: 'http://127.0.0.1:9/planted' };
    for (const [method, path, body] of [
      ['POST', '/mcp/servers', { ...planted, name: 'planted' }],
      ['PUT', '/mcp/servers/crown', planted],
      ['DELETE', '/mcp/servers/crown', undefined],
      ['POST', '/mcp/servers/crown/test', undefined],
      ['POST', '/mcp/servers/crown/tools/echo/accept', { fingerprint: 'sha256:0' }],
      ['POST', '/credentials', { id: 'planted', data: { value: 'x' } }],
      ['PUT', '/credentials/jewels', { id: 'jewels', data: { value: 'replaced' } }],
      ['DELETE', '/credentials/jewels', undefined],
    ] as const) {
      assertCrossTenant(await api(homeBase, token, method, `${path}?tenant=${victim}`, body), victim, `${method} ${path}`);
    }
    const servers = await api(victimBase, keys.victimAdmin.key, 'GET', '/mcp/servers');
    assert.deepEqual(
      servers.json.servers.map((s: { name: string; registration: { url: string } }) => [s.name, s.registration.url]),
      [['crown', crown.url]],
    );
    assert.deepEqual((await api(victimBase, keys.victimAdmin.key, 'GET', '/credentials')).json, victimCredentials);
    const byTenantAdmin = events.filter((e) => e.tenant === victim && e.principal?.subject === `api-key:${keys.tenantAdmin.id}`);
    assert.deepEqual(byTenantAdmin, [], 'nothing the tenant admin tried in the other tenant happened');
  });

  it('a tenant admin mints no key of another tenant and no platform key, revokes no key of another tenant, and its key is refused at the other tenant’s front', async () => {
    const token = keys.tenantAdmin.key;
    assertCrossTenant(
      await api(homeBase, token, 'POST', '/api-keys', { name: 'mole', tenant: victim, scopes: ['punk:admin'] }),
      victim,
      'mint',
    );
    for (const scopes of [[PLATFORM_SCOPE], ['mcp', PLATFORM_SCOPE]]) {
      const answer = await api(homeBase, token, 'POST', '/api-keys', { name: 'escalation', scopes });
      assert.equal(answer.status, 403, JSON.stringify(answer.json));
      assert.match(answer.json.error.message, new RegExp(`only a platform admin \\(scope ${PLATFORM_SCOPE}\\)`));
      assert.match(answer.json.error.message, new RegExp(`tenant ${home}`));
    }
    assertCrossTenant(await api(homeBase, token, 'DELETE', `/api-keys/${keys.victimAdmin.id}`), victim, 'revoke');

    const platformList = await api(homeBase, keys.platform.key, 'GET', '/api-keys');
    const names = platformList.json.apiKeys.map((k: { name: string }) => k.name);
    assert.ok(!names.includes('mole') && !names.includes('escalation'), `no key was made: ${names.join(', ')}`);
    assert.equal((await api(victimBase, keys.victimAdmin.key, 'GET', '/mcp/servers')).status, 200, 'the victim’s key still works');

    // On the other tenant's own front the key is not even a caller.
    const there = await api(victimBase, token, 'GET', '/mcp/servers');
    assert.equal(there.status, 403);
    assert.match(there.json.error.message, new RegExp(`the API key is for tenant ${home}, not ${victim}.*${PLATFORM_SCOPE}`));
    const mcp = await initialize(victimBase, token);
    assert.equal(mcp.status, 403);
    assert.match(((await mcp.json()) as { error: { message: string } }).error.message, new RegExp(`for tenant ${home}, not ${victim}`));
  });

  it('a platform admin acts in every tenant: reads and writes there, mints keys there and platform keys, and calls its front', async () => {
    const token = keys.platform.key;
    const servers = await api(homeBase, token, 'GET', `/mcp/servers?tenant=${victim}`);
    assert.equal(servers.status, 200);
    assert.deepEqual(
      servers.json.servers.map((s: { name: string }) => s.name),
      ['crown'],
    );
    assert.equal((await api(homeBase, token, 'GET', `/credentials/jewels?tenant=${victim}`)).status, 200);
    const made = await api(homeBase, token, 'POST', `/mcp/servers?tenant=${victim}`, { ...crown, name: 'by-platform' });
    assert.equal(made.status, 201, JSON.stringify(made.json));
    assert.equal(made.json.server.namespace, victim);
    assert.equal((await api(homeBase, token, 'DELETE', `/mcp/servers/by-platform?tenant=${victim}`)).status, 204);

    const there = await api(homeBase, token, 'POST', '/api-keys', { name: 'victim robot', tenant: victim });
    assert.equal(there.status, 201, JSON.stringify(there.json));
    assert.equal(there.json.tenant, victim);
    const platform = await api(homeBase, token, 'POST', '/api-keys', { name: 'second platform admin', scopes: [PLATFORM_SCOPE] });
    assert.equal(platform.status, 201, JSON.stringify(platform.json));
    const all = await api(homeBase, token, 'GET', '/api-keys');
    assert.deepEqual(new Set(all.json.apiKeys.map((k: { tenant: string }) => k.tenant)), new Set([home, victim]), 'every tenant’s keys');
    assert.equal((await api(homeBase, token, 'DELETE', `/api-keys/${String(there.json.id)}`)).status, 204);
    assert.equal((await api(homeBase, token, 'DELETE', `/api-keys/${String(platform.json.id)}`)).status, 204);

    // Its key is a caller on the other tenant's front too, in that tenant.
    assert.equal((await initialize(victimBase, token)).status, 200);
    const onVictim = await api(victimBase, token, 'GET', '/mcp/servers');
    assert.deepEqual(
      onVictim.json.servers.map((s: { name: string }) => s.name),
      ['crown'],
    );
  });
});
