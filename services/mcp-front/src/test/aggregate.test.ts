/**
 * Aggregation done right, driven by real SDK clients of both eras over real HTTP against two mcp-front
 * replicas (each with its own NATS connection to a nats-server of the test's own), in front of the real
 * gateway and governance and three real upstream servers (fixtures/aggregate-upstream.mjs): `alpha` offers
 * everything, `beta` advertises resources and then answers resources/list with -32601, `gamma` is alpha's
 * twin with `sessionMode: per-client`.
 */
import { strict as assert } from 'node:assert';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger, mcpServerSchema, type McpServer } from '@punk/lib';
import { startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('aggregate-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const clientInfo = { name: 'aggregate-test', version: '1.0.0' };
const fixtures = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures');
const PAGE_SIZE = 4;
/** The upstreams' event log (cancellations, log levels, subscriptions), in the gateway's work directory. */
const EVENT_LOG = 'cancelled.log';

interface Definitions {
  tools: Record<string, unknown>[];
  prompts: Record<string, unknown>[];
  resources: Record<string, unknown>[];
  resourceTemplates: Record<string, unknown>[];
}

function upstream(tenant: string, name: string, mode: string, eventLog: string, extra: Record<string, unknown> = {}): McpServer {
  return mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace: tenant },
    spec: {
      image: 'local/aggregate',
      command: [process.execPath, join(fixtures, 'aggregate-upstream.mjs'), mode],
      env: [{ name: 'EVENT_LOG', value: eventLog }],
      ...extra,
    },
  });
}

/** A fetch that records the JSON-RPC result bodies it receives (JSON or SSE), by request method. */
function recordingFetch(results: Map<string, Record<string, unknown>[]>): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }) : undefined;
    if (!body?.method || !response.ok) return response;
    const raw = await response.clone().text();
    if (raw.trim() === '') return response;
    const type = response.headers.get('content-type') ?? '';
    const payloads = type.includes('text/event-stream')
      ? raw
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trim())
          .filter(Boolean)
      : [raw];
    for (const payload of payloads) {
      const message = JSON.parse(payload) as { result?: Record<string, unknown> };
      if (message.result) results.set(body.method, [...(results.get(body.method) ?? []), message.result]);
    }
    return response;
  };
}

async function connect(url: string, era: '2025' | '2026', options: { fetch?: typeof fetch; versions?: string[] } = {}): Promise<Client> {
  const client = new Client(clientInfo, {
    ...(era === '2026' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }),
    ...(options.versions && { supportedProtocolVersions: options.versions }),
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), options.fetch ? { fetch: options.fetch } : {}));
  return client;
}

function text(result: { content?: unknown }): string {
  return (result.content as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 100));
  }
}

