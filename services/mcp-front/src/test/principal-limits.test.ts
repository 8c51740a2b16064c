/**
 * The bounds per principal on fronts over real NATS, the gateway, governance and
 * @modelcontextprotocol/server-everything, driven by the SDK's v2 client with API keys. 2026-07-28
 * `subscriptions/listen` streams: one key holding its share is refused with HTTP 429 and `Retry-After` while another
 * key and the admin still get in; the replica's ceiling holds for everyone; and a slot is free the moment its stream
 * closes (the keep-alive interval is far longer than the test waits, so nothing but the close can free it). 2025-era
 * sessions: one key holding its share is refused on either replica while another key starts one, and a session it
 * ends frees its place at once.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger } from '@punk/lib';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('principal-limits-test', 'silent');
const BOOTSTRAP = randomBytes(24).toString('base64url');

/** What the front answered to the listen requests of one client. */
interface Refusal {
  status: number;
  retryAfter: string | null;
  body: { error?: { code: number; message: string; data?: { retryAfterSeconds?: number } } };
}

/** A 2026-07-28 client with `token` that records every refused listen request. */
async function connect(base: string, token: string): Promise<{ client: Client; refusals: Refusal[] }> {
  const refusals: Refusal[] = [];
  const recording = async (input: string | URL | Request, init?: RequestInit) => {
    const response = await fetch(input, init);
    if (String(init?.body ?? '').includes('subscriptions/listen') && response.status !== 200) {
      refusals.push({
        status: response.status,
        retryAfter: response.headers.get('retry-after'),
        body: (await response.clone().json()) as Refusal['body'],
      });
    }
    return response;
  };
  const client = new Client({ name: 'listen-limits-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      fetch: recording,
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return { client, refusals };
}

async function createKey(base: string, name: string): Promise<string> {
  const response = await fetch(`${base}/api/v1/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  assert.equal(response.status, 201, await response.clone().text());
  return ((await response.json()) as { key: string }).key;
}

describe('bounds per principal', () => {
  let replicas: ReplicaSet;

  before(async () => {
    replicas = await startReplicaSet(log, {
      prefix: 'principal-limits',
      servers: (tenant) => [everything('everything', tenant)],
      frontOptions: () => ({
        auth: { publicUrl: 'https://punk.example.test', bootstrapAdminKey: BOOTSTRAP },
        maxListenStreams: 5,
        maxListenStreamsPerPrincipal: 3,
        maxSessionsPerPrincipal: 2,
        keepAliveMs: 600_000,
      }),
    });
  });

  after(async () => {
    await replicas?.stop();
  });

  it('one key at its share is refused with 429 and Retry-After; another key and the admin still listen; a closed stream frees its slot at once', async () => {
    const base = replicas.a.base;
    const holder = await connect(base, await createKey(base, 'holder'));
    const other = await connect(base, await createKey(base, 'other'));
    const admin = await connect(base, BOOTSTRAP);
    try {
      const held = [];
      for (let i = 0; i < 3; i++) held.push(await holder.client.listen({ toolsListChanged: true }));
      await assert.rejects(holder.client.listen({ toolsListChanged: true }));
      assert.equal(holder.refusals.length, 1);
      const [refused] = holder.refusals;
      assert.equal(refused!.status, 429);
      assert.equal(refused!.retryAfter, '5');
      assert.equal(refused!.body.error?.code, -32000);
      assert.equal(refused!.body.error?.data?.retryAfterSeconds, 5);
      assert.match(refused!.body.error!.message, /already holds 3 subscriptions\/listen streams .*PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL=3/);

      // Another principal, and the admin, are not denied by the holder's streams.
      const others = await other.client.listen({ toolsListChanged: true });
      const admins = await admin.client.listen({ toolsListChanged: true });
      // Five are open: the replica's ceiling now refuses everyone.
      await assert.rejects(other.client.listen({ toolsListChanged: true }));
      assert.equal(other.refusals[0]?.status, 429);
      assert.match(
        other.refusals[0]!.body.error!.message,
        /5 subscriptions\/listen streams are open on this replica, its limit \(PUNK_MAX_LISTEN_STREAMS=5\)/,
      );

      // The holder closes one stream: its slot is free at once (no keep-alive write will come to notice it).
      await held.pop()!.close();
      let again;
      for (let attempt = 0; attempt < 100 && !again; attempt++) {
        again = await other.client.listen({ toolsListChanged: true }).catch(() => undefined);
        if (!again) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(again, 'a slot freed by a closed stream is taken by another principal');
      for (const subscription of [...held, others, admins, again]) await subscription.close();
    } finally {
      await Promise.all([holder.client.close(), other.client.close(), admin.client.close()]);
    }
  });

  it('one key at its share of sessions is refused with 429 on either replica; another key starts one; an ended session frees its place at once', async () => {
    const holderKey = await createKey(replicas.a.base, 'session holder');
    const otherKey = await createKey(replicas.a.base, 'session other');
    const sessions: Array<{ client: Client; transport: StreamableHTTPClientTransport }> = [];
    const start = async (base: string, token: string) => {
      const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });
      const client = new Client({ name: 'principal-limits-test', version: '1.0.0' });
      await client.connect(transport);
      sessions.push({ client, transport });
      return { client, transport };
    };
    const initialize = (base: string, token: string) =>
      fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'principal-limits-test', version: '1.0.0' } },
        }),
      });
    try {
      const first = await start(replicas.a.base, holderKey);
      await start(replicas.b.base, holderKey);
      const refused = await initialize(replicas.b.base, holderKey);
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      const body = (await refused.json()) as { error: { code: number; message: string; data: { retryAfterSeconds: number } } };
      assert.equal(body.error.code, -32000);
      assert.match(body.error.message, /already holds 2 sessions, its limit \(PUNK_MAX_SESSIONS_PER_PRINCIPAL=2\)/);
      assert.equal(String(body.error.data.retryAfterSeconds), refused.headers.get('retry-after'));

      const other = await start(replicas.a.base, otherKey);
      assert.ok((await other.client.listTools()).tools.length > 0, 'another key is not refused for the holder');

      // The holder ends a session (DELETE): its place is free at once.
      await first.transport.terminateSession();
      const again = await initialize(replicas.a.base, holderKey);
      assert.equal(again.status, 200, await again.clone().text());
    } finally {
      await Promise.all(sessions.map(({ client }) => client.close()));
    }
  });
});
