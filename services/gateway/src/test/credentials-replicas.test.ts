/**
 * Two gateway replicas (each its own pool of database connections and vault, one bus between them) serve a server
 * whose `Authorization` header comes from a credential. Deleting the credential through either replica's admin
 * API stops both replicas sending its value (their servers fail naming the missing credential); creating it again
 * with a new value makes both send the new value. A `per-client` session of a server referencing it is closed and
 * reopened the same way. A server that references another credential is left alone.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { startGovernance } from '@punk/governance';
import {
  anonymousPrincipal,
  createLogger,
  MemoryBus,
  openDatabase,
  requestGateway,
  streams,
  subjects,
  type ServerCatalog,
} from '@punk/lib';
import { openScratchDb } from '../../../lib/dist/test/pgtest.js';
import { destinationPolicyOf, Keyring, parseEncryptionKey, referencesCredential, startGateway, type Gateway } from '../index.js';
import { adminOf, newKeySpec, newTenant } from './credentials-harness.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { manifest, waitFor } from './harness.js';

const log = createLogger('credentials-replicas-test', process.env.TEST_LOG_LEVEL ?? 'silent');

test('a server references a credential by cred:<id>, cred:<id>/<key> or valueFrom.credentialRef', () => {
  const server = manifest('t', 's', {
    url: 'http://127.0.0.1:1/mcp',
    headers: [
      { name: 'Authorization', value: 'cred:api' },
      { name: 'X-User', value: 'cred:basic/username' },
      { name: 'X-Key', valueFrom: { credentialRef: { name: 'keyed', key: 'value' } } },
      { name: 'X-Literal', value: 'api' },
    ],
  });
  for (const id of ['api', 'basic', 'keyed']) assert.ok(referencesCredential(server, id), id);
  for (const id of ['ap', 'apix', 'username', 'value', 'other']) assert.ok(!referencesCredential(server, id), id);
  const stdio = manifest('t', 'p', {
    image: 'local/p',
    command: ['node'],
    env: [
      { name: 'TOKEN', value: 'cred:envtoken' },
      { name: 'BAD', value: 'cred:' },
    ],
  });
  assert.ok(referencesCredential(stdio, 'envtoken'));
  assert.ok(!referencesCredential(stdio, 'api'));
});

test('deleting or re-creating a credential reconnects the servers that reference it on every replica', async (t) => {
  const upstream = await startProtectedMcpServer({ token: 'token-one' });
  t.after(() => upstream.close());
  const database = await openScratchDb(log);
  t.after(() => database.close());
  const key = newKeySpec();
  const tenant = newTenant();
  const workDir = await mkdtemp(join(tmpdir(), 'punk-credentials-replicas-'));
  t.after(() => rm(workDir, { recursive: true, force: true }));
  const bus = new MemoryBus(log);
  await bus.ensureStream(streams.ledger);
  t.after(() => bus.close());
  const governance = await startGovernance({ bus, log });
  t.after(() => governance.stop());
  const admin = (op: string, body: Record<string, unknown>) =>
    bus.request(subjects.gatewayAdmin, { op, tenant, principal: adminOf(tenant), ...body }, { timeoutMs: 20_000 });

  const protectedServer = manifest(tenant, 'protected', {
    url: upstream.url,
    headers: [{ name: 'Authorization', value: 'cred:upstream' }],
  });
  // Same upstream, another credential: a change of `upstream` must not touch it.
  const bystander = manifest(tenant, 'bystander', {
    url: upstream.url,
    headers: [{ name: 'Authorization', valueFrom: { credentialRef: { name: 'other', key: 'value' } } }],
  });
  const sessioned = manifest(tenant, 'sessioned', {
    url: upstream.url,
    sessionMode: 'per-client',
    headers: [{ name: 'Authorization', value: 'cred:upstream' }],
  });
  const sessionId = randomUUID();
  /** Calls `echo` of the per-client server in one client session (whichever replica takes it, the owner serves it). */
  const echo = (text: string) =>
    requestGateway(
      bus,
      {
        method: 'tools/call',
        tenant,
        server: 'sessioned',
        principal: anonymousPrincipal(tenant),
        runId: `run-${randomUUID()}`,
        name: 'echo',
        arguments: { text },
        sessionId,
      },
      30_000,
    );
  // The credentials exist before the replicas start, so both connect with them.
  const setupDb = await openDatabase({ url: database.url, log });
  const setup = await startGateway({
    bus,
    log,
    db: setupDb,
    servers: [],
    workDir: join(workDir, 'setup'),
    startTimeoutMs: 20_000,
    callTimeoutMs: 20_000,
    instanceId: 'setup',
    keyring: new Keyring(parseEncryptionKey(key, 'PUNK_ENCRYPTION_KEY'), []),
  });
  await admin('credentials.create', { body: { id: 'upstream', data: { value: 'Bearer token-one' } } });
  await admin('credentials.create', { body: { id: 'other', data: { value: 'Bearer token-one' } } });
  await setup.stop();
  await setupDb.close();

  const replica = async (name: string): Promise<Gateway> => {
    const db = await openDatabase({ url: database.url, log });
    const gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db,
      servers: [protectedServer, bystander, sessioned],
      workDir: join(workDir, name),
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
      instanceId: name,
      keyring: new Keyring(parseEncryptionKey(key, 'PUNK_ENCRYPTION_KEY'), []),
    });
    t.after(async () => {
      await gateway.stop();
      await db.close();
    });
    return gateway;
  };
  const replicas = [await replica('gateway-a'), await replica('gateway-b')];
  await Promise.all(replicas.map((r) => r.ready()));
  const entry = (gateway: Gateway, name: string): ServerCatalog => gateway.catalog(tenant).find((c) => c.name === name)!;
  for (const gateway of replicas)
    for (const name of ['protected', 'bystander']) assert.equal(entry(gateway, name).state, 'ready', entry(gateway, name).lastError);

  assert.deepEqual(await echo('one'), { content: [{ type: 'text', text: 'one' }] });

  // Delete: both replicas reconnect (the one that answered before answering), and fail naming the credential.
  const beforeDelete = upstream.requests.length;
  await admin('credentials.delete', { id: 'upstream' });
  await waitFor(() => replicas.every((r) => entry(r, 'protected').state === 'failed'), 15_000, 'both replicas failing the server');
  for (const gateway of replicas) {
    assert.match(entry(gateway, 'protected').lastError ?? '', new RegExp(`credential upstream not found in tenant ${tenant}`));
    assert.equal(entry(gateway, 'bystander').state, 'ready', 'a server referencing another credential is not reconnected');
  }
  // The client session's upstream was closed too: its next call connects again, and cannot.
  const refused = (await echo('after delete')) as { content: { text: string }[]; isError?: boolean };
  assert.equal(refused.isError, true);
  assert.match(
    refused.content[0]!.text,
    new RegExp(
      `^server sessioned is unavailable \\(failed: server ${tenant}/sessioned: header Authorization: credential upstream not found in tenant ${tenant}\\)$`,
    ),
  );
  // The fixture refuses nothing it was not sent: no request after the delete carried the deleted value.
  const afterDelete = upstream.requests.slice(beforeDelete);
  assert.ok(
    afterDelete.every((r) => r.headers.authorization !== 'Bearer token-one' || r.method === 'DELETE'),
    JSON.stringify(afterDelete.map((r) => [r.method, r.headers.authorization])),
  );

  // Re-create with a new value: both replicas connect with it (the fixture now accepts only the new token).
  upstream.requireToken('token-two');
  const beforeCreate = upstream.requests.length;
  await admin('credentials.create', { body: { id: 'upstream', data: { value: 'Bearer token-two' } } });
  await waitFor(() => replicas.every((r) => entry(r, 'protected').state === 'ready'), 15_000, 'both replicas serving the server again');
  assert.deepEqual(await echo('two'), { content: [{ type: 'text', text: 'two' }] });
  const afterCreate = upstream.requests.slice(beforeCreate);
  assert.ok(
    afterCreate.filter((r) => r.headers.authorization === 'Bearer token-two' && r.refused === undefined).length >= 2,
    'each replica connected with the new value',
  );
  assert.ok(afterCreate.every((r) => r.headers.authorization !== 'Bearer token-one' || r.method === 'DELETE'));
});
