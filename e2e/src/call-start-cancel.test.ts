/**
 * A call's edges, on a real `punk up` (and `punk cluster` for the cancellations that cross replicas) with a real stdio
 * server that is slow to start (e2e/fixtures/slow-start.mjs, which notes every call it runs in a file):
 * - a call to a server still starting waits for the start, bounded by the server's `startTimeout`, instead of failing;
 * - a cancel stops the call at whatever stage it is: waiting for the start (both eras), or still on its way when a
 *   2025 client's `notifications/cancelled` overtakes it (MCP 2025-11-25 basic/utilities/cancellation), every time;
 *   and the cancelled 2025 request gets no response;
 * - a `tools/call` without an `id` (a notification, JSON-RPC 2.0 §4.1) is refused naming the missing id, both eras.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/client';
import { connectClient, textOf, type Era } from './clients.js';
import { scratchDatabase } from './distributed.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats } from './nats-server.js';

const FIXTURE = join(repoRoot, 'e2e/fixtures/slow-start.mjs');
const ERAS: Era[] = ['2025-11-25', '2026-07-28'];

/** An McpServer manifest of slow-start.mjs: it reads its first message after `delayMs`; its calls are noted in `callsFile`. */
function slowServer(name: string, delayMs: number, startTimeout: string, callsFile: string): string {
  return `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE)}]
  env: [{ name: START_DELAY_MS, value: "${String(delayMs)}" }, { name: CALLS_FILE, value: ${JSON.stringify(callsFile)} }]
  startTimeout: ${startTimeout}
`;
}

/** A `punk up` (or `punk cluster`) serving `servers` (name to [start delay in ms, startTimeout]); its calls file. */
async function punkWith(
  prefix: string,
  servers: Record<string, [number, string]>,
  options: { until?: 'ready' | 'serving'; cluster?: { natsUrl: string; databaseUrl: string } } = {},
): Promise<{ punk: RunningPunk; calls(): Promise<string[]>; stop(): Promise<void> }> {
  const dir = await manifestDir(prefix, {});
  const callsFile = join(dir, 'calls.txt');
  await writeFile(callsFile, '');
  for (const [name, [delayMs, startTimeout]] of Object.entries(servers))
    await writeFile(join(dir, `${name}.yaml`), slowServer(name, delayMs, startTimeout, callsFile));
  const punk = await startPunk({
    manifestDir: dir,
    ...(options.until && { until: options.until }),
    ...(options.cluster && {
      command: 'cluster' as const,
      env: { PUNK_NATS_URL: options.cluster.natsUrl, PUNK_DATABASE_URL: options.cluster.databaseUrl },
      timeoutMs: 150_000,
    }),
  });
  return {
    punk,
    calls: async () => (await readFile(callsFile, 'utf8')).split('\n').filter((line) => line !== ''),
    stop: async () => {
      await punk.stop();
      await removeDir(dir);
    },
  };
}

async function serverState(punk: RunningPunk, name: string): Promise<string> {
  const res = await fetch(`${punk.baseUrl}/api/v1/mcp/servers/${name}`);
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { server: { state: string } }).server.state;
}

/** The headers of a POST to /mcp in a 2025-11-25 session. */
function sessionHeaders(sessionId: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25',
    'mcp-session-id': sessionId,
  };
}

/** Opens a 2025-11-25 session on `/mcp` by hand (initialize, notifications/initialized) with `capabilities`; its id. */
async function rawSession(baseUrl: string, capabilities: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'punk-e2e-raw', version: '1.0.0' } },
    }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const sessionId = res.headers.get('mcp-session-id');
  assert.ok(sessionId, 'initialize answers a session id');
  await res.text();
  const initialized = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: sessionHeaders(sessionId),
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  assert.equal(initialized.status, 202);
  return sessionId;
}

/** The JSON-RPC messages of an SSE or JSON response body. */
function messagesOf(body: string): Array<{ id?: unknown; result?: unknown; error?: unknown }> {
  const trimmed = body.trim();
  if (trimmed.startsWith('{')) return [JSON.parse(trimmed) as { id?: unknown }];
  return (
    trimmed
      .split('\n')
      // The priming event of a resumable stream carries no message.
      .filter((line) => line.startsWith('data: ') && line !== 'data: ')
      .map((line) => JSON.parse(line.slice('data: '.length)) as { id?: unknown })
  );
}

