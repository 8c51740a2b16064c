/**
 * Authentication end to end: `punk up` with `PUNK_AUTH_MODE=on` behind a public https URL. The operator
 * creates an API key with the bootstrap admin key; the MCP Inspector CLI and the SDK clients of both eras
 * use it as a bearer token; the ledger records every call under the key's subject; revoking the key shuts
 * its clients out. Then the same in the distributed topology: two mcp-front processes behind the cluster's
 * proxy share the keys through NATS KV.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { startProxy, type Proxy } from '@punk/cli';
import { createLogger } from '@punk/lib';
import { connectClient, listAllTools, textOf } from './clients.js';
import { tallyWorld, type TallyWorld } from './distributed.js';
import { createApiKey, eventually, exampleManifests, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startService, type ServiceProcess } from './processes.js';

const exec = promisify(execFile);
const PUBLIC = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');

/** Creates an API key named `name` through the admin API at `base` with the bootstrap key. */
const createKey = (base: string, name: string) => createApiKey(base, BOOTSTRAP, { name });

/**
 * Who ran a tenant's completed runs of `tool`, once there are `count` of them (ledger API at `base`): the
 * `subject` of each run row of `GET /api/v1/runs`, and the principal subject of each `tool.called` event.
 * Asks as the bootstrap admin (`punk up` with authentication keeps the ledger API for admins).
 */
async function calledSubjects(base: string, tenant: string, tool: string, count: number): Promise<Array<string | undefined> | undefined> {
  return eventually(async () => {
    const admin = { headers: { authorization: `Bearer ${BOOTSTRAP}` } };
    const { runs } = (await (await fetch(`${base}/api/v1/runs?tenant=${tenant}&limit=50`, admin)).json()) as {
      runs: Array<{ runId: string; tool?: string; subject?: string; types: string[] }>;
    };
    const done = runs.filter((r) => r.tool === tool && r.types.includes('tool.completed'));
    if (done.length < count) return undefined;
    const details = await Promise.all(
      done.map(
        async (r) =>
          (await (await fetch(`${base}/api/v1/runs/${r.runId}?tenant=${tenant}`, admin)).json()) as {
            events: Array<{ type: string; principal?: { subject: string } }>;
          },
      ),
    );
    return [
      ...done.map((r) => r.subject),
      ...details.flatMap((d) => d.events.filter((e) => e.type === 'tool.called').map((e) => e.principal?.subject)),
    ];
  }, 20_000);
}

/** Runs the Inspector CLI's `tools/list` from e2e/, as docs/clients.md does, with `headers`. */
function inspectorToolsList(url: string, headers: string[]): Promise<{ stdout: string }> {
  const cli = join(repoRoot, 'node_modules/.bin/mcp-inspector-cli');
  return exec(cli, ['--cli', url, '--transport', 'http', '--method', 'tools/list', ...headers.flatMap((h) => ['--header', h])], {
    timeout: 60_000,
    cwd: join(repoRoot, 'e2e'),
  });
}

