/**
 * Long calls through Punk, driven by real SDK clients of both eras over real HTTP, in front of the real
 * gateway and governance on a MemoryBus, with a small SDK v2 server whose `sleep` tool answers late
 * (fixtures/sleeper.mjs): a server's `spec.timeout` is the call's deadline end to end, and a call that
 * runs long keeps its connection busy with SSE keep-alive comments, with or without a progress token.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, loadConfig, MemoryBus, mcpServerSchema, streams, type McpServer } from '@punk/lib';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { createFront, frontOptionsOf, type Front } from '../index.js';
import { listen } from './listen.js';

const log = createLogger('long-calls-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const clientInfo = { name: 'long-calls-test', version: '1.0.0' };
const sleeper = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/sleeper.mjs');
/** The deployment's settings: `PUNK_CALL_TIMEOUT_MS` short, so the tests are quick, and keep-alive comments every 200 ms. */
const config = loadConfig({ PUNK_CALL_TIMEOUT_MS: '1000', PUNK_KEEPALIVE_MS: '200', PUNK_TOOL_TIMEOUTS: 'strict__sleep=500' });

/** A sleeper server of `tenant` named `name`, with `spec.timeout` when given. */
function sleeperServer(tenant: string, name: string, timeout?: string): McpServer {
  return mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace: tenant },
    spec: { image: 'local/sleeper', command: [process.execPath, sleeper], ...(timeout && { timeout }) },
  });
}

type Era = '2025' | '2026';

/** What one tools/call response looked like on the wire: its content type and its body as it arrived, chunk by chunk. */
interface Seen {
  contentType: string;
  chunks: string[];
}

/** A fetch that records the response of every `tools/call` POST into `seen`, as the client reads it. */
function tappingFetch(seen: Seen[]): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    const method = typeof init?.body === 'string' ? (JSON.parse(init.body) as { method?: string }).method : undefined;
    if (method !== 'tools/call' || response.body === null) return response;
    const record: Seen = { contentType: response.headers.get('content-type') ?? '', chunks: [] };
    seen.push(record);
    const decoder = new TextDecoder();
    const tap = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        record.chunks.push(decoder.decode(chunk, { stream: true }));
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(tap), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

async function connect(url: string, era: Era, fetchImpl?: typeof fetch): Promise<Client> {
  const client = new Client(clientInfo, era === '2026' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
  await client.connect(new StreamableHTTPClientTransport(new URL(url), fetchImpl ? { fetch: fetchImpl } : {}));
  return client;
}

function text(result: { content?: unknown }): string {
  return (result.content as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

void describe('long calls through Punk', { timeout: 180_000 }, () => {
  const tenant = `long-${randomBytes(4).toString('hex')}`;
  let bus: MemoryBus;
  let workDir: string;
  let governance: GovernanceService;
  let database: ScratchDb;
  let gateway: Gateway;
  let front: Front;
  let http: Awaited<ReturnType<typeof listen>>['http'];
  let base: string;

  before(async () => {
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    workDir = await mkdtemp(join(tmpdir(), 'punk-long-calls-'));
    governance = await startGovernance({ bus, log });
    database = await openScratchDb(log);
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [
        sleeperServer(tenant, 'patient', '4s'),
        sleeperServer(tenant, 'hasty', '300ms'),
        sleeperServer(tenant, 'plain'),
        sleeperServer(tenant, 'strict', '4s'),
      ],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: config.callTimeoutMs,
    });
    await gateway.ready();
    front = await createFront({ ...frontOptionsOf(config), bus, log, tenant });
    ({ http, base } = await listen(front));
  });

  after(async () => {
    await front.close();
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
    await gateway.stop();
    await database.close();
    await governance.stop();
    await bus.close();
    await rm(workDir, { recursive: true, force: true });
  });

  for (const era of ['2025', '2026'] as const) {
    void describe(`a ${era}-era client`, () => {
      void it("gets the result of a call longer than PUNK_CALL_TIMEOUT_MS within its server's longer spec.timeout (4s)", async () => {
        const client = await connect(`${base}/mcp`, era);
        try {
          const result = await client.callTool({ name: 'patient__sleep', arguments: { ms: 1800 } }, { timeout: 30_000 });
          assert.equal(result.isError, undefined, text(result));
          assert.equal(text(result), 'slept 1800');
        } finally {
          await client.close();
        }
      });

      void it("gets a tool error naming the server's short spec.timeout (300ms) when the call runs past it", async () => {
        const client = await connect(`${base}/mcp`, era);
        try {
          const started = Date.now();
          const result = await client.callTool({ name: 'hasty__sleep', arguments: { ms: 3000 } }, { timeout: 30_000 });
          assert.equal(result.isError, true);
          assert.match(text(result), /server [\w-]+\/hasty did not answer within 300 ms \(the server's spec\.timeout 300ms\)/);
          assert.ok(
            Date.now() - started < 2500,
            `the call ended at its deadline, not at the tool's end (${String(Date.now() - started)} ms)`,
          );
        } finally {
          await client.close();
        }
      });

      void it('is told PUNK_CALL_TIMEOUT_MS (1000 ms) bounded a call to a server without spec.timeout', async () => {
        const client = await connect(`${base}/mcp`, era);
        try {
          // The front and the gateway share the deadline: whichever notices first answers (an error or a tool error).
          const message = await client.callTool({ name: 'plain__sleep', arguments: { ms: 3000 } }, { timeout: 30_000 }).then(
            (result) => (result.isError === true ? text(result) : `unexpected result: ${text(result)}`),
            (error: unknown) => (error instanceof Error ? error.message : String(error)),
          );
          assert.match(message, /within 1000 ms \(PUNK_CALL_TIMEOUT_MS, the server sets no spec\.timeout\)/);
        } finally {
          await client.close();
        }
      });

      void it("is told PUNK_TOOL_TIMEOUTS (500 ms) cut a tool short on the front, within its server's longer spec.timeout", async () => {
        const client = await connect(`${base}/mcp`, era);
        try {
          await assert.rejects(client.callTool({ name: 'strict__sleep', arguments: { ms: 3000 } }, { timeout: 30_000 }), (error: Error) => {
            assert.match(
              error.message,
              /server "strict" did not answer tools\/call strict__sleep within 500 ms \(PUNK_TOOL_TIMEOUTS for strict__sleep\)/,
            );
            return true;
          });
        } finally {
          await client.close();
        }
      });

      void it('without a progress token, sees SSE keep-alive comments on the stream before the result of a long call', async () => {
        const seen: Seen[] = [];
        const client = await connect(`${base}/mcp`, era, tappingFetch(seen));
        try {
          const result = await client.callTool({ name: 'patient__sleep', arguments: { ms: 1200 } }, { timeout: 30_000 });
          assert.equal(text(result), 'slept 1200');
          assert.equal(seen.length, 1);
          const [call] = seen as [Seen];
          assert.match(call.contentType, /^text\/event-stream/);
          const raw = call.chunks.join('');
          assert.doesNotMatch(raw, /progressToken/);
          const result_ = raw.indexOf('"result"');
          const keepAlives = raw.slice(0, result_).match(/^: keepalive$/gm) ?? [];
          // 1200 ms at one comment per 200 ms: about six; at least three leaves room for a slow machine.
          assert.ok(keepAlives.length >= 3, `expected keep-alive comments before the result, got ${JSON.stringify(raw)}`);
          assert.ok(call.chunks.length >= 3, 'the comments arrived while the call ran, in chunks of their own');
        } finally {
          await client.close();
        }
      });
    });
  }
});
