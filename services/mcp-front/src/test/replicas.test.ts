/**
 * Two mcp-front replicas on real NATS with JetStream (a nats-server of this
 * test's own, on a free port), in front of the real gateway and governance
 * and @modelcontextprotocol/server-everything: a 2025-era session is served
 * by whichever replica a request reaches, its GET stream by whichever
 * replica holds it, and 2026-era listen streams hear changes published
 * anywhere.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { anonymousPrincipal, createLogger, mcpServerSchema, subjects } from '@punk/lib';
import type { FrontOptions } from '../index.js';
import { LIST_CHANGED_COALESCE_MS } from '../fan-out.js';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('mcp-front-replicas-test', 'silent');
const clientInfo = { name: 'replicas-test', version: '1.0.0' };
const V2025 = '2025-11-25';
const V2026 = '2026-07-28';
/** The `PUNK_SESSION_SIGNING_KEY` both replicas share. */
const SIGNING_KEY = randomBytes(32).toString('base64url');

/** fixtures/legacy-asking.mjs over stdio as McpServer `asking`: its tool `ask` elicits a name, then reports progress. */
function legacyAsking(namespace: string) {
  return mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name: 'asking', namespace },
    spec: {
      image: 'local/legacy-asking',
      command: [process.execPath, fileURLToPath(new URL('../../src/test/fixtures/legacy-asking.mjs', import.meta.url))],
    },
  });
}

/** Fronts whose caller is named by the `x-test-principal` header; both replicas share the signing key. */
function testFrontOptions(tenant: string): Partial<FrontOptions> {
  return {
    principalOf: (req) => ({ ...anonymousPrincipal(tenant), subject: String(req.headers['x-test-principal'] ?? 'anonymous') }),
    sessionSigningKey: SIGNING_KEY,
  };
}

/** A fetch that sends consecutive requests to the replicas in turn. */
function alternating(bases: string[]): typeof fetch {
  let next = 0;
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const base = new URL(bases[next++ % bases.length]!);
    url.host = base.host;
    return fetch(url, init);
  };
}

function post(base: string, message: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V2025,
      ...headers,
    },
    body: JSON.stringify(message),
  });
}

/** Starts a session with raw HTTP on `base`; resolves with its id. */
async function initialize(base: string, headers: Record<string, string> = {}): Promise<string> {
  const init = await post(
    base,
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: V2025, capabilities: {}, clientInfo } },
    headers,
  );
  assert.equal(init.status, 200);
  const id = init.headers.get('mcp-session-id');
  assert.ok(id, 'initialize answers with Mcp-Session-Id');
  await init.text();
  const initialized = await post(base, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': id, ...headers });
  assert.equal(initialized.status, 202);
  return id;
}

interface SseEvent {
  id?: string;
  retry?: number;
  data: string;
}

/** An open GET stream, its events as they arrive. */
interface GetStream {
  status: number;
  events: SseEvent[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  abort(): void;
  /** Waits until `count` events match. */
  waitFor(predicate: (e: SseEvent) => boolean, count: number, timeoutMs?: number): Promise<SseEvent[]>;
}

async function openGet(base: string, sessionId: string, lastEventId?: string): Promise<GetStream> {
  const controller = new AbortController();
  const response = await fetch(`${base}/mcp`, {
    headers: {
      accept: 'text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': V2025,
      ...(lastEventId && { 'last-event-id': lastEventId }),
    },
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  const ended = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event: SseEvent = { data: '' };
          for (const line of block.split('\n')) {
            if (line.startsWith('id: ')) event.id = line.slice(4);
            else if (line.startsWith('retry: ')) event.retry = Number(line.slice(7));
            else if (line.startsWith('data: ')) event.data += line.slice(6);
          }
          if (block.startsWith(':')) continue;
          events.push(event);
        }
      }
    } catch {
      // aborted by the test
    }
  })();
  return {
    status: response.status,
    events,
    ended,
    abort: () => controller.abort(),
    async waitFor(predicate, count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const found = events.filter(predicate);
        if (found.length >= count) return found;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`expected ${count} matching events within ${timeoutMs} ms; got ${JSON.stringify(events)}`);
    },
  };
}