describe('aggregation across upstreams and replicas', { timeout: 180_000 }, () => {
  let replicas: ReplicaSet;
  let cancelLog: string;
  let definitions: Definitions;

  before(async () => {
    definitions = JSON.parse(await readFile(join(fixtures, 'aggregate-definitions.json'), 'utf8')) as Definitions;
    replicas = await startReplicaSet(log, {
      prefix: 'agg',
      servers: (tenant, workDir) => [
        upstream(tenant, 'alpha', 'full', join(workDir, EVENT_LOG)),
        upstream(tenant, 'beta', 'no-resources', join(workDir, EVENT_LOG)),
        upstream(tenant, 'gamma', 'full', join(workDir, EVENT_LOG), { sessionMode: 'per-client' }),
      ],
      frontOptions: () => ({ pageSize: PAGE_SIZE }),
    });
    cancelLog = join(replicas.workDir, EVENT_LOG);
  });

  after(async () => {
    await replicas?.stop();
  });

  it('pages every list in a deterministic order with cursors that work on either replica; a bad cursor is -32602', async () => {
    const results = new Map<string, Record<string, unknown>[]>();
    const a = await connect(`${replicas.a.base}/mcp`, '2026', { fetch: recordingFetch(results) });
    const b = await connect(`${replicas.b.base}/mcp`, '2026');
    try {
      const expected = ['alpha', 'beta', 'gamma'].flatMap((s) => definitions.tools.map((t) => `${s}__${String(t['name'])}`)).sort();
      // Without a cursor the SDK client walks every page itself.
      const { tools } = await a.listTools();
      assert.deepEqual(
        tools.map((t) => t.name),
        expected,
        'the union of both servers, each once, sorted',
      );
      const pages = results.get('tools/list')!;
      assert.equal(pages.length, Math.ceil(expected.length / PAGE_SIZE));
      assert.ok(pages.every((p) => (p['tools'] as unknown[]).length <= PAGE_SIZE));
      assert.equal(pages[pages.length - 1]!['nextCursor'], undefined);

      // A cursor minted by one replica is valid on the other: walk the pages alternating replicas.
      const names = (pages[0]!['tools'] as { name: string }[]).map((t) => t.name);
      let cursor = pages[0]!['nextCursor'] as string | undefined;
      for (let i = 1; cursor; i++) {
        const page = await (i % 2 === 1 ? b : a).listTools({ cursor });
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      }
      assert.deepEqual(names, expected);

      const prompts = await a.listPrompts();
      assert.deepEqual(
        prompts.prompts.map((p) => p.name),
        ['alpha__greet', 'beta__greet', 'gamma__greet'],
      );
      // alpha and gamma list the same URIs and template: the first server by name owns each, once.
      const resources = await b.listResources();
      assert.deepEqual(
        resources.resources.map((r) => r.uri),
        ['fix://static/a', 'fix://static/b'],
      );
      const templates = await a.listResourceTemplates();
      assert.deepEqual(
        templates.resourceTemplates.map((t) => t.uriTemplate),
        ['fix://items/{id}'],
      );
      const read = await b.readResource({ uri: 'fix://items/42' });
      assert.equal((read.contents[0] as { text?: string }).text, 'content of fix://items/42');

      for (const bad of ['not-a-cursor', Buffer.from('{"v":1,"list":"prompts/list","after":"x"}').toString('base64url')]) {
        await assert.rejects(
          a.listTools({ cursor: bad }),
          (error: unknown) =>
            error instanceof ProtocolError && error.code === -32602 && /Invalid cursor for tools\/list/.test(error.message),
        );
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a 2025 session pages the same way', async () => {
    const results = new Map<string, Record<string, unknown>[]>();
    const client = await connect(`${replicas.b.base}/mcp`, '2025', { fetch: recordingFetch(results) });
    try {
      const { tools } = await client.listTools();
      const pages = results.get('tools/list')!;
      assert.equal(pages.length, Math.ceil(tools.length / PAGE_SIZE));
      assert.equal((pages[0]!['tools'] as unknown[]).length, PAGE_SIZE);
      const second = await client.listTools({ cursor: pages[0]!['nextCursor'] as string });
      assert.deepEqual(
        second.tools.map((t) => t.name),
        tools.slice(PAGE_SIZE, 2 * PAGE_SIZE).map((t) => t.name),
      );
    } finally {
      await client.close();
    }
  });

  it('an upstream that advertises resources and fails resources/list keeps its tools and prompts listed and callable', async () => {
    const client = await connect(`${replicas.a.base}/servers/beta/mcp`, '2025');
    try {
      assert.ok(client.getServerCapabilities()?.resources, 'beta advertised resources, so the endpoint does');
      const all: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        all.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor);
      assert.equal(all.length, definitions.tools.length);
      assert.equal(text(await client.callTool({ name: 't03', arguments: {} })), 'no-resources:t03');
      assert.deepEqual((await client.listResources()).resources, []);
      assert.deepEqual(
        (await client.listPrompts()).prompts.map((p) => p.name),
        ['greet'],
      );
    } finally {
      await client.close();
    }
  });

  it('definitions reach clients of both eras as the upstream wrote them (schemas, _meta, icons), with 2026 result fields', async () => {
    for (const era of ['2025', '2026'] as const) {
      const results = new Map<string, Record<string, unknown>[]>();
      const client = await connect(`${replicas.a.base}/servers/alpha/mcp`, era, { fetch: recordingFetch(results) });
      try {
        let cursor: string | undefined;
        do cursor = (await client.listTools(cursor ? { cursor } : undefined)).nextCursor;
        while (cursor);
        await client.listPrompts();
        await client.listResources();
        await client.listResourceTemplates();
        await client.readResource({ uri: 'fix://static/a' });
        const listed = results.get('tools/list')!.flatMap((r) => r['tools'] as Record<string, unknown>[]);
        const byName = (list: Record<string, unknown>[]) => [...list].sort((x, y) => String(x['name']).localeCompare(String(y['name'])));
        assert.deepEqual(byName(listed), byName(definitions.tools), `${era}: tools deep-equal the upstream's`);
        assert.deepEqual(results.get('prompts/list')![0]!['prompts'], definitions.prompts);
        assert.deepEqual(results.get('resources/list')![0]!['resources'], definitions.resources);
        assert.deepEqual(results.get('resources/templates/list')![0]!['resourceTemplates'], definitions.resourceTemplates);
        if (era === '2026') {
          for (const method of ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']) {
            for (const result of results.get(method)!) {
              assert.equal(result['resultType'], 'complete', method);
              assert.equal(result['ttlMs'], 60_000, method);
              assert.equal(result['cacheScope'], 'private', method);
            }
          }
          const read = results.get('resources/read')![0]!;
          assert.equal(read['resultType'], 'complete');
          assert.equal(typeof read['ttlMs'], 'number');
          assert.ok(read['cacheScope'] === 'private' || read['cacheScope'] === 'public');
        } else {
          assert.equal(results.get('tools/list')![0]!['resultType'], undefined, '2025 results carry no resultType');
        }
      } finally {
        await client.close();
      }
    }
  });

  it('_meta (traceparent included) reaches the upstream untouched', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    for (const era of ['2025', '2026'] as const) {
      const client = await connect(`${replicas.b.base}/mcp`, era);
      try {
        const sent = { traceparent, tracestate: 'k=v', 'com.example/x': { deep: [1] } };
        const result = await client.callTool({ name: 'alpha__meta', arguments: {}, _meta: sent });
        // Exactly the client's _meta: no 2026 envelope keys of the client's, nothing of Punk's.
        assert.deepEqual(JSON.parse(text(result)), sent, era);
      } finally {
        await client.close();
      }
    }
  });

  it('progress reaches clients of both eras, with their own progress token', async () => {
    for (const era of ['2025', '2026'] as const) {
      const client = await connect(`${replicas.a.base}/mcp`, era);
      try {
        const seen: number[] = [];
        const result = await client.callTool({ name: 'alpha__progress', arguments: {} }, { onprogress: (p) => seen.push(p.progress) });
        assert.equal(text(result), 'done');
        assert.deepEqual(seen, [1, 2, 3], era);
      } finally {
        await client.close();
      }
    }
  });

  it('log messages of a call reach clients of both eras at or above the log level they set', async () => {
    const current = await connect(`${replicas.a.base}/servers/alpha/mcp`, '2025');
    const modern = await connect(`${replicas.b.base}/servers/alpha/mcp`, '2026');
    // On alpha's own endpoint, so that the 2025 session's level reaches no per-client server (gamma).
    try {
      const heard: Record<string, string[]> = { '2025': [], '2026': [] };
      current.setNotificationHandler('notifications/message', (n) => void heard['2025']!.push(String(n.params.level)));
      modern.setNotificationHandler('notifications/message', (n) => void heard['2026']!.push(String(n.params.level)));
      await current.setLoggingLevel('info');
      assert.equal(text(await current.callTool({ name: 'log', arguments: {} })), 'logged');
      assert.deepEqual(heard['2025'], ['info', 'error'], 'a 2025 session: its logging/setLevel threshold');
      assert.equal(text(await modern.callTool({ name: 'log', arguments: {} })), 'logged');
      assert.deepEqual(heard['2026'], [], 'a 2026 request without a log level hears no log messages');
      // A 2026 client's level travels in each request's _meta envelope (io.modelcontextprotocol/logLevel).
      assert.equal(
        text(await modern.callTool({ name: 'log', arguments: {}, _meta: { 'io.modelcontextprotocol/logLevel': 'error' } })),
        'logged',
      );
      assert.deepEqual(heard['2026'], ['error'], 'a 2026 request: the log level of its _meta');
    } finally {
      await current.close();
      await modern.close();
    }
  });

  it('arguments are checked against inputSchema ($ref into $defs): a tool error from 2025-11-25 on, -32602 before', async () => {
    const current = await connect(`${replicas.a.base}/mcp`, '2025');
    const modern = await connect(`${replicas.a.base}/mcp`, '2026');
    const older = await connect(`${replicas.a.base}/mcp`, '2025', { versions: ['2025-06-18'] });
    try {
      const bad = { valid: true, point: { x: 1, y: 'two' } };
      for (const client of [current, modern]) {
        const result = await client.callTool({ name: 'alpha__rich', arguments: bad });
        assert.equal(result.isError, true);
        assert.match(text(result), /invalid arguments for tool alpha__rich: field "point\/y" must be integer/);
      }
      await assert.rejects(
        older.callTool({ name: 'alpha__rich', arguments: bad }),
        (error: unknown) => error instanceof ProtocolError && error.code === -32602 && /point\/y/.test(error.message),
      );
      const good = await current.callTool({ name: 'alpha__rich', arguments: { valid: true, point: { x: 1, y: 2 } } });
      assert.equal(good.isError ?? false, false);
      assert.deepEqual(good.structuredContent, { total: 3, items: [{ id: 'a' }] });
    } finally {
      await current.close();
      await modern.close();
      await older.close();
    }
  });

  it('structuredContent that breaks outputSchema becomes a tool error', async () => {
    const client = await connect(`${replicas.b.base}/mcp`, '2025');
    try {
      const result = await client.callTool({ name: 'alpha__rich', arguments: { valid: false } });
      assert.equal(result.isError, true);
      assert.match(text(result), /structuredContent of tool alpha__rich does not match its outputSchema: field "total" must be number/);
    } finally {
      await client.close();
    }
  });

  it('completion/complete goes to the server owning the prompt or the resource template', async () => {
    for (const era of ['2025', '2026'] as const) {
      const client = await connect(`${replicas.a.base}/mcp`, era);
      try {
        assert.ok(client.getServerCapabilities()?.completions, 'alpha offers completions, so /mcp does');
        const prompt = await client.complete({
          ref: { type: 'ref/prompt', name: 'alpha__greet' },
          argument: { name: 'name', value: 'al' },
        });
        assert.deepEqual(prompt.completion.values, ['alice@greet', 'albert@greet'], 'the upstream saw its own prompt name');
        const template = await client.complete({
          ref: { type: 'ref/resource', uri: 'fix://items/{id}' },
          argument: { name: 'id', value: 'a' },
        });
        assert.deepEqual(template.completion.values, ['a1@fix://items/{id}', 'a2@fix://items/{id}']);
        const none = await client.complete({ ref: { type: 'ref/prompt', name: 'beta__greet' }, argument: { name: 'name', value: 'a' } });
        assert.deepEqual(none.completion.values, [], 'beta offers no completions');
        await assert.rejects(
          client.complete({ ref: { type: 'ref/prompt', name: 'nope' }, argument: { name: 'name', value: '' } }),
          (error: unknown) => error instanceof ProtocolError && error.code === -32602,
        );
      } finally {
        await client.close();
      }
    }
  });

  it('a 2026 client closing the response stream of its retry (input_required answered) cancels the upstream call', async () => {
    const client = new Client(clientInfo, {
      capabilities: { elicitation: { form: {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    });
    let asked = 0;
    client.setRequestHandler('elicitation/create', async () => {
      asked++;
      return { action: 'accept', content: {} };
    });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${replicas.a.base}/mcp`)));
    const before = (await readFile(cancelLog, 'utf8').catch(() => '')).split('\n').filter((l) => l.startsWith('cancelled ')).length;
    try {
      const controller = new AbortController();
      const call = client.callTool({ name: 'alpha__ask-then-wait', arguments: {} }, { signal: controller.signal });
      call.catch(() => undefined);
      await until('the question to be answered', async () => (asked === 1 ? true : undefined));
      // The retry (requestState, inputResponses) is now in flight, held while the upstream waits.
      await new Promise((done) => setTimeout(done, 1_000));
      controller.abort();
      await assert.rejects(call);
      await until('the upstream to record the cancellation', async () => {
        const lines = (await readFile(cancelLog, 'utf8').catch(() => '')).split('\n').filter((l) => l.startsWith('cancelled '));
        return lines.length === before + 1 ? true : undefined;
      });
    } finally {
      await client.close();
    }
  });

  it('logging/setLevel of a 2025 session reaches its per-client upstream session, not shared connections', async () => {
    const client = await connect(`${replicas.a.base}/mcp`, '2025');
    try {
      await client.setLoggingLevel('warning');
      const levels = (await readFile(cancelLog, 'utf8').catch(() => '')).split('\n').filter((l) => l.startsWith('level '));
      assert.deepEqual(levels, ['level warning'], 'gamma (per-client) heard it once; alpha (shared) did not');
    } finally {
      await client.close();
    }
  });

  it('a 2026 client closing its response stream, or a 2025 client sending notifications/cancelled (to another replica), cancels the upstream request', async () => {
    // The 2025 client's notifications/cancelled goes to the other replica than its call.
    const cancelElsewhere: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (String(init?.body ?? '').includes('notifications/cancelled')) url.host = new URL(replicas.a.base).host;
      return fetch(url, init);
    };
    const eras = [
      ['2026', replicas.a.base, undefined],
      ['2025', replicas.b.base, cancelElsewhere],
    ] as const;
    const cancelled = async () =>
      (await readFile(cancelLog, 'utf8').catch(() => '')).split('\n').filter((l) => l.startsWith('cancelled ')).length;
    const before = await cancelled();
    for (const [index, [era, base, viaFetch]] of eras.entries()) {
      const client = await connect(`${base}/mcp`, era, viaFetch ? { fetch: viaFetch } : {});
      try {
        const controller = new AbortController();
        const call = client.callTool({ name: 'alpha__wait', arguments: {} }, { signal: controller.signal });
        call.catch(() => undefined);
        await new Promise((done) => setTimeout(done, 1_000));
        controller.abort();
        await assert.rejects(call);
        await until(`the upstream to record the cancellation by the ${era} client`, async () =>
          (await cancelled()) === before + index + 1 ? true : undefined,
        );
      } finally {
        await client.close();
      }
    }
  });

  it('an upstream whose tool list changes: 2025 sessions (GET stream) and 2026 listen streams hear list_changed, and lists show the new tool', async () => {
    const legacy = await connect(`${replicas.a.base}/mcp`, '2025');
    const modern = await connect(`${replicas.b.base}/mcp`, '2026');
    const within = (what: string, heard: Promise<void>) =>
      Promise.race([
        heard,
        new Promise((_, reject) => setTimeout(() => reject(new Error(`no list_changed for the ${what} client within 10 s`)), 10_000)),
      ]);
    try {
      const legacyHeard = new Promise<void>((done) => legacy.setNotificationHandler('notifications/tools/list_changed', () => done()));
      const modernHeard = new Promise<void>((done) => modern.setNotificationHandler('notifications/tools/list_changed', () => done()));
      const subscription = await modern.listen({ toolsListChanged: true });
      assert.equal(subscription.honoredFilter.toolsListChanged, true);
      // Let the 2025 client's GET stream open before the change.
      await new Promise((done) => setTimeout(done, 500));
      assert.equal(text(await legacy.callTool({ name: 'alpha__grow', arguments: {} })), 'grown to 1');
      await within('2025', legacyHeard);
      await within('2026', modernHeard);
      await subscription.close();
      for (const client of [legacy, modern]) {
        const { tools } = await client.listTools(undefined, { cacheMode: 'refresh' });
        assert.ok(
          tools.some((t) => t.name === 'alpha__grown0'),
          tools.map((t) => t.name).join(', '),
        );
      }
    } finally {
      await legacy.close();
      await modern.close();
    }
  });

  it('resource subscriptions: a 2026 listen stream and a 2025 session each hear updates of the URI they subscribed to', async () => {
    const legacy = await connect(`${replicas.a.base}/mcp`, '2025');
    const modern = await connect(`${replicas.b.base}/mcp`, '2026');
    const heard = (client: Client) =>
      new Promise<string>((done) =>
        client.setNotificationHandler('notifications/resources/updated', (notification) => done(notification.params.uri)),
      );
    const within = <T>(what: string, promise: Promise<T>) =>
      Promise.race([
        promise,
        new Promise<T>((_, reject) =>
          setTimeout(() => reject(new Error(`no resources/updated for the ${what} client within 10 s`)), 10_000),
        ),
      ]);
    try {
      assert.equal(modern.getServerCapabilities()?.resources?.subscribe, true);
      const modernHeard = heard(modern);
      const legacyHeard = heard(legacy);
      const subscription = await modern.listen({ resourceSubscriptions: ['fix://static/b'] });
      assert.deepEqual(subscription.honoredFilter.resourceSubscriptions, ['fix://static/b']);
      await legacy.subscribeResource({ uri: 'fix://static/a' });
      const subscribed = (await readFile(cancelLog, 'utf8')).split('\n').filter((l) => l.startsWith('subscribed '));
      assert.deepEqual(
        subscribed.sort(),
        ['subscribed fix://static/a', 'subscribed fix://static/b'],
        'alpha, the owner, was subscribed once to each',
      );
      // Let the 2025 client's GET stream open before the updates.
      await new Promise((done) => setTimeout(done, 500));
      await legacy.callTool({ name: 'alpha__touch', arguments: { uri: 'fix://static/b' } });
      await legacy.callTool({ name: 'alpha__touch', arguments: { uri: 'fix://static/a' } });
      assert.equal(await within('2026', modernHeard), 'fix://static/b');
      assert.equal(await within('2025', legacyHeard), 'fix://static/a');
      await subscription.close();
    } finally {
      await legacy.close();
      await modern.close();
    }
  });
});