/**
 * Sends `count` tools/call requests (`wait` for `ms` on server `slow`, ids and `n` from `from`) in a raw 2025 session,
 * each followed at once by its `notifications/cancelled`, which so travels beside the call and may reach Punk first;
 * returns each call's response messages. A session declaring `roots` gets its calls' answers on resumable streams
 * (the SDK's transport, legacy.ts), one declaring nothing on plain ones (fast-path.ts).
 */
async function overtakenCalls(
  baseUrl: string,
  options: { count: number; ms: number; from: number; capabilities: Record<string, unknown> },
): Promise<Array<Array<{ id?: unknown }>>> {
  const sessionId = await rawSession(baseUrl, options.capabilities);
  const { count, ms, from } = options;
  const answers: Array<Array<{ id?: unknown }>> = [];
  for (let n = from; n < from + count; n++) {
    const call = fetch(`${baseUrl}/mcp`, {
      method: 'POST',
      headers: sessionHeaders(sessionId),
      body: JSON.stringify({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: 'slow__wait', arguments: { ms, n } } }),
    });
    const cancel = await fetch(`${baseUrl}/mcp`, {
      method: 'POST',
      headers: sessionHeaders(sessionId),
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: n, reason: 'changed my mind' } }),
    });
    assert.equal(cancel.status, 202);
    answers.push(messagesOf(await (await call).text()));
  }
  return answers;
}

/** Asserts that no call of `calls` ran to its end: each that started was cancelled. */
function assertNoneRanToItsEnd(calls: string[], count: number): void {
  const done = calls.filter((line) => line.startsWith('wait done'));
  assert.deepEqual(done, [], `no cancelled call runs to its end (calls: ${calls.join('; ')})`);
  const started = calls.filter((line) => line.startsWith('wait start')).length;
  const cancelled = calls.filter((line) => line.startsWith('wait cancelled')).length;
  assert.equal(
    cancelled,
    started,
    `every call that reached the server was cancelled there (${String(started)} of ${String(count)} reached it)`,
  );
}

void test('a call to a server still starting waits for the start, bounded by its startTimeout, in both eras', async (t) => {
  const world = await punkWith('call-starting', { slow: [5_000, '30s'], never: [120_000, '4s'] }, { until: 'serving' });
  t.after(() => world.stop());
  const { punk } = world;
  assert.equal(await serverState(punk, 'slow'), 'starting');
  assert.equal(await serverState(punk, 'never'), 'starting');
  const started = Date.now();
  const call = async (url: string, era: Era, tool: string) => {
    const client = await connectClient(url, era);
    try {
      return await client.callTool({ name: tool, arguments: { ms: 10 } });
    } finally {
      await client.close();
    }
  };
  const [answers, failures] = await Promise.all([
    Promise.all([
      ...ERAS.map((era) => call(`${punk.baseUrl}/mcp`, era, 'slow__wait')),
      call(`${punk.baseUrl}/servers/default/slow/mcp`, '2025-11-25', 'wait'),
    ]),
    // A start that runs out of its budget ends the wait with its failure, within the server's startTimeout.
    Promise.all(ERAS.map((era) => call(`${punk.baseUrl}/mcp`, era, 'never__wait'))),
  ]);
  assert.deepEqual(answers.map(textOf), ['waited 10 ms', 'waited 10 ms', 'waited 10 ms'], 'each call is answered once the server started');
  for (const failed of failures) {
    assert.equal(failed.isError, true);
    assert.match(textOf(failed), /never.*did not complete its MCP handshake within 4000 ms/);
  }
  assert.ok(Date.now() - started < 20_000, 'no call waited longer than the start budgets');
  assert.equal(await serverState(punk, 'slow'), 'ready');
  assert.equal((await world.calls()).filter((line) => line.startsWith('wait done')).length, 3);
  for (const era of ERAS) {
    const client = await connectClient(`${punk.baseUrl}/mcp`, era);
    try {
      // A tool the started server does not list is unknown.
      await assert.rejects(client.callTool({ name: 'slow__nope', arguments: {} }), /Unknown tool: slow__nope/);
    } finally {
      await client.close();
    }
  }
});