describe('punk up with authentication on', () => {
  let punk: RunningPunk;
  let dir: string;

  before(async () => {
    dir = await exampleManifests();
    punk = await startPunk({
      manifestDir: dir,
      env: { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: PUBLIC, PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP, PUNK_AUTH_REQUIRED_SCOPES: 'mcp' },
    });
  });
  after(async () => {
    const code = await punk?.stop();
    assert.equal(code, 0, `punk up should exit cleanly on SIGTERM:\n${punk?.output().slice(-2000)}`);
    await removeDir(dir);
  });

  test('an operator creates an API key; the Inspector CLI and SDK clients of both eras use it; the ledger names its subject; revoked, it is refused', async () => {
    const anonymous = await fetch(`${punk.baseUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(anonymous.status, 401);
    assert.equal(
      anonymous.headers.get('www-authenticate'),
      `Bearer resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp", scope="mcp"`,
    );
    const metadata = (await (await fetch(`${punk.baseUrl}/.well-known/oauth-protected-resource/mcp`)).json()) as { resource: string };
    assert.equal(metadata.resource, `${PUBLIC}/mcp`);

    const { key, id } = await createKey(punk.baseUrl, 'e2e laptop');

    const { stdout } = await inspectorToolsList(`${punk.baseUrl}/mcp`, [`Authorization: Bearer ${key}`]);
    const listed = JSON.parse(stdout) as { tools: Array<{ name: string }> };
    assert.ok(listed.tools.some((t) => t.name === 'everything__echo'));
    await assert.rejects(inspectorToolsList(`${punk.baseUrl}/mcp`, []), 'the Inspector CLI without the token fails');

    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era, { Authorization: `Bearer ${key}` });
      try {
        assert.ok((await listAllTools(client)).some((t) => t.name === 'memory__read_graph'));
        assert.match(
          textOf(await client.callTool({ name: 'everything__echo', arguments: { message: `authenticated ${era}` } })),
          new RegExp(`authenticated ${era}`),
        );
      } finally {
        await client.close();
      }
    }

    assert.deepEqual(
      await calledSubjects(punk.baseUrl, 'default', 'echo', 2),
      Array(4).fill(`api-key:${id}`),
      'both runs and their calls are on the ledger under the key',
    );
    for (const path of ['/api/v1/runs', '/api/v1/ledger/verify', '/api/v1/mcp/servers']) {
      const unauthenticated = await fetch(`${punk.baseUrl}${path}`);
      assert.equal(unauthenticated.status, 401, `${path} without a token`);
      assert.match(unauthenticated.headers.get('www-authenticate') ?? '', /^Bearer resource_metadata=/);
      const client = await fetch(`${punk.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(client.status, 403, `${path} with a client key, which lacks the admin scope`);
    }

    const revoked = await fetch(`${punk.baseUrl}/api/v1/api-keys/${id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${BOOTSTRAP}` },
    });
    assert.equal(revoked.status, 204);
    await assert.rejects(connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { Authorization: `Bearer ${key}` }));
  });

  test("a tenant admin reads only its tenant's runs and servers; the bootstrap key, a platform admin, reaches every tenant; the refusals are logged", async () => {
    const other = `other-${randomBytes(3).toString('hex')}`;
    const call = async (token: string, method: string, path: string, body?: unknown) => {
      const response = await fetch(`${punk.baseUrl}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, json: (text === '' ? undefined : JSON.parse(text)) as any };
    };
    // The platform admin stores a credential in another tenant: a run on that tenant's ledger.
    const planted = await call(BOOTSTRAP, 'POST', `/credentials?tenant=${other}`, { id: 'elsewhere', data: { value: 'x' } });
    assert.equal(planted.status, 201, JSON.stringify(planted.json));
    const admin = await call(BOOTSTRAP, 'POST', '/api-keys', { name: 'default admin', scopes: ['punk:admin'] });
    assert.equal(admin.status, 201);
    assert.equal(admin.json.tenant, 'default');
    const token = admin.json.key as string;
    const runId = await eventually(async () => {
      const { json } = await call(BOOTSTRAP, 'GET', `/runs?tenant=${other}`);
      return (json.runs as Array<{ runId: string }>)[0]?.runId;
    }, 20_000);
    assert.ok(runId, `a run in tenant ${other}`);

    // In its own tenant the tenant admin reads the ledger; without ?tenant= it reads its own tenant, never another.
    const runs = await call(token, 'GET', '/runs');
    assert.equal(runs.status, 200);
    assert.ok(!(runs.json.runs as Array<{ runId: string }>).some((r) => r.runId === runId));
    const verified = await call(token, 'GET', '/ledger/verify');
    assert.equal(verified.status, 200);
    assert.equal(verified.json.tenant, 'default');
    assert.equal((await call(token, 'GET', `/runs/${encodeURIComponent(runId)}`)).status, 404, 'one run is looked up in its tenant only');
    for (const path of ['/runs', `/runs/${encodeURIComponent(runId)}`, '/ledger/verify', '/mcp/servers', '/credentials', '/api-keys']) {
      const refused = await call(token, 'GET', `${path}?tenant=${other}`);
      assert.equal(refused.status, 403, path);
      assert.match(refused.json.error.message, new RegExp(`acting in tenant ${other} needs the scope punk:platform-admin`), path);
    }
    // The log is the child's stdout, read as it arrives: poll for the line rather than read it once.
    const refusal = new RegExp(`"subject":"api-key:${String(admin.json.id)}".*"msg":"admin request refused"`);
    assert.ok(await eventually(async () => (refusal.test(punk.output()) ? true : undefined)), 'the refusals are in the log');

    assert.equal((await call(BOOTSTRAP, 'GET', `/runs/${encodeURIComponent(runId)}?tenant=${other}`)).status, 200);
    assert.equal((await call(BOOTSTRAP, 'GET', `/ledger/verify?tenant=${other}`)).json.ok, true);
    assert.equal((await call(BOOTSTRAP, 'DELETE', `/credentials/elsewhere?tenant=${other}`)).status, 204);

    // A stdio server runs its command on Punk's host as Punk's user: a tenant admin may not register or change one
    // (found by a fresh-user trial: a tenant admin's `/bin/sh -c` ran as Punk and read its bootstrap key).
    const marker = join(tmpdir(), `punk-auth-stdio-${randomBytes(4).toString('hex')}`);
    const shell = { name: 'shell', type: 'stdio', command: ['/bin/sh', '-c', `touch ${marker}; sleep 30`] };
    const refusedStdio = await call(token, 'POST', '/mcp/servers', shell);
    assert.equal(refusedStdio.status, 403, JSON.stringify(refusedStdio.json));
    assert.match(
      refusedStdio.json.error.message,
      /a stdio server runs its command on Punk's host as Punk's own user: registering or changing one needs the scope punk:platform-admin \(a platform admin\); an admin of tenant default may register http and openapi servers/,
    );
    const echo = { name: 'echo', type: 'stdio', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] };
    assert.equal((await call(BOOTSTRAP, 'POST', '/mcp/servers', echo)).status, 201, 'a platform admin registers a stdio server');
    const changed = await call(token, 'PUT', '/mcp/servers/echo', {
      ...echo,
      args: ['-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, '')`],
    });
    assert.equal(changed.status, 403, 'nor changes one');
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(existsSync(marker), false, 'no command of the tenant admin ran');
    assert.equal((await call(BOOTSTRAP, 'DELETE', '/mcp/servers/echo')).status, 204);
    assert.equal((await call(BOOTSTRAP, 'DELETE', `/api-keys/${String(admin.json.id)}`)).status, 204);
  });

  test('authentication on without a public URL stops punk up with a message naming PUNK_PUBLIC_URL', async () => {
    await assert.rejects(
      startPunk({ manifestDir: dir, env: { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: '' } }),
      /PUNK_AUTH_MODE=on needs PUNK_PUBLIC_URL/,
    );
  });
});

