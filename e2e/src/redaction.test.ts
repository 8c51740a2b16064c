/**
 * The redaction tenant setting end to end. Under the real `punk up` (authentication on, Postgres): `GET` and `PUT
 * /api/v1/settings` for admins only (403 for a client key), 400 naming the known keys or the value's type, the change
 * audited (`settings.changed`); then a table of samples sent as `everything__echo` arguments, checked in the stored
 * ledger rows: emails, phone and card numbers and secret-shaped tokens masked, UUIDs, dates, versions, digests, short
 * numbers, ports and addresses left as they are; no raw value in any row, and the chain verifies. Over NATS with
 * real processes: the setting put through an mcp-front process (answered by either of two governance replicas)
 * applies in the gateway process, which appends the calls' events.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { connectClient } from './clients.js';
import { callTally, scratchDatabase, tallyWorld, testBus, type TallyWorld } from './distributed.js';
import { eventually, exampleManifests, removeDir, startPunk, type RunningPunk, createApiKey } from './harness.js';
import { startService, type ServiceProcess } from './processes.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');

/** Each sample and what the ledger must store for it: `[mask]` texts, or the sample itself. */
const MASKED: Array<[string, string]> = [
  ['alice@example.com', '[email]'],
  ['write to first.last+tag@sub.example.co.uk today', 'write to [email] today'],
  ['+1 415 555 0132', '[phone]'],
  ['call (415) 555-0132', 'call [phone]'],
  ['415-555-0132', '[phone]'],
  ['+44 20 7946 0958', '[phone]'],
  ['+49 30 901820', '[phone]'],
  ['4111 1111 1111 1111', '[card]'],
  ['card 4111-1111-1111-1111 exp 12/29', 'card [card] exp 12/29'],
  ['5500005555555559', '[card]'],
  ['378282246310005', '[card]'],
  ['eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U', '[secret]'],
  ['ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5', '[secret]'],
  ['token gho_16C7e42F292c6912E7710c838347Ae178B4a', 'token [secret]'],
  ['github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV', '[secret]'],
  ['xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx', '[secret]'],
  ['xoxp-1234567890-1234567890-abcdef123456', '[secret]'],
  ['AKIAIOSFODNN7EXAMPLE', '[secret]'],
  ['sk-proj-Ab3De5Fg7Hi9Jk1Lm3No5Pq7', '[secret]'],
  ['key sk-ant-api03-Zx8KqP2mW7vR4tN9bL3c', 'key [secret]'],
  ['-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----', '[secret]'],
  ['-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----', '[secret]'],
  ['Authorization: Bearer abc.def-123', 'Authorization: Bearer [secret]'],
  ['Zx8KqP2mW7vR4tN9bL3cH6jF1sD5gY0aUeQiOoTr', '[secret]'],
  ['api_key=Zx8KqP2mW7vR4tN9bL3cH6jF1sD5gY0aUeQiOoTr', 'api_key=[secret]'],
];
const KEPT: string[] = [
  'f47ac10b-58cc-4372-a567-0e02b2c3d479',
  '12345678-1234-5678-1234-567812345678',
  '2026-12-01',
  '2026-12-01T14:39:33.123Z',
  '2026-12-01T14:39:33+01:00',
  '1.2.3',
  'v2026.8.31',
  '10.4.0-beta.1',
  'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
  'aa4a2db3f1c9e8b7d6a5f4e3d2c1b0a9f8e7d6c5',
  '42',
  '3.14159',
  '1000000',
  '127.0.0.1:4100',
  '192.168.10.254',
  '2001:db8::8a2e:370:7334',
  'order 1234567',
  '4111 1111 1111 1112',
  'getUserProfileInformationHandler2',
  '/home/user/projects/punk/services/lib/src/index.ts',
  'https://example.com/docs/getting-started',
  '1764599973123',
  '@modelcontextprotocol/server-everything',
  'call 5 of 10 at 14:05',
  'user@localhost',
];