void test('a cancel while the call waits for the start stops it: the server never runs it (both eras, no 2025 response)', async (t) => {
  const world = await punkWith('cancel-starting', { slow: [6_000, '30s'] }, { until: 'serving' });
  t.after(() => world.stop());
  const { punk } = world;
  assert.equal(await serverState(punk, 'slow'), 'starting');
  for (const [n, era] of ERAS.entries()) {
    const client = await connectClient(`${punk.baseUrl}/mcp`, era);
    try {
      // The SDK client sends notifications/cancelled (2025) or closes the request's stream (2026-07-28).
      await assert.rejects(client.callTool({ name: 'slow__wait', arguments: { ms: 100, n } }, { signal: AbortSignal.timeout(300) }));
      // The client sends its notifications/cancelled after the call rejected; closing at once would abort it.
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      await client.close();
    }
  }
  for (const capabilities of [{}, { roots: {} }]) {
    const [answer] = await overtakenCalls(punk.baseUrl, { count: 1, ms: 100, from: 1, capabilities });
    assert.deepEqual(answer, [], 'the cancelled request gets no response: its stream ends without one');
  }
  assert.ok(await eventually(async () => (await serverState(punk, 'slow')) === 'ready' || undefined, 30_000), 'the server starts');
  // Once started, a call runs: the cancelled ones did not wait to run then.
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
  try {
    assert.equal(textOf(await client.callTool({ name: 'slow__wait', arguments: { ms: 10, n: 99 } })), 'waited 10 ms');
  } finally {
    await client.close();
  }
  assert.deepEqual(await world.calls(), ['wait start 99', 'wait done 99'], 'only the call made after the start reached the server');
});

/** The early cancellations, told on one deployment (punk up or punk cluster). */
async function earlyCancels(world: Awaited<ReturnType<typeof punkWith>>): Promise<void> {
  const { punk } = world;
  const count = 10;
  const answers = [
    ...(await overtakenCalls(punk.baseUrl, { count, ms: 2_000, from: 1, capabilities: {} })),
    ...(await overtakenCalls(punk.baseUrl, { count, ms: 2_000, from: 201, capabilities: { roots: {} } })),
  ];
  // The SDK client's own cancellation, 5 ms after the call went out.
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
  try {
    for (let n = 100; n < 100 + count; n++)
      await assert.rejects(client.callTool({ name: 'slow__wait', arguments: { ms: 2_000, n } }, { signal: AbortSignal.timeout(5) }));
    // The client sends its notifications/cancelled after the call rejected; closing at once would abort the last one.
    await new Promise((resolve) => setTimeout(resolve, 200));
  } finally {
    await client.close();
  }
  // Long enough for a call that was not stopped to end.
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  assertNoneRanToItsEnd(await world.calls(), 3 * count);
  answers.forEach((messages, i) =>
    assert.deepEqual(
      messages.filter((m) => m.id !== undefined),
      [],
      `cancelled request #${String(i + 1)} gets no response (got ${JSON.stringify(messages)})`,
    ),
  );
}

void describe('a 2025 cancel that overtakes its call stops it, every time', () => {
  void test('on punk up', async (t) => {
    const world = await punkWith('cancel-early', { slow: [0, '30s'] });
    t.after(() => world.stop());
    await earlyCancels(world);
  });

  void test('on punk cluster (two fronts, two gateways over NATS)', async (t) => {
    const nats = await startOwnNats();
    const db = await scratchDatabase();
    const world = await punkWith('cancel-early-cluster', { slow: [0, '30s'] }, { cluster: { natsUrl: nats.url, databaseUrl: db.url } });
    t.after(async () => {
      await world.stop();
      await db.drop();
      await nats.stop();
    });
    await earlyCancels(world);
  });
});

void test('a tools/call without an id is refused with 400 naming the missing id, in both eras; nothing is called', async (t) => {
  const world = await punkWith('call-no-id', { slow: [0, '30s'] });
  t.after(() => world.stop());
  const { punk } = world;
  const call = { jsonrpc: '2.0', method: 'tools/call', params: { name: 'slow__wait', arguments: { ms: 10 } } };
  const sessionId = await rawSession(punk.baseUrl, {});
  const modern = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': 'slow__wait',
  };
  const envelope = {
    [PROTOCOL_VERSION_META_KEY]: '2026-07-28',
    [CLIENT_INFO_META_KEY]: { name: 'punk-e2e-raw', version: '1.0.0' },
    [CLIENT_CAPABILITIES_META_KEY]: {},
  };
  for (const [headers, body] of [
    [sessionHeaders(sessionId), call],
    [modern, { ...call, params: { ...call.params, _meta: envelope } }],
  ] as const) {
    const res = await fetch(`${punk.baseUrl}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.equal(res.status, 400);
    const answer = (await res.json()) as { error: { code: number; message: string } };
    assert.equal(answer.error.code, -32600);
    assert.match(answer.error.message, /tools\/call is a request and needs an id/);
  }
  assert.deepEqual(await world.calls(), [], 'no call reached the server');
});