describe('authentication in the distributed topology: two mcp-front processes behind the proxy', () => {
  let world: TallyWorld;
  let proxy: Proxy;
  let ledgerUrl: string;
  const running: ServiceProcess[] = [];
  const frontEnv = {
    PUNK_AUTH_MODE: 'on',
    PUNK_PUBLIC_URL: PUBLIC,
    PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
    PUNK_SESSION_SIGNING_KEY: randomBytes(32).toString('base64url'),
  };

  before(async () => {
    world = await tallyWorld();
    const { env } = world;
    running.push(...(await Promise.all([startService('governance', env), startService('ledger', env), startService('gateway', env)])));
    const ledger = running.find((s) => s.name === 'ledger')!;
    ledgerUrl = ledger.url;
    // As `punk cluster` does with authentication on: the unauthenticated ledger API stays internal, and the
    // fronts serve it to admins (PUNK_LEDGER_URL).
    const fronts = await Promise.all([
      startService('mcp-front', { ...env, ...frontEnv, PUNK_LEDGER_URL: ledgerUrl }),
      startService('mcp-front', { ...env, ...frontEnv, PUNK_LEDGER_URL: ledgerUrl }),
    ]);
    running.push(...fronts);
    proxy = await startProxy({
      host: '127.0.0.1',
      port: 0,
      backends: { ledgers: [ledger.url], fronts: fronts.map((f) => f.url) },
      log: createLogger('proxy', 'silent'),
      ledgerApi: 'fronts',
    });
  });

  after(async () => {
    await proxy?.close();
    await Promise.all(running.map((s) => s.stop()));
    await world?.setup.killServers();
    await world?.stop();
  });

  test('a key made through one front works through the other, both eras; the ledger names it; revoked on one, refused by both', async () => {
    const { key, id } = await createKey(proxy.url, 'cluster client');
    const listed = (await (await fetch(`${proxy.url}/api/v1/api-keys`, { headers: { authorization: `Bearer ${BOOTSTRAP}` } })).json()) as {
      apiKeys: Array<{ id: string }>;
    };
    assert.ok(
      listed.apiKeys.some((k) => k.id === id),
      'the other front lists it',
    );
    // The fronts serve the servers API too, for admins only.
    const servers = await fetch(`${proxy.url}/api/v1/mcp/servers?tenant=${world.setup.tenant}`, {
      headers: { authorization: `Bearer ${BOOTSTRAP}` },
    });
    assert.equal(servers.status, 200);
    assert.deepEqual(
      ((await servers.json()) as { servers: Array<{ name: string }> }).servers.map((s) => s.name),
      ['tally'],
    );
    assert.equal((await fetch(`${proxy.url}/api/v1/mcp/servers`, { headers: { authorization: `Bearer ${key}` } })).status, 403);
    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const client = await connectClient(`${proxy.url}/mcp`, era, { Authorization: `Bearer ${key}` });
      try {
        assert.match(textOf(await client.callTool({ name: 'tally__count', arguments: {} })), /counted/);
      } finally {
        await client.close();
      }
    }
    assert.deepEqual(await calledSubjects(ledgerUrl, world.setup.tenant, 'count', 2), Array(4).fill(`api-key:${id}`));
    // The ledger API through the proxy: a front lets admins through to a ledger, and refuses others.
    assert.deepEqual(await calledSubjects(proxy.url, world.setup.tenant, 'count', 2), Array(4).fill(`api-key:${id}`));
    const verified = await fetch(`${proxy.url}/api/v1/ledger/verify?tenant=${world.setup.tenant}`, {
      headers: { authorization: `Bearer ${BOOTSTRAP}` },
    });
    assert.equal(((await verified.json()) as { ok: boolean }).ok, true);
    assert.equal(
      (await fetch(`${proxy.url}/api/v1/runs?tenant=${world.setup.tenant}`, { headers: { authorization: `Bearer ${key}` } })).status,
      403,
    );
    assert.equal((await fetch(`${proxy.url}/api/v1/runs`)).status, 401);
    const metadata = (await (await fetch(`${proxy.url}/.well-known/oauth-protected-resource/servers/tally/mcp`)).json()) as {
      resource: string;
    };
    assert.equal(metadata.resource, `${PUBLIC}/servers/tally/mcp`);

    assert.equal(
      (await fetch(`${proxy.url}/api/v1/api-keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${BOOTSTRAP}` } })).status,
      204,
    );
    for (let i = 0; i < 2; i++) {
      const refused = await fetch(`${proxy.url}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'e2e', version: '1' } },
        }),
      });
      assert.equal(refused.status, 401, `request ${i + 1}, on each front in turn`);
    }
  });

  test('an mcp-front process with PUNK_AUTH_MODE=on and no PUNK_PUBLIC_URL exits at start naming it', async () => {
    const front = await startService(
      'mcp-front',
      { PUNK_NATS_URL: world.nats.url, PUNK_TENANT: world.setup.tenant, PUNK_AUTH_MODE: 'on' },
      { waitReady: false },
    );
    assert.equal(await front.exited, 2);
    assert.match(front.output(), /PUNK_AUTH_MODE=on needs PUNK_PUBLIC_URL/);
  });
});