describe('redaction under punk up (authentication on, Postgres)', () => {
  let punk: RunningPunk;
  let dir: string;
  let db: { url: string; drop(): Promise<void> };
  let clientKey: string;
  let rows: pg.Client;
  const admin = { authorization: `Bearer ${BOOTSTRAP}` };
  const settings = (method: 'GET' | 'PUT', headers: Record<string, string>, body?: unknown) =>
    fetch(`${punk.baseUrl}/api/v1/settings`, {
      method,
      headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });

  before(async () => {
    db = await scratchDatabase();
    dir = await exampleManifests();
    punk = await startPunk({
      manifestDir: dir,
      args: [],
      env: {
        PUNK_AUTH_MODE: 'on',
        PUNK_PUBLIC_URL: 'https://punk.example.test',
        PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
        PUNK_DATABASE_URL: db.url,
      },
    });
    clientKey = (await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'agent' })).key;
    rows = new pg.Client({ connectionString: db.url });
    await rows.connect();
  });
  after(async () => {
    await rows?.end();
    await punk?.stop();
    await removeDir(dir);
    await db?.drop();
  });

  test('GET and PUT /api/v1/settings: admins only, 400 naming the known keys, audited', async () => {
    const initial = await settings('GET', admin);
    assert.equal(initial.status, 200);
    assert.deepEqual(await initial.json(), { settings: [{ key: 'redaction', value: false }] });
    assert.equal((await settings('GET', { authorization: `Bearer ${clientKey}` })).status, 403);
    assert.equal((await settings('PUT', { authorization: `Bearer ${clientKey}` }, { key: 'redaction', value: true })).status, 403);
    assert.equal((await settings('PUT', {}, { key: 'redaction', value: true })).status, 401);
    const unknown = await settings('PUT', admin, { key: 'redactions', value: true });
    assert.equal(unknown.status, 400);
    assert.deepEqual(await unknown.json(), {
      error: { code: 'InvalidSetting', message: 'key: unknown setting "redactions"; the settings are redaction' },
    });
    const wrongType = await settings('PUT', admin, { key: 'redaction', value: 'yes' });
    assert.equal(wrongType.status, 400);
    assert.match(((await wrongType.json()) as { error: { message: string } }).error.message, /^value: must be true or false/);

    const put = await settings('PUT', admin, { key: 'redaction', value: true });
    assert.equal(put.status, 200);
    const { setting } = (await put.json()) as { setting: { key: string; value: unknown; updatedBy: string; updatedAt: string } };
    assert.deepEqual([setting.key, setting.value, setting.updatedBy], ['redaction', true, 'bootstrap-admin']);
    const got = (await (await settings('GET', admin)).json()) as { settings: Array<{ value: unknown }> };
    assert.equal(got.settings[0]!.value, true);
    const audited = await eventually(async () => {
      const { rows: found } = await rows.query<{ data: unknown; principal: { subject: string } }>(
        "SELECT data, principal FROM ledger.events WHERE type = 'settings.changed'",
      );
      return found.length > 0 ? found : undefined;
    }, 30_000);
    assert.deepEqual(audited![0]!.data, { key: 'redaction', value: true, previous: false });
    assert.equal(audited![0]!.principal.subject, 'bootstrap-admin');
  });

  test(`${MASKED.length + KEPT.length} samples in tools/call arguments, checked in the stored ledger rows`, async () => {
    assert.ok(MASKED.length + KEPT.length >= 40);
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25', { Authorization: `Bearer ${clientKey}` });
    const samples = [...MASKED.map(([text]) => text), ...KEPT];
    try {
      for (const [i, text] of samples.entries())
        await client.callTool({ name: 'everything__echo', arguments: { message: `#${i}# ${text}` } });
    } finally {
      await client.close();
    }
    const stored = await eventually(async () => {
      const { rows: found } = await rows.query<{ data: { arguments: { message: string } } }>(
        "SELECT data FROM ledger.events WHERE type = 'tool.called' AND data->'arguments'->>'message' LIKE '#%'",
      );
      return found.length >= samples.length ? found.map((r) => r.data.arguments.message) : undefined;
    }, 60_000);
    assert.ok(stored, 'every call is on the ledger');
    const byIndex = new Map(stored.map((message) => [Number(/^#(\d+)#/.exec(message)![1]), message.replace(/^#\d+# /, '')]));
    const wrong: string[] = [];
    MASKED.forEach(([text, masked], i) => {
      if (byIndex.get(i) !== masked)
        wrong.push(`${JSON.stringify(text)} stored as ${JSON.stringify(byIndex.get(i))}, not ${JSON.stringify(masked)}`);
    });
    KEPT.forEach((text, j) => {
      const got = byIndex.get(MASKED.length + j);
      if (got !== text) wrong.push(`${JSON.stringify(text)} stored as ${JSON.stringify(got)}: it must be kept`);
    });
    assert.deepEqual(wrong, []);

    // No raw value anywhere in the table (results and errors too), and the chain covers what is stored.
    const { rows: all } = await rows.query<{ text: string }>('SELECT data::text AS text FROM ledger.events');
    const everything = all.map((r) => r.text).join('\n');
    for (const [text] of MASKED) {
      const raw = text.replace(/^(?:write to |call |card |token |key |Authorization: Bearer |api_key=)/, '').split(/\s+exp|\s+today/)[0]!;
      assert.ok(!everything.includes(JSON.stringify(raw).slice(1, -1)), `${raw} is in a stored row`);
    }
    const verified = (await (await fetch(`${punk.baseUrl}/api/v1/ledger/verify`, { headers: admin })).json()) as { ok: boolean };
    assert.equal(verified.ok, true);
  });
});

describe('redaction over NATS: set through one process, applied in another', () => {
  let world: TallyWorld;
  const running: ServiceProcess[] = [];

  before(async () => {
    world = await tallyWorld();
    for (const name of ['governance', 'governance', 'ledger', 'gateway', 'mcp-front'] as const)
      running.push(await startService(name, world.env));
  });
  after(async () => {
    for (const s of running.reverse()) await s.stop();
    await world?.stop();
  });

  test('a PUT through mcp-front, answered by a governance replica, masks what the gateway appends', async () => {
    const front = running.find((s) => s.name.startsWith('mcp-front'))!;
    const put = await fetch(`${front.url}/api/v1/settings?tenant=${world.setup.tenant}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'redaction', value: true }),
    });
    assert.equal(put.status, 200, await put.clone().text());
    const bus = await testBus(world.nats.url);
    const client = new pg.Client({ connectionString: world.db.url });
    await client.connect();
    try {
      await callTally(bus, world.setup.tenant, 'count', { n: 1, note: 'mail bob@example.org, key AKIAIOSFODNN7EXAMPLE' });
      const note = await eventually(async () => {
        const { rows } = await client.query<{ note: string }>(
          "SELECT data->'arguments'->>'note' AS note FROM ledger.events WHERE tenant = $1 AND type = 'tool.called'",
          [world.setup.tenant],
        );
        return rows[0]?.note;
      }, 60_000);
      assert.equal(note, 'mail [email], key [secret]');
    } finally {
      await client.end();
      await bus.close();
    }
  });
});
