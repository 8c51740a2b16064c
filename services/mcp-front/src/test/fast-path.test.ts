/**
 * The front's fast path (fast-path.ts) against its SDK path: two fronts of one tenant on one MemoryBus, in front of
 * the real gateway and governance and one upstream (fixtures/wire-shapes.mjs), one with the fast path and one
 * without. The same raw HTTP request, in both eras, gets the same status, content type and body bytes from both,
 * for every shape of result (text, structured, several items, tool error, large, progress first, protocol error,
 * unknown tool, resources/read, prompts/get); `punk_mcp_front_fast_path_requests_total` shows which front took it.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, mcpServerSchema, streams } from '@punk/lib';
import { register } from 'prom-client';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { createFront, type Front } from '../index.js';
import { listen } from './listen.js';

const log = createLogger('fast-path-test', 'silent');
const fixture = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/wire-shapes.mjs');
const clientInfo = { name: 'fast-path-test', version: '1.0.0' };
const V2026 = '2026-07-28';

interface Answer {
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * Posts one JSON-RPC message; the answer's body with the SSE event ids of a resumable stream (random per stream, on
 * the SDK path only: the fast path takes no resumable stream) put as `id: <event>`.
 */
async function post(url: string, body: unknown, headers: Record<string, string>): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, contentType: response.headers.get('content-type'), body: text.replace(/^id: .*$/gm, 'id: <event>') };
}

/** A 2025-era session at `version` on `url`: its headers for later requests. */
async function session(url: string, version: string): Promise<Record<string, string>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: version, capabilities: {}, clientInfo },
    }),
  });
  await response.text();
  const id = response.headers.get('mcp-session-id');
  assert.ok(id, `initialize at ${version} gave no session`);
  const headers = { 'mcp-session-id': id, 'mcp-protocol-version': version };
  await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  return headers;
}

/** The forwarded requests of the test, by a name for the failure message. */
const REQUESTS: Record<string, { method: string; params: Record<string, unknown> }> = {
  text: { method: 'tools/call', params: { name: 'text', arguments: { say: 'hi' } } },
  structured: { method: 'tools/call', params: { name: 'structured', arguments: { n: 5 } } },
  many: { method: 'tools/call', params: { name: 'many', arguments: {} } },
  'tool error': { method: 'tools/call', params: { name: 'fails' } },
  large: { method: 'tools/call', params: { name: 'large', arguments: { kib: 256 } } },
  progress: { method: 'tools/call', params: { name: 'progress', arguments: {}, _meta: { progressToken: 'p-1' } } },
  'protocol error': { method: 'tools/call', params: { name: 'throws', arguments: {} } },
  'unknown tool': { method: 'tools/call', params: { name: 'absent', arguments: {} } },
  'invalid arguments': { method: 'tools/call', params: { name: 'structured', arguments: { n: 'five' } } },
  'resources/read': { method: 'resources/read', params: { uri: 'wire://doc' } },
  'prompts/get': { method: 'prompts/get', params: { name: 'greet', arguments: { who: 'you' } } },
};

async function fastPathCount(): Promise<number> {
  const metric = await register.getSingleMetric('punk_mcp_front_fast_path_requests_total')?.get();
  return (metric?.values ?? []).reduce((sum, value) => sum + value.value, 0);
}

describe('the fast path writes the bytes the SDK path writes', { timeout: 180_000 }, () => {
  const tenant = `fast-${randomBytes(4).toString('hex')}`;
  let bus: MemoryBus;
  let governance: GovernanceService;
  let database: ScratchDb;
  let gateway: Gateway;
  let workDir: string;
  const fronts: { front: Front; http: HttpServer; url: string }[] = [];

  before(async () => {
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    workDir = await mkdtemp(join(tmpdir(), 'punk-fast-path-'));
    governance = await startGovernance({ bus, log });
    database = await openScratchDb(log);
    const server = mcpServerSchema.parse({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'shapes', namespace: tenant },
      spec: { image: 'local/wire-shapes', command: [process.execPath, fixture] },
    });
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [server],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
    });
    await gateway.ready();
    for (const fastPath of [true, false]) {
      const front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000, fastPath });
      const { http, base } = await listen(front);
      fronts.push({ front, http, url: `${base}/servers/shapes/mcp` });
    }
  });

  after(async () => {
    for (const { front, http } of fronts) {
      await front.close();
      http.closeAllConnections();
      await new Promise((done) => http.close(done));
    }
    await gateway?.stop();
    await database?.close();
    await governance?.stop();
    await bus?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  /** The answers of the fast front and the SDK front to one request, and how many the fast path took. */
  async function both(send: (url: string, index: number) => Promise<Answer>): Promise<{ fast: Answer; sdk: Answer; taken: number }> {
    const before = await fastPathCount();
    const fast = await send(fronts[0]!.url, 0);
    const taken = (await fastPathCount()) - before;
    const sdk = await send(fronts[1]!.url, 1);
    assert.equal((await fastPathCount()) - before, taken, 'the front without the fast path took none');
    return { fast, sdk, taken };
  }

  for (const version of ['2025-06-18', '2025-11-25']) {
    it(`2025 era at ${version}: the same SSE bytes for every shape of result`, async () => {
      const sessions = [await session(fronts[0]!.url, version), await session(fronts[1]!.url, version)];
      let id = 1;
      for (const [what, request] of Object.entries(REQUESTS)) {
        const body = { jsonrpc: '2.0', id: id++, ...request };
        const { fast, sdk, taken } = await both((url, index) => post(url, body, sessions[index]!));
        assert.deepEqual(fast, sdk, `${what} at ${version}`);
        assert.equal(fast.status, 200, `${what}: ${fast.body}`);
        // At 2025-11-25 a call with a progress token is answered on a resumable stream, which stays on the SDK path.
        const resumable = version === '2025-11-25' && 'progressToken' in ((request.params['_meta'] as object | undefined) ?? {});
        assert.equal(taken, resumable ? 0 : 1, `${what} at ${version}: fast path taken`);
      }
    });
  }

  it('2026-07-28: the same JSON (or SSE, after progress) bytes for every shape of result', async () => {
    let id = 1;
    for (const [what, request] of Object.entries(REQUESTS)) {
      const envelope = {
        'io.modelcontextprotocol/protocolVersion': V2026,
        'io.modelcontextprotocol/clientInfo': clientInfo,
        'io.modelcontextprotocol/clientCapabilities': {},
      };
      const params = { ...request.params, _meta: { ...(request.params['_meta'] as object | undefined), ...envelope } };
      const body = { jsonrpc: '2.0', id: id++, method: request.method, params };
      const name = String(request.params['name'] ?? request.params['uri']);
      const headers = { 'mcp-protocol-version': V2026, 'mcp-method': request.method, 'mcp-name': name };
      const { fast, sdk, taken } = await both((url) => post(url, body, headers));
      assert.deepEqual(fast, sdk, `${what} at ${V2026}`);
      assert.equal(taken, 1, `${what}: fast path taken`);
    }
  });

  it('what the fast path does not take goes to the SDK path, which answers it as before', async () => {
    const headers = await session(fronts[0]!.url, '2025-11-25');
    const before = await fastPathCount();
    // A batch, a task-augmented call and a listing are the SDK's.
    const listing = await post(fronts[0]!.url, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers);
    assert.match(listing.body, /"name":"structured"/);
    const task = await post(
      fronts[0]!.url,
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'text', arguments: { say: 'x' }, task: { ttl: 1000 } } },
      headers,
    );
    assert.equal(task.status, 200, task.body);
    assert.equal((await fastPathCount()) - before, 0);
  });
});
