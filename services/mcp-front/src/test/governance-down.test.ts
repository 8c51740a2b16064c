/**
 * Governance down in one process (the embedded topology: mcp-front, gateway and governance on one MemoryBus). The
 * gateway decides calls in process and asks governance only when a McpPolicy rate limit covers the call (here `t01`).
 * First governance is stopped (nobody serves `punk.governance.check`): `t00` still runs, `t01` is refused with an
 * error naming governance and its subject, not a missing gateway or server, and the refusal is on the ledger. Then a
 * replica that never answers holds the subject (a hung governance): the error then names the deadline.
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
import {
  buckets,
  createLogger,
  deadlines,
  kvKey,
  mcpServerSchema,
  MemoryBus,
  streams,
  subjects,
  type BusSubscription,
  type LedgerEvent,
} from '@punk/lib';
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
  const policies = await bus.keyValue(buckets.mcpPolicies);
  await policies.put(kvKey(tenant, 'quota'), {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpPolicy',
    metadata: { name: 'quota', namespace: tenant },
    spec: { rateLimits: [{ name: 't01', tools: ['t01'], requests: 100_000, per: '1m' }] },
  });
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

/** The error of a tools/call of `name` through the server's own endpoint. */
async function callError(name = 't01'): Promise<ProtocolError> {
  const client = new Client({ name: 'governance-down-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/${tenant}/alpha/mcp`)));
  try {
    await client.callTool({ name, arguments: {} });
  } catch (error) {
    assert.ok(error instanceof ProtocolError, `expected a ProtocolError, got ${String(error)}`);
    return error;
  } finally {
    await client.close();
  }
  assert.fail('the call succeeded without governance');
}

/** The refusals the gateway recorded because governance could not be asked, oldest first. */
async function refusals(): Promise<LedgerEvent[]> {
  const stored = await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 });
  return stored
    .map((m) => m.data as LedgerEvent)
    .filter((e) => e.tenant === tenant && e.type === 'governance.decision' && e.data['rule'] === 'gateway/governance-unavailable');
}

void test('with governance stopped, an unlimited call still runs; a rate-limited one is refused naming governance and its subject, on the ledger', async () => {
  const governance = await startGovernance({ bus, log });
  const client = new Client({ name: 'governance-down-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/servers/${tenant}/alpha/mcp`)));
  assert.notEqual((await client.callTool({ name: 't01', arguments: {} })).isError, true, 'governance counts t01');
  await governance.stop();
  assert.notEqual((await client.callTool({ name: 't00', arguments: {} })).isError, true, 't00 needs no governance');
  await client.close();

  const error = await callError();
  assert.equal(error.code, -32603);
  const message =
    `tools/call t01 on server "alpha" was not run: governance did not answer on subject ${subjects.governanceCheck}: ` +
    'no governance replica is running (start the governance service)';
  assert.equal(error.message, message);
  assert.doesNotMatch(error.message, /gateway/);
  const recorded = await refusals();
  assert.equal(recorded.length, 1, 'the refusal is on the ledger');
  assert.equal(recorded[0]!.source, 'gateway');
  assert.equal(recorded[0]!.data['decision'], 'deny');
  assert.equal(recorded[0]!.data['target'], 't01');
  assert.equal(`tools/call t01 on server "alpha" was not run: ${String(recorded[0]!.data['reason'])}`, message);
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
      `tools/call t01 on server "alpha" was not run: governance did not answer within ${String(deadlines.governanceCheckMs)} ms on subject ${subjects.governanceCheck}`,
    );
    assert.ok(Date.now() - started >= deadlines.governanceCheckMs, 'the error came at the governance deadline');
    assert.equal((await refusals()).length, 2, 'this refusal is on the ledger too');
  } finally {
    await hung.unsubscribe();
  }
});
