/**
 * API keys on two mcp-front replicas over real NATS (a nats-server of this test's own), in front of the
 * real gateway and governance and @modelcontextprotocol/server-everything: an admin creates a key on one
 * replica, a client uses it on the other; lists are filtered by the tenant's policy for the key's groups;
 * a revoked key is refused everywhere at once; every call is on the ledger stream under the key's subject.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger, heuristicToolLevel, ledgerEventSchema, streams, subjects } from '@punk/lib';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('auth-api-keys-test', 'silent');
const PUBLIC = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const REQUIRED_SCOPE = 'mcp';

/** Readers may use read-level tools only: the tenant's McpPolicy `test`. */
const policies = {
  test: {
    rules: [
      {
        name: 'readers-read-only',
        groups: ['readers'],
        sideEffectLevels: { min: 2 },
        decision: 'deny' as const,
        reason: 'readers may only read',
      },
    ],
  },
};

interface CreatedKey {
  key: string;
  id: string;
  name: string;
  tenant: string;
  scopes: string[];
  groups: string[];
  createdBy: string;
  warnings?: string[];
}

function api(base: string, token: string | undefined, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${base}/api/v1${path}`, {
    method,
    headers: {
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

async function createKey(base: string, token: string, body: Record<string, unknown>): Promise<CreatedKey> {
  const response = await api(base, token, 'POST', '/api-keys', body);
  assert.equal(response.status, 201, await response.clone().text());
  return (await response.json()) as CreatedKey;
}

async function connect(url: string, token: string, era: '2025-11-25' | '2026-07-28'): Promise<Client> {
  const client =
    era === '2026-07-28'
      ? new Client({ name: 'keys-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
      : new Client({ name: 'keys-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

async function listNames(client: Client): Promise<Array<{ name: string; inputSchema: { required?: string[] } }>> {
  const tools: Array<{ name: string; inputSchema: { required?: string[] } }> = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...(page.tools as typeof tools));
    cursor = page.nextCursor;
  } while (cursor);
  return tools;
}

/** A raw `initialize` with `token`. */
function initialize(base: string, token: string): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'keys-test', version: '1.0.0' } },
    }),
  });
}

describe('API keys on two replicas', () => {
  let replicas: ReplicaSet;

  before(async () => {
    const auth = { publicUrl: PUBLIC, bootstrapAdminKey: BOOTSTRAP, requiredScopes: [REQUIRED_SCOPE] };
    replicas = await startReplicaSet(log, {
      prefix: 'keys',
      servers: (tenant) => [everything('everything', tenant)],
      policies,
      frontOptions: () => ({ auth }),
    });
  });

  after(async () => {
    await replicas?.stop();
  });

  it('an admin creates a key on one replica; it is shown once, listed without secret on the other, and works there in both eras', async () => {
    const created = await createKey(replicas.a.base, BOOTSTRAP, { name: 'ci robot' });
    assert.match(created.key, /^pk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.tenant, replicas.tenant);
    assert.deepEqual(created.scopes, [REQUIRED_SCOPE], 'scopes default to the required ones');
    assert.equal(created.createdBy, 'bootstrap-admin');
    const listed = await api(replicas.b.base, BOOTSTRAP, 'GET', '/api-keys');
    assert.equal(listed.status, 200);
    const text = await listed.text();
    assert.ok(!text.includes(created.key.slice(20)), 'the list never shows a key');
    assert.ok(!text.includes('sha256'));
    const { apiKeys } = JSON.parse(text) as { apiKeys: Array<{ id: string; name: string }> };
    assert.ok(apiKeys.some((k) => k.id === created.id && k.name === 'ci robot'));

    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const client = await connect(`${replicas.b.base}/mcp`, created.key, era);
      try {
        const result = await client.callTool({ name: 'everything__echo', arguments: { message: `key ${era}` } });
        assert.match(JSON.stringify(result.content), new RegExp(`key ${era}`));
      } finally {
        await client.close();
      }
    }
    const events = (
      await replicas.core.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 })
    ).map((m) => ledgerEventSchema.parse(m.data));
    const called = events.filter(
      (e) => e.type === 'tool.called' && e.tenant === replicas.tenant && e.principal?.subject === `api-key:${created.id}`,
    );
    assert.equal(called.length, 2, 'both calls are on the ledger under the key subject');
  });

  it('an unknown query parameter is refused on every API key route, naming the accepted ones', async () => {
    for (const [method, path, accepted] of [
      ['GET', '/api-keys?tenat=team-a', 'accepted: tenant'],
      ['POST', '/api-keys?tenat=team-a', 'it accepts no query parameters'],
      ['DELETE', '/api-keys/some-id?tenat=team-a', 'it accepts no query parameters'],
    ] as const) {
      const response = await api(replicas.a.base, BOOTSTRAP, method, path, method === 'POST' ? { name: 'typo' } : undefined);
      assert.equal(response.status, 400, `${method} ${path}`);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      assert.equal(error.code, 'InvalidParameter');
      assert.equal(error.message, `unknown query parameter "tenat" of /api/v1${path.split('?')[0]!}; ${accepted}`);
    }
  });

  it('without a token, or without the admin scope, the admin API refuses: 401 and 403 insufficient_scope', async () => {
    const anonymous = await api(replicas.a.base, undefined, 'POST', '/api-keys', { name: 'x' });
    assert.equal(anonymous.status, 401);
    assert.match(
      anonymous.headers.get('www-authenticate') ?? '',
      /^Bearer resource_metadata="https:\/\/punk\.example\.test\/\.well-known\/oauth-protected-resource"/,
    );
    const user = await createKey(replicas.a.base, BOOTSTRAP, { name: 'a user' });
    for (const [method, path] of [
      ['POST', '/api-keys'],
      ['GET', '/api-keys'],
      ['DELETE', `/api-keys/${user.id}`],
    ] as const) {
      const response = await api(replicas.a.base, user.key, method, path, method === 'POST' ? { name: 'sneaky' } : undefined);
      assert.equal(response.status, 403, `${method} ${path}`);
      assert.match(response.headers.get('www-authenticate') ?? '', /error="insufficient_scope"/);
      assert.match(response.headers.get('www-authenticate') ?? '', /scope="punk:admin"/);
    }
    const bad = await api(replicas.a.base, BOOTSTRAP, 'POST', '/api-keys', { name: 'x', scopes: ['has space'] });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: { message: string } }).error.message, /scopes\.0/);
    // A body that is not what its Content-Encoding says is the client's error, not the admin API's.
    const garbled = await fetch(`${replicas.a.base}/api/v1/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: JSON.stringify({ name: 'x' }),
    });
    assert.equal(garbled.status, 400);
    assert.deepEqual(((await garbled.json()) as { error: unknown }).error, {
      code: 'InvalidRequest',
      message: 'the body does not match its Content-Encoding (incorrect header check)',
    });
  });

  it('an admin key made through the API administers keys; a key without the required scope cannot call MCP (403)', async () => {
    const admin = await createKey(replicas.a.base, BOOTSTRAP, { name: 'second admin', scopes: ['punk:admin'] });
    const made = await createKey(replicas.b.base, admin.key, { name: 'made by an admin key' });
    assert.equal(made.createdBy, `api-key:${admin.id}`);
    assert.equal(admin.warnings, undefined, 'a scope Punk defines passes without a word');
    // A misspelt punk: scope is kept, with a warning naming the scopes Punk defines; a deployment's own scope passes.
    const misspelt = await createKey(replicas.a.base, BOOTSTRAP, { name: 'typo', scopes: ['punk:admn', 'team:reports', REQUIRED_SCOPE] });
    assert.deepEqual(misspelt.scopes, ['punk:admn', 'team:reports', REQUIRED_SCOPE]);
    assert.deepEqual(misspelt.warnings, [
      'scope punk:admn is not one Punk defines (punk:admin, punk:platform-admin, mcp): the key has it as given, but it makes no admin',
    ]);
    const response = await initialize(replicas.a.base, admin.key);
    assert.equal(response.status, 403);
    assert.match(response.headers.get('www-authenticate') ?? '', /error="insufficient_scope", error_description="[^"]*mcp/);
  });

  it("a reader's lists leave out what the policy denies its groups, and calling such a tool anyway is an error", async () => {
    const reader = await createKey(replicas.a.base, BOOTSTRAP, { name: 'reader', groups: ['readers'] });
    const writer = await createKey(replicas.a.base, BOOTSTRAP, { name: 'writer' });
    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const readerClient = await connect(`${replicas.a.base}/mcp`, reader.key, era);
      const writerClient = await connect(`${replicas.b.base}/mcp`, writer.key, era);
      try {
        const readable = await listNames(readerClient);
        const all = await listNames(writerClient);
        assert.ok(readable.length > 0);
        for (const tool of readable)
          assert.ok(heuristicToolLevel(tool.name.replace(/^everything__/, '')) <= 1, `${era}: ${tool.name} is listed to a reader`);
        const hidden = all.filter((t) => !readable.some((r) => r.name === t.name));
        assert.ok(hidden.length > 0, `${era}: the policy hides something from readers`);
        const callable = hidden.find((t) => (t.inputSchema.required ?? []).length === 0);
        assert.ok(callable, `a hidden tool without required arguments: ${hidden.map((t) => t.name).join(', ')}`);
        const result = await readerClient.callTool({ name: callable.name, arguments: {} });
        assert.equal(result.isError, true);
        assert.match(JSON.stringify(result.content), /denied by policy rule test\/readers-read-only/);
      } finally {
        await readerClient.close();
        await writerClient.close();
      }
    }
  });

  it('a revoked key is refused on every replica at once; revoking an unknown id is 404', async () => {
    const key = await createKey(replicas.a.base, BOOTSTRAP, { name: 'short-lived' });
    assert.equal((await initialize(replicas.b.base, key.key)).status, 200);
    assert.equal((await api(replicas.a.base, BOOTSTRAP, 'DELETE', `/api-keys/${key.id}`)).status, 204);
    for (const replica of [replicas.a, replicas.b]) {
      const response = await initialize(replica.base, key.key);
      assert.equal(response.status, 401);
      assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    }
    const listed = (await (await api(replicas.b.base, BOOTSTRAP, 'GET', '/api-keys')).json()) as { apiKeys: Array<{ id: string }> };
    assert.ok(!listed.apiKeys.some((k) => k.id === key.id));
    const again = await api(replicas.b.base, BOOTSTRAP, 'DELETE', `/api-keys/${key.id}`);
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as { error: { code: string } }).error.code, 'ApiKeyNotFound');
  });

  it('a key of another tenant is refused with 403; a forged key with a known id is 401', async () => {
    const foreign = await createKey(replicas.a.base, BOOTSTRAP, { name: 'elsewhere', tenant: 'another-tenant' });
    const listed = (await (await api(replicas.a.base, BOOTSTRAP, 'GET', '/api-keys?tenant=another-tenant')).json()) as {
      apiKeys: Array<{ id: string }>;
    };
    assert.deepEqual(
      listed.apiKeys.map((k) => k.id),
      [foreign.id],
    );
    const response = await initialize(replicas.a.base, foreign.key);
    assert.equal(response.status, 403);
    assert.match(((await response.json()) as { error: { message: string } }).error.message, /for tenant another-tenant/);
    const forged = `pk_${foreign.id}_${randomBytes(32).toString('base64url')}`;
    assert.equal((await initialize(replicas.a.base, forged)).status, 401);
  });
});
