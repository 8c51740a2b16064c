/**
 * An input_required round a 2026-07-28 client abandons, over a shared 2025-era upstream connection (a stdio
 * server that asks with real `elicitation/create` requests): other clients' calls that ask for input meanwhile
 * are answered by their own clients (not refused as ambiguous), and the abandoned round ends when the
 * `requestState` minted for it expires, not at the gateway's pending bound (5 minutes). Real gateway,
 * governance and front on a MemoryBus; the upstream is fixtures/legacy-asking.mjs.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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

const log = createLogger('abandoned-round-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const fixture = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/legacy-asking.mjs');
/** Lifetime of the requestState the front mints: the bound of a round. */
const REQUEST_STATE_TTL_MS = 4_000;

function text(result: { content?: unknown }): string {
  return (result.content as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

void describe('an abandoned input_required round on a shared 2025-era upstream', { timeout: 120_000 }, () => {
  let bus: MemoryBus;
  let governance: GovernanceService;
  let gateway: Gateway;
  let database: ScratchDb;
  let front: Front;
  let http: HttpServer;
  let url: URL;
  let workDir: string;
  const clients: Client[] = [];

  /** A connected client of `era` whose elicitation handler is `answer`. */
  async function connect(era: '2025' | '2026', answer: (message: string) => Promise<{ action: 'accept'; content: { name: string } }>) {
    const client = new Client(
      { name: `abandoned-round-${era}`, version: '1.0.0' },
      { capabilities: { elicitation: { form: {} } }, ...(era === '2026' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
    );
    client.setRequestHandler('elicitation/create', (request) => answer(request.params.message));
    await client.connect(new StreamableHTTPClientTransport(url));
    clients.push(client);
    assert.equal(client.getProtocolEra(), era === '2025' ? 'legacy' : 'modern');
    return client;
  }

  before(async () => {
    const tenant = `abandon-${randomBytes(4).toString('hex')}`;
    workDir = await mkdtemp(join(tmpdir(), 'punk-abandon-'));
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log });
    const asking = mcpServerSchema.parse({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'asking', namespace: tenant },
      // Pinned to 2025: one shared connection, whatever the era of its clients.
      spec: { image: 'local/asking', command: [process.execPath, fixture], transport: 'stdio', protocolEra: '2025' },
    });
    database = await openScratchDb(log);
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [asking],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 60_000,
    });
    await gateway.ready();
    front = await createFront({
      bus,
      log,
      tenant,
      maxBodyBytes: 1024 * 1024,
      callTimeoutMs: 60_000,
      requestStateTtlMs: REQUEST_STATE_TTL_MS,
    });
    const app = express();
    app.use(front.router);
    http = await new Promise<HttpServer>((done) => {
      const server = app.listen(0, '127.0.0.1', () => {
        done(server);
      });
    });
    url = new URL(`http://127.0.0.1:${String((http.address() as AddressInfo).port)}/servers/asking/mcp`);
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
    await rm(workDir, { recursive: true, force: true });
  });

  void it("leaves other clients' input requests to them, and ends when its requestState expires", async () => {
    // Ann's client is asked, and never answers (its retry never comes).
    let asked!: (message: string) => void;
    const annAsked = new Promise<string>((done) => (asked = done));
    const ann = await connect('2026', (message) => {
      asked(message);
      return new Promise(() => undefined);
    });
    const abandoned = ann.callTool({ name: 'ask', arguments: { who: 'ann' } }).catch((error: unknown) => error);
    assert.equal(await annAsked, 'Name for ann?');
    const heldSince = Date.now();

    // Meanwhile clients of both eras ask on the same upstream connection, and answer their own questions.
    const bob = await connect('2026', () => Promise.resolve({ action: 'accept', content: { name: 'Bob' } }));
    assert.equal(text(await bob.callTool({ name: 'ask', arguments: { who: 'bob' } })), 'bob: Bob');
    const cat = await connect('2025', () => Promise.resolve({ action: 'accept', content: { name: 'Cat' } }));
    assert.equal(text(await cat.callTool({ name: 'ask', arguments: { who: 'cat' } })), 'cat: Cat');
    assert.ok(Date.now() - heldSince < REQUEST_STATE_TTL_MS, "both answered while ann's round was still held");

    // Ann's round ends with her requestState's lifetime: the upstream hears an error for its request.
    let ended: string[] = [];
    while (!ended.some((line) => line.startsWith('ann: '))) {
      assert.ok(Date.now() - heldSince < REQUEST_STATE_TTL_MS + 5_000, `the upstream still waits for ann: ${JSON.stringify(ended)}`);
      await new Promise((done) => setTimeout(done, 200));
      ended = JSON.parse(text(await cat.callTool({ name: 'ended' }))) as string[];
    }
    assert.ok(Date.now() - heldSince >= REQUEST_STATE_TTL_MS, 'not before the requestState expired');
    assert.match(ended.find((line) => line.startsWith('ann: ')) ?? '', /did not retry with an answer to elicitation\/create/);
    assert.deepEqual(
      ended.filter((line) => !line.startsWith('ann: ')),
      [],
      'no other ask failed',
    );
    void abandoned;
  });
});
