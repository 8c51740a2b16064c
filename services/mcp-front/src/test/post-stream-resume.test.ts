/**
 * Resumable POST streams of 2025-era sessions (MCP 2025-11-25 basic/transports "Sending Messages to the
 * Server" and "Resumability and Redelivery"), with two mcp-front replicas on a nats-server of the test's own,
 * in front of the real gateway and governance and @modelcontextprotocol/server-everything (whose
 * `trigger-long-running-operation` sends progress): a 2025-11-25 POST stream opens with a priming event and
 * `retry:`, a 2025-06-18 one does not, and a client whose POST connection drops resumes the stream with GET
 * and `Last-Event-ID` on the other replica, receiving the progress it missed and the result.
 */
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger } from '@punk/lib';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('mcp-front-post-stream-resume-test', 'silent');
const clientInfo = { name: 'post-stream-resume-test', version: '1.0.0' };
const LONG_RUNNING = 'everything__trigger-long-running-operation';
/** Event ids Punk mints: `<streamId>:<seq>`. */
const EVENT_ID = /^[0-9a-f-]{36}:\d+$/;

/** One SSE event as read off the wire, with the `retry:` field that came with it, if any. */
interface WireEvent {
  id?: string;
  retry?: number;
  data: string;
}

/** An SSE response read event by event. */
interface SseReader {
  /** The next event, or undefined when the server ended the stream. */
  next(timeoutMs?: number): Promise<WireEvent | undefined>;
  /** Every event until the server ends the stream. */
  rest(timeoutMs?: number): Promise<WireEvent[]>;
  /** Drops the connection (as a client whose network fails). */
  drop(): void;
}

/** Reads a fetch response as SSE (eventsource-parser); `retry:` fields are attached to the event they precede or come with. */
function readSse(response: Response, controller: AbortController): SseReader {
  let retry: number | undefined;
  const reader = response
    .body!.pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream({ onRetry: (ms) => (retry = ms) }))
    .getReader();
  const next = async (timeoutMs = 15_000): Promise<WireEvent | undefined> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`no SSE event within ${timeoutMs} ms`)), timeoutMs)),
    );
    try {
      const { value, done } = await Promise.race([reader.read(), timeout]);
      if (done) return undefined;
      const event: WireEvent = { data: value.data, ...(value.id !== undefined && { id: value.id }), ...(retry !== undefined && { retry }) };
      retry = undefined;
      return event;
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    next,
    async rest(timeoutMs = 15_000) {
      const events: WireEvent[] = [];
      for (let event = await next(timeoutMs); event; event = await next(timeoutMs)) events.push(event);
      return events;
    },
    drop: () => controller.abort(),
  };
}

function post(base: string, version: string, message: unknown, sessionId?: string): Promise<Response> {
  return fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify(message),
  });
}

/** Starts a session at `version` with raw HTTP on `base`; resolves with its id. */
async function initialize(base: string, version: string): Promise<string> {
  const init = await post(base, version, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo },
  });
  assert.equal(init.status, 200);
  const id = init.headers.get('mcp-session-id');
  assert.ok(id, 'initialize answers with Mcp-Session-Id');
  assert.equal(((await init.json()) as { result: { protocolVersion: string } }).result.protocolVersion, version);
  assert.equal((await post(base, version, { jsonrpc: '2.0', method: 'notifications/initialized' }, id)).status, 202);
  return id;
}

/** POSTs a call of the long-running tool with a progress token (so it is answered as SSE); resolves with the open stream. */
async function callLongRunning(base: string, version: string, sessionId: string, steps: number, duration: number): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
      'mcp-session-id': sessionId,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 7,
      method: 'tools/call',
      params: { name: LONG_RUNNING, arguments: { duration, steps }, _meta: { progressToken: 'p' } },
    }),
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
  return readSse(response, controller);
}

/** Opens a GET on `base`, resuming after `lastEventId` when given. */
async function openGet(base: string, version: string, sessionId: string, lastEventId?: string): Promise<SseReader> {
  const controller = new AbortController();
  const response = await fetch(`${base}/mcp`, {
    headers: {
      accept: 'text/event-stream',
      'mcp-protocol-version': version,
      'mcp-session-id': sessionId,
      ...(lastEventId && { 'last-event-id': lastEventId }),
    },
    signal: controller.signal,
  });
  assert.equal(response.status, 200);
  return readSse(response, controller);
}

const progressOf = (event: WireEvent): number | undefined => {
  const message = JSON.parse(event.data) as { method?: string; params?: { progress?: number } };
  return message.method === 'notifications/progress' ? message.params?.progress : undefined;
};
const isResult = (event: WireEvent): boolean => {
  const message = event.data === '' ? {} : (JSON.parse(event.data) as { id?: unknown; result?: unknown });
  return message.id === 7 && message.result !== undefined;
};