const toolsChanged = (e: SseEvent) => e.data.includes('notifications/tools/list_changed');

describe('two mcp-front replicas on NATS', { timeout: 240_000 }, () => {
  let replicas: ReplicaSet;

  before(async () => {
    replicas = await startReplicaSet(log, {
      prefix: 'replicas',
      servers: (tenant) => [everything('everything', tenant), legacyAsking(tenant)],
      frontOptions: testFrontOptions,
    });
  });

  after(async () => {
    await replicas?.stop();
  });

  const announceChange = () =>
    replicas.core.publish(subjects.registryChanged, { tenant: replicas.tenant, server: 'everything', change: 'updated' });

  it('a 2025-11-25 client whose requests alternate between replicas works through to DELETE, then both answer 404', async () => {
    const seen: string[] = [];
    const fetchBoth = alternating([replicas.a.base, replicas.b.base]);
    const transport = new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), {
      fetch: (input, init) => {
        seen.push(String(init?.method ?? 'GET'));
        return fetchBoth(input, init);
      },
    });
    const client = new Client(clientInfo);
    await client.connect(transport);
    const sessionId = transport.sessionId!;
    assert.ok(sessionId, 'the client holds the session id Punk minted');
    assert.equal(client.getServerVersion()?.name, 'punk');
    const tools = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(tools.includes('everything__echo'), tools.join(', '));
    for (let i = 0; i < 4; i++) {
      const result = await client.callTool({ name: 'everything__echo', arguments: { message: `hop ${i}` } });
      assert.deepEqual(result.content, [{ type: 'text', text: `Echo: hop ${i}` }]);
    }
    await client.setLoggingLevel('warning');
    assert.ok(seen.filter((m) => m === 'POST').length >= 7, 'every request went over HTTP, alternating');
    await transport.terminateSession();
    await client.close();
    for (const base of [replicas.a.base, replicas.b.base]) {
      const answer = await post(base, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, { 'mcp-session-id': sessionId });
      assert.equal(answer.status, 404, base);
      assert.equal(((await answer.json()) as { error: { code: number } }).error.code, -32001);
    }
  });

  it('a 2025-11-25 client calling a long-running tool through alternating replicas gets its progress on the POST stream', async () => {
    const client = new Client(clientInfo);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), { fetch: alternating([replicas.a.base, replicas.b.base]) }),
    );
    try {
      const progress: { progress: number; total?: number }[] = [];
      const result = await client.callTool(
        { name: 'everything__trigger-long-running-operation', arguments: { duration: 0.6, steps: 3 } },
        { onprogress: (p) => progress.push(p) },
      );
      assert.match(JSON.stringify(result.content), /Long running operation completed/);
      assert.deepEqual(
        progress.map((p) => [p.progress, p.total]),
        [
          [1, 3],
          [2, 3],
          [3, 3],
        ],
      );
    } finally {
      await client.close();
    }
  });

  it('a 2025-11-25 client answers an upstream elicitation on the POST stream of replica A; its answer, posted to B, completes the call', async () => {
    // Calls go to A; the client's answers (POSTs of a JSON-RPC result) go to B.
    const answeredOn: string[] = [];
    const split: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const answer = init?.method === 'POST' && String(init.body).includes('"result"');
      if (answer) answeredOn.push(replicas.b.base);
      url.host = new URL(answer ? replicas.b.base : replicas.a.base).host;
      return fetch(url, init);
    };
    const posts: string[] = [];
    const client = new Client(clientInfo, { capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(request.params.message);
      return { action: 'accept', content: { name: 'Ada Lovelace', check: true, email: 'ada@example.com' } };
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), {
        fetch: (input, init) => {
          if (init?.method === 'POST') posts.push(String(init.body));
          return split(input, init);
        },
      }),
    );
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      assert.ok(tools.includes('everything__trigger-elicitation-request'), tools.join(', '));
      const result = await client.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} });
      assert.equal(asked.length, 1, 'the client was asked once');
      assert.match(JSON.stringify(result.content), /Ada Lovelace/);
      assert.ok(
        posts.some((p) => p.includes('"result"') && p.includes('Ada Lovelace')),
        'the answer went back as a POST',
      );
      assert.deepEqual(answeredOn, [replicas.b.base], 'to the replica that did not serve the call');
    } finally {
      await client.close();
    }
  });

  it('an upstream elicitation to a 2025-11-25 client that did not declare elicitation is refused upstream, and the call ends', async () => {
    const client = new Client(clientInfo);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.b.base}/mcp`), { fetch: alternating([replicas.b.base, replicas.a.base]) }),
    );
    try {
      const result = await client.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} });
      assert.equal(result.isError, true, JSON.stringify(result));
      assert.match(JSON.stringify(result.content), /did not declare the capability/);
    } finally {
      await client.close();
    }
  });

  it('a 2025-11-25 client subscribes to a resource through one replica and hears its update on the GET stream held by another', async () => {
    const client = new Client(clientInfo);
    const updated: string[] = [];
    client.setNotificationHandler('notifications/resources/updated', (notification) => void updated.push(notification.params.uri));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), { fetch: alternating([replicas.a.base, replicas.b.base]) }),
    );
    try {
      assert.equal(client.getServerCapabilities()?.resources?.subscribe, true, 'subscribe is advertised: the upstream supports it');
      const uri = (await client.listResources()).resources[0]!.uri;
      await client.subscribeResource({ uri });
      await new Promise((resolve) => setTimeout(resolve, 300)); // the SDK's GET stream is open by now
      await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} });
      const deadline = Date.now() + 10_000;
      while (!updated.includes(uri) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      assert.ok(updated.includes(uri), `notifications/resources/updated for ${uri} arrived (got ${JSON.stringify(updated)})`);
      await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} });
      await client.unsubscribeResource({ uri });
    } finally {
      await client.close();
    }
  });

  it('a session is bound to its principal: another principal gets 404, a missing id 400', async () => {
    const sessionId = await initialize(replicas.a.base, { 'x-test-principal': 'alice' });
    const mine = await post(
      replicas.b.base,
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { 'mcp-session-id': sessionId, 'x-test-principal': 'alice' },
    );
    assert.equal(mine.status, 200);
    await mine.text();
    const theirs = await post(
      replicas.b.base,
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      { 'mcp-session-id': sessionId, 'x-test-principal': 'mallory' },
    );
    assert.equal(theirs.status, 404);
    const none = await post(replicas.a.base, { jsonrpc: '2.0', id: 4, method: 'tools/list' });
    assert.equal(none.status, 400);
    const gone = await fetch(`${replicas.b.base}/mcp`, {
      method: 'DELETE',
      headers: { 'mcp-session-id': sessionId, 'x-test-principal': 'mallory' },
    });
    assert.equal(gone.status, 404, 'another principal cannot end it either');
    const ended = await fetch(`${replicas.b.base}/mcp`, {
      method: 'DELETE',
      headers: { 'mcp-session-id': sessionId, 'x-test-principal': 'alice' },
    });
    assert.equal(ended.status, 204);
  });

  it('a GET stream on B hears list_changed once; a reconnection to A with Last-Event-ID gets what it missed, once, in order', async () => {
    const sessionId = await initialize(replicas.a.base);
    const first = await openGet(replicas.b.base, sessionId);
    assert.equal(first.status, 200);
    const [priming] = await first.waitFor((e) => e.data === '', 1);
    assert.ok(priming!.id, 'the priming event carries an id');
    assert.equal(priming!.retry, 200, 'and a retry hint');

    await announceChange();
    await first.waitFor(toolsChanged, 1);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    assert.equal(first.events.filter(toolsChanged).length, 1, 'once per session, not once per replica');
    const lastSeen = first.events[first.events.length - 1]!.id!;
    first.abort();

    // Two changes further apart than the fan-out's coalescing window: two notifications.
    await announceChange();
    await new Promise((resolve) => setTimeout(resolve, 3 * LIST_CHANGED_COALESCE_MS));
    await announceChange();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const resumed = await openGet(replicas.a.base, sessionId, lastSeen);
    assert.equal(resumed.status, 200);
    const missed = await resumed.waitFor(toolsChanged, 2);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(resumed.events.filter(toolsChanged).length, 2, 'each missed event once');
    const seqs = resumed.events.filter((e) => e.data !== '').map((e) => Number(e.id!.split(':')[1]));
    assert.deepEqual(
      seqs,
      [...seqs].sort((x, y) => x - y),
      'in order',
    );
    assert.ok(
      seqs.every((s) => s > Number(lastSeen.split(':')[1])),
      'nothing from before Last-Event-ID',
    );
    assert.ok(
      missed.every((e) => e.id!.startsWith(`${lastSeen.split(':')[0]}:`)),
      'all from the same stream',
    );
    resumed.abort();

    // A new stream (no Last-Event-ID) replays nothing from the old one.
    const fresh = await openGet(replicas.b.base, sessionId);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.deepEqual(
      fresh.events.filter((e) => e.data !== ''),
      [],
      'nothing from another stream',
    );
    fresh.abort();
  });

  it('a second GET closes the first, on whichever replica held it; DELETE closes the stream too', async () => {
    const sessionId = await initialize(replicas.b.base);
    const first = await openGet(replicas.a.base, sessionId);
    await first.waitFor((e) => e.data === '', 1);
    const second = await openGet(replicas.b.base, sessionId);
    await second.waitFor((e) => e.data === '', 1);
    await Promise.race([first.ended, new Promise((_, reject) => setTimeout(() => reject(new Error('the first GET stayed open')), 5000))]);
    await announceChange();
    await second.waitFor(toolsChanged, 1);
    const ended = await fetch(`${replicas.a.base}/mcp`, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
    assert.equal(ended.status, 204);
    await Promise.race([
      second.ended,
      new Promise((_, reject) => setTimeout(() => reject(new Error('DELETE did not close the GET stream')), 5000)),
    ]);
    const after = await openGet(replicas.b.base, sessionId);
    assert.equal(after.status, 404);
  });

  it('a 2026-07-28 client answers an upstream elicitation through input_required; its retry lands on the other replica and completes', async () => {
    const hosts: string[] = [];
    const bodies: string[] = [];
    let turn = 0;
    const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: V2026 } }, capabilities: { elicitation: { form: {} } } });
    const asked: string[] = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(request.params.message);
      return { action: 'accept', content: { name: 'Grace Hopper', check: true, email: 'grace@example.com' } };
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), {
        // Consecutive requests alternate between the replicas.
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          url.host = new URL([replicas.a.base, replicas.b.base][turn++ % 2]!).host;
          const body = String(init?.body ?? '');
          if (body.includes('"tools/call"')) {
            bodies.push(body);
            hosts.push(url.host);
          }
          return fetch(url, init);
        },
      }),
    );
    try {
      const result = await client.callTool({ name: 'everything__trigger-elicitation-request', arguments: {} });
      assert.equal(asked.length, 1, 'the client was asked once');
      assert.match(JSON.stringify(result.content), /Grace Hopper/);
      assert.equal(bodies.length, 2, 'a first call and one retry');
      assert.ok(
        !bodies[0]!.includes('requestState') && bodies[1]!.includes('requestState') && bodies[1]!.includes('inputResponses'),
        'the retry carries requestState and inputResponses',
      );
      assert.notEqual(hosts[0], hosts[1], 'the retry reached the other replica');
    } finally {
      await client.close();
    }
  });

  it('a 2026-07-28 retry on the other replica hears the progress the upstream sends after the answer', async () => {
    const hosts: string[] = [];
    let turn = 0;
    const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: V2026 } }, capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Ada' } }));
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), {
        fetch: (input, init) => {
          const url = new URL(input instanceof Request ? input.url : String(input));
          url.host = new URL([replicas.a.base, replicas.b.base][turn++ % 2]!).host;
          if (String(init?.body ?? '').includes('"tools/call"')) hosts.push(url.host);
          return fetch(url, init);
        },
      }),
    );
    try {
      const progress: { progress: number; message?: string }[] = [];
      const result = await client.callTool(
        { name: 'asking__ask', arguments: { who: 'replicas' } },
        { onprogress: (p) => progress.push({ progress: p.progress, ...(p.message !== undefined && { message: p.message }) }) },
      );
      assert.match(JSON.stringify(result.content), /replicas: Ada/);
      assert.equal(hosts.length, 2, 'a first call and one retry');
      assert.notEqual(hosts[0], hosts[1], 'the retry reached the other replica');
      // (The SDK client reports its own rounds as progress too.)
      assert.ok(
        progress.some((p) => p.message === 'answered'),
        `the progress after the answer reached the retry: ${JSON.stringify(progress)}`,
      );
    } finally {
      await client.close();
    }
  });

  it('a 2026-07-28 retry with a tampered or malformed requestState is refused with -32602 naming the problem; a replayed one finds nothing waiting', async () => {
    const call = (id: number, params: Record<string, unknown>) =>
      fetch(`${replicas.b.base}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': V2026,
          'mcp-method': 'tools/call',
          'mcp-name': 'everything__trigger-elicitation-request',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: {
            name: 'everything__trigger-elicitation-request',
            arguments: {},
            ...params,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': V2026,
              'io.modelcontextprotocol/clientInfo': clientInfo,
              'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
            },
          },
        }),
      });
    const readJson = async (response: Response): Promise<Record<string, any>> => {
      const text = await response.text();
      const data = text.startsWith('{')
        ? text
        : text
            .split('\n')
            .find((line) => line.startsWith('data: '))!
            .slice(6);
      return JSON.parse(data) as Record<string, any>;
    };
    const first = await readJson(await call(1, {}));
    assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first));
    const [key] = Object.keys(first.result.inputRequests);
    assert.equal(first.result.inputRequests[key!].method, 'elicitation/create');
    const state = String(first.result.requestState);
    const [version, payload, signature] = state.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
    const inputResponses = { [key!]: { action: 'accept', content: { name: 'Mallory', check: true, email: 'm@example.com' } } };

    const forged = `${version}.${Buffer.from(JSON.stringify({ ...claims, target: 'everything__echo' })).toString('base64url')}.${signature}`;
    const tampered = await readJson(await call(2, { requestState: forged, inputResponses }));
    assert.equal(tampered.error?.code, -32602, JSON.stringify(tampered));
    assert.match(tampered.error.message, /requestState signature does not verify/);

    const garbage = await readJson(await call(3, { requestState: 'not-a-state', inputResponses }));
    assert.equal(garbage.error?.code, -32602, JSON.stringify(garbage));
    assert.match(garbage.error.message, /requestState is malformed/);

    // The genuine state still completes the call: the forgeries left the pending request alone.
    const done = await readJson(await call(4, { requestState: state, inputResponses }));
    assert.match(JSON.stringify(done.result?.content), /Mallory/, JSON.stringify(done));
    const replay = await readJson(await call(5, { requestState: state, inputResponses }));
    assert.equal(replay.error?.code, -32602, JSON.stringify(replay));
    assert.match(replay.error.message, /no longer waiting/);
  });

  it('a 2026-07-28 listen stream on B hears a change while the client’s requests go to A', async () => {
    const pinned = (input: string | URL | Request, init?: RequestInit) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      url.host = new URL(String(init?.body ?? '').includes('subscriptions/listen') ? replicas.b.base : replicas.a.base).host;
      return fetch(url, init);
    };
    const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    const heard = new Promise<void>((resolve) => client.setNotificationHandler('notifications/tools/list_changed', () => resolve()));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), { fetch: pinned }));
    try {
      const subscription = await client.listen({ toolsListChanged: true });
      assert.ok((await client.listTools()).tools.length > 0);
      await announceChange();
      await Promise.race([
        heard,
        new Promise((_, reject) => setTimeout(() => reject(new Error('no list_changed on the listen stream within 10 s')), 10_000)),
      ]);
      await subscription.close();
    } finally {
      await client.close();
    }
  });
});
