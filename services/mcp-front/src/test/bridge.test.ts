/**
 * Era bridging from a 2026-07-28 upstream: its `input_required` results reach a 2025-era client as
 * `elicitation/create` requests on the call's stream (the gateway's SDK client fulfils the input requests
 * through its own elicitation handler, which relays to the client of the call, and retries with the answers),
 * and reach a 2026-era client as `input_required` results of Punk's own (signed `requestState`). Real
 * gateway, governance and front on a MemoryBus; the upstream is fixtures/modern-upstream.mjs over HTTP.
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
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, mcpServerSchema, streams } from '@punk/lib';
import express from 'express';
import { createFront, type Front } from '../index.js';
import { freePort } from './replica-harness.js';

const log = createLogger('bridge-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const fixture = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures/modern-upstream.mjs');

function text(result: { content?: unknown }): string {
  return (result.content as { type: string; text?: string }[])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

describe('a 2026-07-28 upstream asking for input, behind clients of both eras', { timeout: 120_000 }, () => {
  let bus: MemoryBus;
  let governance: GovernanceService;
  let gateway: Gateway;
  let database: ScratchDb;
  let front: Front;
  let http: HttpServer;
  let base: string;
  let workDir: string;

  before(async () => {
    const tenant = `bridge-${randomBytes(4).toString('hex')}`;
    workDir = await mkdtemp(join(tmpdir(), 'punk-bridge-'));
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    governance = await startGovernance({ bus, log });
    const port = await freePort();
    const modern = mcpServerSchema.parse({
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: 'modern', namespace: tenant },
      spec: {
        image: 'local/modern',
        command: [process.execPath, fixture],
        transport: 'streamable-http',
        port,
        env: [{ name: 'PORT', value: String(port) }],
      },
    });
    database = await openScratchDb(log);
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [modern],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
    });
    await gateway.ready();
    assert.equal(gateway.catalog(tenant)[0]?.protocolVersion, '2026-07-28', 'the gateway speaks 2026-07-28 to the upstream');
    front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000 });
    const app = express();
    app.use(front.router);
    http = await new Promise<HttpServer>((done) => {
      const server = app.listen(0, '127.0.0.1', () => done(server));
    });
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  });

  after(async () => {
    await front?.close();
    http?.closeAllConnections();
    if (http) await new Promise((done) => http.close(done));
    await gateway?.stop();
    await database?.close();
    await governance?.stop();
    await bus?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  for (const era of ['2025', '2026'] as const) {
    it(`a ${era}-era client answers the upstream's input request and gets the final result`, async () => {
      const client = new Client(
        { name: 'bridge-test', version: '1.0.0' },
        { capabilities: { elicitation: { form: {} } }, ...(era === '2026' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
      );
      const asked: string[] = [];
      client.setRequestHandler('elicitation/create', async (request) => {
        asked.push(String(request.params.message));
        return { action: 'accept', content: { confirm: true } };
      });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
      try {
        assert.equal(client.getProtocolEra(), era === '2025' ? 'legacy' : 'modern');
        const result = await client.callTool({ name: 'modern__confirm', arguments: { action: 'deploy' } });
        assert.equal(text(result), 'deploy: confirm=true');
        assert.deepEqual(asked, ['Really deploy?']);
      } finally {
        await client.close();
      }
    });
  }

  it('a 2025-era client that declines is heard by the upstream', async () => {
    const client = new Client({ name: 'bridge-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler('elicitation/create', async () => ({ action: 'decline' }));
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/modern/mcp`)));
    try {
      assert.equal(text(await client.callTool({ name: 'confirm', arguments: { action: 'drop' } })), 'drop: declined (decline)');
    } finally {
      await client.close();
    }
  });

  it('two 2025-era clients calling at once on the shared connection each answer their own input request', async () => {
    const clients = await Promise.all(
      ['ann', 'bob'].map(async (who) => {
        const client = new Client({ name: who, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
        client.setRequestHandler('elicitation/create', async (request) => {
          // Both calls are in flight when the first question is answered.
          await new Promise((done) => setTimeout(done, 200));
          return { action: 'accept', content: { confirm: String(request.params.message).includes(who) } };
        });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
        return { who, client };
      }),
    );
    try {
      const results = await Promise.all(
        clients.map(({ who, client }) => client.callTool({ name: 'modern__confirm', arguments: { action: `${who}-task` } })),
      );
      assert.deepEqual(results.map(text), ['ann-task: confirm=true', 'bob-task: confirm=true']);
    } finally {
      await Promise.all(clients.map(({ client }) => client.close()));
    }
  });
});
