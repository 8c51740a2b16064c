/**
 * The raw HTTP exchange (http-exchange.ts) against the SDK client's requests, on one connection to one Streamable
 * HTTP server Punk starts (mcp-front's fixtures/wire-shapes.mjs over HTTP), in both eras: the same request gets the
 * same result, byte for byte once serialized (2026-07-28: the same JSON up to the order of keys, which the SDK's parse of
 * the result changes, putting `_meta` first, and the raw exchange keeps as the server sent it), or the same error, for text, structured, several items, a tool error,
 * a large result, progress before the answer, a protocol error, an unknown tool, resources/read and prompts/get; the
 * progress notifications the upstream sent reach the connection's handler on both paths alike.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { ProtocolError, type Tool } from '@modelcontextprotocol/client';
import { createLogger } from '@punk/lib';
import { openConnection, type Connection, type ProtocolEra } from '../connect.js';
import { sdkExchange, type ExchangedMethod, type UpstreamExchange } from '../upstream-exchange.js';
import { manifest } from './harness.js';

const shapes = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../mcp-front/src/test/fixtures/wire-shapes.mjs');

const REQUESTS: Record<string, { method: ExchangedMethod; params: Record<string, unknown> }> = {
  text: { method: 'tools/call', params: { name: 'text', arguments: { say: 'hi' } } },
  structured: { method: 'tools/call', params: { name: 'structured', arguments: { n: 5 } } },
  many: { method: 'tools/call', params: { name: 'many', arguments: {} } },
  'tool error': { method: 'tools/call', params: { name: 'fails', arguments: {} } },
  large: { method: 'tools/call', params: { name: 'large', arguments: { kib: 1024 } } },
  progress: { method: 'tools/call', params: { name: 'progress', arguments: {}, _meta: { progressToken: 'p-1' } } },
  'protocol error': { method: 'tools/call', params: { name: 'throws', arguments: {} } },
  'unknown tool': { method: 'tools/call', params: { name: 'absent', arguments: {} } },
  'resources/read': { method: 'resources/read', params: { uri: 'wire://doc' } },
  'prompts/get': { method: 'prompts/get', params: { name: 'greet', arguments: { who: 'you' } } },
};

/** JSON with every object's keys sorted. */
function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

/** What one request gave: its result serialized (keys sorted with `sorted`), or its error's class, code, message and data. */
async function outcome(
  exchange: UpstreamExchange,
  method: ExchangedMethod,
  params: Record<string, unknown>,
  sorted: boolean,
): Promise<string> {
  try {
    const answer = await exchange.request(method, params, { timeout: 15_000, allowInputRequired: true });
    return sorted ? sortedJson(answer.result) : JSON.stringify(answer.result);
  } catch (error) {
    if (error instanceof ProtocolError) return JSON.stringify({ protocolError: error.code, message: error.message, data: error.data });
    throw error;
  }
}

for (const era of ['legacy', 'modern'] as ProtocolEra[]) {
  describe(`an HTTP upstream in the ${era === 'modern' ? '2026-07-28' : '2025'} era`, () => {
    it('answers the raw exchange as it answers the SDK client, and sends the same progress', async (t) => {
      const workDir = await mkdtemp(join(tmpdir(), 'punk-http-exchange-'));
      const progress: Record<string, unknown>[] = [];
      const server = manifest('t', 'shapes', {
        image: 'local/shapes',
        command: [process.execPath, shapes],
        args: ['http', '$(PORT)'],
        transport: 'streamable-http',
        path: '/mcp',
      });
      const connection: Connection = await openConnection(server, {
        log: createLogger('http-exchange-test', 'silent'),
        workDir,
        timeoutMs: 20_000,
        era,
        onListChanged: () => undefined,
        onServerRequest: () => Promise.resolve({}),
        onProgress: (params) => void progress.push(params),
        onResourceUpdated: () => undefined,
        onLog: () => undefined,
      });
      t.after(async () => {
        await connection.client.close();
        await connection.process?.stop();
        await rm(workDir, { recursive: true, force: true });
      });
      assert.equal(connection.client.getProtocolEra(), era);
      const raw = connection.exchange;
      assert.ok(raw, 'a Streamable HTTP connection has an exchange of its own');
      const tools = new Map((await connection.client.listTools()).tools.map((tool) => [tool.name, tool]));
      const definition = (name: string): Tool => {
        const { outputSchema: _unchecked, ...tool } = tools.get(name) ?? { name, inputSchema: { type: 'object' as const } };
        return tool as Tool;
      };
      const sdk = sdkExchange(connection.client, definition);
      const text = await raw.request('tools/call', { name: 'text', arguments: { say: 'hi' } }, { timeout: 15_000 });
      assert.ok(text.text !== undefined, 'the raw exchange read the answer off the wire itself');

      for (const [what, { method, params }] of Object.entries(REQUESTS)) {
        progress.length = 0;
        const viaSdk = await outcome(sdk, method, params, era === 'modern');
        const sdkProgress = progress.splice(0);
        const viaRaw = await outcome(raw, method, params, era === 'modern');
        // The SDK dispatches notifications a microtask late.
        await new Promise((resolve) => setImmediate(resolve));
        assert.equal(viaRaw, viaSdk, `${what}: the same result on both paths`);
        assert.deepEqual(progress, sdkProgress, `${what}: the same progress on both paths`);
        if (what === 'progress') assert.equal(progress.length, 2, 'both progress notifications came');
      }
    });
  });
}
