/**
 * Governance down in one process (the embedded topology: mcp-front, gateway and governance on one MemoryBus):
 * a client's call is refused with an error naming governance and its subject, not a missing gateway or server.
 * First governance is stopped (nobody serves `punk.governance.check`), then a replica that never answers holds
 * the subject (a hung governance): the error then names the deadline.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { Client, ProtocolError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance } from '@punk/governance';
import { createLogger, deadlines, mcpServerSchema, MemoryBus, streams, subjects, type BusSubscription } from '@punk/lib';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { createFront, type Front } from '../index.js';
import { listen } from './listen.js';

const log = createLogger('governance-down-test', process.env.TEST_LOG_LEVEL ?? 'silent');
const fixtures = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/test/fixtures');
const tenant = `gov-down-${randomBytes(4).toString('hex')}`;

let bus: MemoryBus;
let gateway: Gateway;
let database: ScratchDb;
let front: Front;
let workDir: string;
let base: string;
let closeHttp: () => Promise<void>;

before(async () => {
  bus = new MemoryBus(log);
  await bus.ensureStream(streams.ledger);
  workDir = await mkdtemp(join(tmpdir(), 'punk-gov-down-'));
  database = await openScratchDb(log);
  const server = mcpServerSchema.parse({
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name: 'alpha', namespace: tenant },
    spec: { image: 'local/aggregate', command: [process.execPath, join(fixtures, 'aggregate-upstream.mjs'), 'full'] },
  });
  gateway = await startGateway({
    egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
    bus,
    log,
    db: database.db,
    servers: [server],
    workDir,
    startTimeoutMs: 30_000,
    callTimeoutMs: 30_000,
  });
  await gateway.ready();
  front = await createFront({ bus, log, tenant, maxBodyBytes: 64 * 1024, callTimeoutMs: 30_000 });
  const listening = await listen(front);
  base = listening.base;
  closeHttp = () => {
    listening.http.closeAllConnections();
    return new Promise((done) => {
      listening.http.close(() => {
        done();
      });
    });
  };
});

after(async () => {
  await front.close();
  await closeHttp();
  await gateway.stop();
  await database.close();
  await bus.close();
  await rm(workDir, { recursive: true, force: true });
});

/** The error of a tools/call through the server's own endpoint. */
async function callError(): Promise<ProtocolError> {
  const client = new Client({ name: 'governance-down-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/${tenant}/alpha/mcp`)));
  try {
    await client.callTool({ name: 't00', arguments: {} });
  } catch (error) {
    assert.ok(error instanceof ProtocolError, `expected a ProtocolError, got ${String(error)}`);
    return error;
  } finally {
    await client.close();
  }
  assert.fail('the call succeeded without governance');
}

void test('with governance running a call succeeds; stopped, the call is refused naming governance and its subject', async () => {
  const governance = await startGovernance({ bus, log });
  const client = new Client({ name: 'governance-down-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/${tenant}/alpha/mcp`)));
  const ok = await client.callTool({ name: 't00', arguments: {} });
  assert.notEqual(ok.isError, true);
  await client.close();
  await governance.stop();

  const error = await callError();
  assert.equal(error.code, -32603);
  assert.equal(
    error.message,
    `tools/call t00 on server "alpha" was not run: governance did not answer on subject ${subjects.governanceCheck}: ` +
      'no governance replica is running (start the governance service)',
  );
  assert.doesNotMatch(error.message, /gateway/);
});

void test('a governance replica that never answers: the call is refused at its deadline, naming governance, the deadline and the subject', async () => {
  // Holds the subject and never replies, as a hung governance process would.
  const hung: BusSubscription = await bus.serve(subjects.governanceCheck, () => new Promise<never>(() => undefined), {
    queue: 'governance',
  });
  try {
    const started = Date.now();
    const error = await callError();
    assert.equal(error.code, -32001);
    assert.equal(
      error.message,
      `tools/call t00 on server "alpha" was not run: governance did not answer within ${String(deadlines.governanceCheckMs)} ms on subject ${subjects.governanceCheck}`,
    );
    assert.ok(Date.now() - started >= deadlines.governanceCheckMs, 'the error came at the governance deadline');
  } finally {
    await hung.unsubscribe();
  }
});