describe('resumable POST streams across two mcp-front replicas', { timeout: 240_000 }, () => {
  let replicas: ReplicaSet;

  before(async () => {
    replicas = await startReplicaSet(log, { prefix: 'post-resume', servers: (tenant) => [everything('everything', tenant)] });
  });

  after(async () => {
    await replicas?.stop();
  });

  it('a 2025-11-25 POST stream opens with a priming event (id, empty data, retry) and every event carries an id of that stream', async () => {
    const sessionId = await initialize(replicas.a.base, '2025-11-25');
    const events = await (await callLongRunning(replicas.b.base, '2025-11-25', sessionId, 2, 0.2)).rest();
    const [priming, ...rest] = events;
    assert.equal(priming?.data, '', 'the first event is the priming event');
    assert.match(priming?.id ?? '', EVENT_ID);
    assert.equal(priming?.retry, 200, 'with the retry the front is configured with (sseRetryMs)');
    const streamId = priming.id!.split(':')[0];
    assert.deepEqual(
      rest.map((e) => e.id?.split(':')[0]),
      rest.map(() => streamId),
      'every event has an id of the same stream',
    );
    const seqs = events.map((e) => Number(e.id!.split(':')[1]));
    assert.deepEqual(
      seqs,
      [...seqs].sort((x, y) => x - y),
      'ids increase along the stream',
    );
    assert.deepEqual(
      rest.map(progressOf).filter((p) => p !== undefined),
      [1, 2],
    );
    assert.ok(isResult(rest[rest.length - 1]!), 'the stream ends with the result');
  });

  it('a 2025-06-18 POST stream has no priming event, no retry and no event ids', async () => {
    const sessionId = await initialize(replicas.a.base, '2025-06-18');
    const events = await (await callLongRunning(replicas.a.base, '2025-06-18', sessionId, 2, 0.2)).rest();
    assert.ok(events.length >= 3, JSON.stringify(events));
    assert.ok(
      events.every((e) => e.data !== ''),
      'no priming event',
    );
    assert.ok(
      events.every((e) => e.id === undefined && e.retry === undefined),
      JSON.stringify(events),
    );
    assert.ok(isResult(events[events.length - 1]!));
  });

  it('a client that drops its POST after the priming event resumes on the other replica and gets the progress it missed and the result', async () => {
    const sessionId = await initialize(replicas.a.base, '2025-11-25');
    const stream = await callLongRunning(replicas.a.base, '2025-11-25', sessionId, 4, 1.2);
    const priming = await stream.next();
    assert.equal(priming?.data, '');
    stream.drop();
    // Let the call run on without a connection for a while: progress is stored meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 700));
    const events = await (await openGet(replicas.b.base, '2025-11-25', sessionId, priming.id)).rest();
    assert.deepEqual(events.map(progressOf).slice(0, -1), [1, 2, 3, 4], 'every progress notification, once, in order');
    assert.ok(isResult(events[events.length - 1]!), 'then the result, and the server ends the stream');
    assert.match(JSON.stringify(JSON.parse(events[events.length - 1]!.data)), /Long running operation completed/);
    assert.ok(
      events.every((e) => e.id?.startsWith(`${priming.id!.split(':')[0]}:`)),
      'all from the POST stream',
    );
  });

  it('resuming after a progress event replays only what came after it, and does not take over the session GET stream', async () => {
    const sessionId = await initialize(replicas.b.base, '2025-11-25');
    const getStream = await openGet(replicas.a.base, '2025-11-25', sessionId);
    assert.equal((await getStream.next())?.data, '', 'the GET stream is open');
    const stream = await callLongRunning(replicas.a.base, '2025-11-25', sessionId, 3, 0.9);
    assert.equal((await stream.next())?.data, '');
    const first = await stream.next();
    assert.equal(first && progressOf(first), 1);
    stream.drop();
    const events = await (await openGet(replicas.b.base, '2025-11-25', sessionId, first!.id)).rest();
    assert.deepEqual(events.map(progressOf).slice(0, -1), [2, 3]);
    assert.ok(isResult(events[events.length - 1]!));
    // The session's GET stream stayed open (a resumed POST stream is not a second GET stream) and heard none of it.
    const state = await getStream.next(1000).then(
      (event) => (event ? `event ${JSON.stringify(event)}` : 'ended'),
      () => 'open',
    );
    assert.equal(state, 'open');
    getStream.drop();
  });

  it('the SDK client, its POST stream cut after the priming event, resumes by itself with GET on the other replica', async () => {
    const methods: string[] = [];
    // POSTs go to A, GETs to B; POST SSE answers are cut right after their first event.
    const split: typeof fetch = async (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const method = init?.method ?? 'GET';
      const resumed = new Headers(init?.headers).has('last-event-id');
      methods.push(resumed ? 'GET Last-Event-ID' : method);
      url.host = new URL(method === 'POST' ? replicas.a.base : replicas.b.base).host;
      const response = await fetch(url, init);
      if (
        method !== 'POST' ||
        !response.headers.get('content-type')?.startsWith('text/event-stream') ||
        !String(init?.body).includes('tools/call')
      )
        return response;
      return new Response(firstEventOnly(response.body!), { status: response.status, headers: response.headers });
    };
    const client = new Client(clientInfo);
    await client.connect(new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`), { fetch: split }));
    try {
      const progress: number[] = [];
      const result = await client.callTool(
        { name: LONG_RUNNING, arguments: { duration: 0.9, steps: 3 } },
        { onprogress: (p) => progress.push(p.progress) },
      );
      assert.match(JSON.stringify(result.content), /Long running operation completed/);
      assert.deepEqual(progress, [1, 2, 3]);
      assert.ok(methods.includes('GET Last-Event-ID'), methods.join(', '));
    } finally {
      await client.close();
    }
  });
});

/** A body that ends after the first SSE event of `body` (a connection that drops right after the priming event). */
function firstEventOnly(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await reader.read();
      if (done) {
        controller.close();
        return;
      }
      seen += decoder.decode(value, { stream: true });
      const end = seen.indexOf('\n\n');
      if (end === -1) return;
      controller.enqueue(new TextEncoder().encode(seen.slice(0, end + 2)));
      controller.close();
      await reader.cancel();
    },
  });
}
