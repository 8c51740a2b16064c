/**
 * The upstream's era follows the client's: a server that speaks both eras (fixtures/dual-era.mjs, an SDK v2 server)
 * is reached in the era of each client's request. A 2026-07-28 client gets the stdio server's own input_required
 * (its key `user_name`, its requestState) rather than Punk's bridged one; a 2025-era client gets the HTTP server's own
 * `elicitation/create`, which it sends only on a 2025-era connection; `protocolEra: '2025'` pins one connection.
 * Real gateway, governance and front on a MemoryBus; the upstreams are child processes.
 */
import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { connect as connectTcp, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, mcpServerSchema, streams } from '@punk/lib';
import express from 'express';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { createFront, type Front } from '../index.js';
import { freePort } from './replica-harness.js';

const log = createLogger('upstream-era-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const fixture = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/dual-era.mjs');

function text(result: { content?: unknown }): string {
  return (result.content as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/** Resolves once something listens on 127.0.0.1:`port`. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const up = await new Promise<boolean>((done) => {
      const socket = connectTcp(port, '127.0.0.1', () => {
        socket.destroy();
        done(true);
      });
      socket.once('error', () => {
        done(false);
      });
    });
    if (up) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error(`nothing listens on port ${String(port)}`);
}

void describe('an upstream of both eras, reached in the era of each client', { timeout: 120_000 }, () => {
  let bus: MemoryBus;
  let governance: GovernanceService;
  let gateway: Gateway;
  let database: ScratchDb;
  let front: Front;
  let http: HttpServer;
  let base: string;
  let workDir: string;
  let httpUpstream: ChildProcess;
  /** The HTTP upstream's record of the requests it saw cancelled (`cancelled <id>` lines). */
  let eventLog: string;
  const clients: Client[] = [];

  /** A connected client of `era` that answers every elicitation with the name Ada. */
  async function connect(era: '2025' | '2026', server: string): Promise<Client> {
    const client = new Client(
      { name: `era-${era}`, version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, ...(era === '2026' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
    );
    client.setRequestHandler('elicitation/create', () => Promise.resolve({ action: 'accept' as const, content: { name: 'Ada' } }));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/${server}/mcp`)));
    clients.push(client);
    return client;
  }

  before(async () => {
    const tenant = `era-${randomBytes(4).toString('hex')}`;
    workDir = await mkdtemp(join(tmpdir(), 'punk-era-'));
    const port = await freePort();
    eventLog = join(workDir, 'events.log');
    httpUpstream = spawn(process.execPath, [fixture, '--port', String(port)], {
      stdio: 'ignore',
      env: { ...process.env, EVENT_LOG: eventLog },
    });
    await listening(port);
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log });
    const server = (name: string, spec: Record<string, unknown>) =>
      mcpServerSchema.parse({ apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name, namespace: tenant }, spec });
    const stdio = { image: 'local/dual-era', command: [process.execPath, fixture, '--stdio'], transport: 'stdio' };
    database = await openScratchDb(log);
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [
        server('dual-stdio', stdio),
        server('pinned-stdio', { ...stdio, protocolEra: '2025' }),
        server('dual-http', { url: `http://127.0.0.1:${String(port)}/mcp` }),
      ],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
    });
    await gateway.ready();
    front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000 });
    const app = express();
    app.use(front.router);
    http = await new Promise<HttpServer>((done) => {
      const listener = app.listen(0, '127.0.0.1', () => {
        done(listener);
      });
    });
    base = `http://127.0.0.1:${String((http.address() as AddressInfo).port)}`;
  });

  after(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    await front.close();
    http.closeAllConnections();
    await new Promise((done) => http.close(done));
    await gateway.stop();
    await database.close();
    await governance.stop();
    await bus.close();
    httpUpstream.kill();
    await rm(workDir, { recursive: true, force: true });
  });

  void it("a 2026-07-28 client gets a stdio server's own input_required, and its retry the final result", async () => {
    const client = await connect('2026', 'dual-stdio');
    const first = (await client.callTool({ name: 'greet', arguments: {} }, { allowInputRequired: true })) as Record<string, unknown>;
    assert.equal(first['resultType'], 'input_required');
    assert.deepEqual(Object.keys(first['inputRequests'] as object), ['user_name'], "the server's own key");
    // A 2026-07-28 retry: the same request with the answers under the server's key and its requestState echoed.
    const retry = {
      name: 'greet',
      arguments: {},
      inputResponses: { user_name: { action: 'accept', content: { name: 'Ada' } } },
      requestState: first['requestState'] as string,
    } as Parameters<Client['callTool']>[0];
    const done = await client.callTool(retry, { allowInputRequired: true });
    assert.equal(text(done), 'Hello, Ada!');
    // The SDK's own retry loop gets there too.
    assert.equal(text(await client.callTool({ name: 'greet', arguments: {} })), 'Hello, Ada!');
  });

  void it("a 2025-era client gets an HTTP server's own elicitation/create, which it sends only in the 2025 era", async () => {
    const client = await connect('2025', 'dual-http');
    assert.equal(text(await client.callTool({ name: 'confirm', arguments: {} })), 'confirmed by Ada');
    assert.equal(text(await client.callTool({ name: 'greet', arguments: {} })), 'Hello, Ada!');
    // The 2026-07-28 client of the same server still gets its own input_required; its call in flight on the
    // 2026-07-28 connection is no candidate for the server's requests on the 2025 one.
    const modern = await connect('2026', 'dual-http');
    const slow = modern.callTool({ name: 'slow', arguments: {} });
    await new Promise((done) => setTimeout(done, 300));
    assert.equal(text(await client.callTool({ name: 'confirm', arguments: {} })), 'confirmed by Ada');
    assert.equal(text(await slow), 'slow done');
    const first = (await modern.callTool({ name: 'greet', arguments: {} }, { allowInputRequired: true })) as Record<string, unknown>;
    assert.deepEqual(Object.keys(first['inputRequests'] as object), ['user_name']);
  });

  void it("a client's cancellation reaches an HTTP upstream in both eras (2025: notifications/cancelled; 2026-07-28: its request stream ends)", async () => {
    const cancelledAtUpstream = async () => (await readFile(eventLog, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;
    for (const era of ['2025', '2026'] as const) {
      const client = await connect(era, 'dual-http');
      const before = await cancelledAtUpstream();
      const abort = new AbortController();
      const call = client.callTool({ name: 'hold', arguments: {} }, { signal: abort.signal });
      await new Promise((done) => setTimeout(done, 500));
      abort.abort('the user gave up');
      await assert.rejects(call);
      const deadline = Date.now() + 10_000;
      while ((await cancelledAtUpstream()) === before) {
        assert.ok(Date.now() < deadline, `the ${era} upstream request was not cancelled within 10 s`);
        await new Promise((done) => setTimeout(done, 100));
      }
      // The connection goes on serving calls after the cancellation.
      assert.equal(text(await client.callTool({ name: 'slow', arguments: {} })), 'slow done');
    }
  });

  void it('protocolEra pins one era: a 2026-07-28 client of a pinned 2025 stdio server gets input requests Punk holds', async () => {
    const client = await connect('2026', 'pinned-stdio');
    const first = (await client.callTool({ name: 'greet', arguments: {} }, { allowInputRequired: true })) as Record<string, unknown>;
    assert.equal(first['resultType'], 'input_required');
    const [key] = Object.keys(first['inputRequests'] as object);
    assert.match(key ?? '', /^[0-9a-f-]{36}$/, "a request Punk holds, keyed by its id, not the server's user_name");
    const retry = {
      name: 'greet',
      arguments: {},
      inputResponses: { [key ?? '']: { action: 'accept', content: { name: 'Ada' } } },
      requestState: first['requestState'] as string,
    } as Parameters<Client['callTool']>[0];
    assert.equal(text(await client.callTool(retry, { allowInputRequired: true })), 'Hello, Ada!');
    assert.equal(text(await client.callTool({ name: 'confirm', arguments: {} })), 'confirmed by Ada');
  });
});
