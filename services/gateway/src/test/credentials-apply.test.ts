/**
 * `credentials.apply` on `punk.gateway.admin`, as the operator drives it for an McpCredential: a private NATS, a
 * scratch Postgres database, a gateway with a vault key, governance, a counter server whose env comes from the
 * credential, and a real OAuth 2.0 token endpoint. An apply creates, a new checksum replaces (the server is
 * reconnected with the new value), the same checksum changes nothing, and a token the gateway rotated survives a
 * resync; every answer says the credential came from a Secret, and never holds a value.
 */
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startGovernance, type GovernanceService } from '@punk/governance';
import {
  anonymousPrincipal,
  createLogger,
  NatsBus,
  PunkError,
  requestGateway,
  streams,
  subjects,
  type GatewayRequest,
  type LedgerEvent,
  type Principal,
} from '@punk/lib';
import { destinationPolicyOf, startGateway, type Gateway } from '../index.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';
import { keyringOf, newKeySpec } from './credentials-harness.js';
import { startOAuthTokenServer, type OAuthTokenServer } from './fixtures/oauth-token-server.js';
import { fixture, manifest, waitFor } from './harness.js';

const log = createLogger('credentials-apply-test', process.env.TEST_LOG_LEVEL ?? 'silent');

describe('credentials.apply', () => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const operator: Principal = { subject: 'system:serviceaccount:punk-system:punk-operator', tenant, groups: [], scopes: ['punk:admin'] };
  let nats: PrivateNats;
  let bus: NatsBus;
  let database: ScratchDb;
  let governance: GovernanceService;
  let gateway: Gateway;
  let tokens: OAuthTokenServer;
  let workDir: string;
  const events: LedgerEvent[] = [];
  const answers: unknown[] = [];

  const admin = async (request: Record<string, unknown>): Promise<any> => {
    const answer = await bus.request(subjects.gatewayAdmin, { tenant, principal: operator, ...request }, { timeoutMs: 30_000 });
    answers.push(answer);
    return answer;
  };
  const apply = (body: Record<string, unknown>, sourceChecksum: string) => admin({ op: 'credentials.apply', body, sourceChecksum });
  const digest = (value: string) => createHash('sha256').update(value).digest('hex');
  /** The SHA-256 of each variable of the environment server `reader` (or `server`) runs with, through a real tools/call. */
  const envOfReader = async (server = 'reader') => {
    const request = {
      method: 'tools/call',
      tenant,
      server,
      principal: anonymousPrincipal(tenant),
      runId: `run-${randomUUID()}`,
      name: 'env',
      arguments: {},
    } as GatewayRequest;
    const result = (await requestGateway(bus, request, 30_000)) as { content: { text: string }[] };
    const text = result.content[0]!.text;
    // Punk masks credential values in results, so the server reports their SHA-256 (see digest()).
    return text.startsWith('{') ? (JSON.parse(text) as { envSha256: Record<string, string> }).envSha256 : {};
  };
  const credentialEvents = () => events.filter((e) => e.tenant === tenant && e.type.startsWith('credential.'));

  before(async () => {
    nats = await startPrivateNats();
    workDir = await mkdtemp(join(tmpdir(), 'punk-apply-'));
    database = await openScratchDb(log);
    tokens = await startOAuthTokenServer({ clientId: 'punk-gateway' });
    bus = await NatsBus.connect({ url: nats.url, name: 'credentials-apply-test', log });
    await bus.ensureStream(streams.ledger);
    await bus.consume(streams.ledger.name, 'test-reader', async (batch) => void events.push(...batch.map((m) => m.data as LedgerEvent)));
    governance = await startGovernance({ bus, log });
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      keyring: keyringOf(newKeySpec()),
      servers: [
        manifest(tenant, 'reader', {
          image: 'local/counter',
          command: [process.execPath, fixture('counter.mjs')],
          env: [{ name: 'API_KEY', valueFrom: { credentialRef: { name: 'github' } } }],
        }),
        manifest(tenant, 'crm-reader', {
          image: 'local/counter',
          command: [process.execPath, fixture('counter.mjs')],
          env: [{ name: 'CRM_TOKEN', valueFrom: { credentialRef: { name: 'crm', key: 'access_token' } } }],
        }),
      ],
      workDir,
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
    });
  });

  after(async () => {
    await gateway?.stop();
    await governance?.stop();
    await bus?.close();
    await tokens?.close();
    await database?.close();
    await nats?.stop();
    await rm(workDir, { recursive: true, force: true });
  });

  it('creates a credential from a Secret, marked as such, and a server referencing it gets its value', async () => {
    const created = await apply({ id: 'github', data: { value: 'secret-v1' } }, 'sha256:aaa');
    assert.equal(created.outcome, 'created');
    assert.equal(created.credential.source, 'secret');
    assert.equal(created.credential.sourceChecksum, 'sha256:aaa');
    assert.deepEqual(created.credential.keys, ['value']);
    assert.equal(created.credential.createdBy, operator.subject);
    const { credential } = await admin({ op: 'credentials.get', id: 'github' });
    assert.deepEqual(credential, created.credential);
    await waitFor(() => credentialEvents().length >= 1, 10_000, 'credential.created on the ledger');
    assert.deepEqual(
      credentialEvents().map((e) => [e.type, e.data]),
      [['credential.created', { id: 'github', type: 'static', keys: ['value'], source: 'secret' }]],
    );
    // The server could not start without the credential; it is reconnected once the credential exists.
    await waitFor(
      async () => (await envOfReader().catch(() => ({}) as Record<string, string>)).API_KEY === digest('secret-v1'),
      20_000,
      'reader started with the credential',
    );
  });

  it('a new checksum replaces the keys and reconnects the servers that reference it', async () => {
    const replaced = await apply({ id: 'github', data: { value: 'secret-v2' } }, 'sha256:bbb');
    assert.equal(replaced.outcome, 'replaced');
    assert.equal(replaced.credential.sourceChecksum, 'sha256:bbb');
    assert.ok(replaced.credential.updatedAt > replaced.credential.createdAt);
    await waitFor(
      async () => (await envOfReader().catch(() => ({}) as Record<string, string>)).API_KEY === digest('secret-v2'),
      20_000,
      'reader reconnected with v2',
    );
    await waitFor(() => credentialEvents().length >= 2, 10_000);
    assert.deepEqual(credentialEvents()[1]!.type, 'credential.replaced');
    assert.equal(credentialEvents()[1]!.principal?.subject, operator.subject);
  });

  it('the same checksum changes nothing, whatever the body says', async () => {
    const before = (await admin({ op: 'credentials.get', id: 'github' })).credential;
    const again = await apply({ id: 'github', data: { value: 'secret-v3' } }, 'sha256:bbb');
    assert.equal(again.outcome, 'unchanged');
    assert.deepEqual(again.credential, before);
    assert.equal((await envOfReader()).API_KEY, digest('secret-v2'));
    assert.equal(credentialEvents().length, 2, 'no event for a no-op');
  });

  it('a token the gateway rotated survives a resync with the same checksum; a new checksum resets the refresh state', async () => {
    const grant = tokens.issueGrant();
    // Expired already: the reader's next connect refreshes it at the token endpoint.
    const secret = {
      access_token: grant.accessToken,
      refresh_token: grant.refreshToken,
      expires_at: Date.now() - 1000,
      token_url: tokens.tokenUrl,
      client_id: 'punk-gateway',
    };
    const created = await apply({ id: 'crm', type: 'oauth2', data: secret }, 'sha256:crm-1');
    assert.equal(created.outcome, 'created');
    let rotated = '';
    await waitFor(
      async () => {
        rotated = (await envOfReader('crm-reader').catch(() => ({}) as Record<string, string>)).CRM_TOKEN ?? '';
        return rotated !== '' && rotated !== digest(grant.accessToken);
      },
      20_000,
      'the reader got a refreshed token',
    );
    assert.ok(tokens.issuedTokens().map(digest).includes(rotated), 'the token endpoint issued it');
    const refreshed = (await admin({ op: 'credentials.get', id: 'crm' })).credential;
    assert.ok(refreshed.lastRefreshAt, 'lastRefreshAt is set after the rotation');
    assert.ok(Date.parse(refreshed.expiresAt) > Date.now(), "expiresAt is the new token's");
    assert.equal(refreshed.refreshError, undefined);

    // The operator resyncs the unchanged Secret (which still holds the spent refresh token).
    const resync = await apply({ id: 'crm', type: 'oauth2', data: secret }, 'sha256:crm-1');
    assert.equal(resync.outcome, 'unchanged');
    assert.deepEqual(resync.credential, refreshed);
    assert.equal((await envOfReader('crm-reader')).CRM_TOKEN, rotated, 'the rotated token is still served');
    assert.equal(tokens.reusedRefreshTokens, 0, 'the spent refresh token was never sent again');

    // The Secret changed: its content wins, the refresh state starts over.
    const next = tokens.issueGrant();
    const replaced = await apply(
      {
        id: 'crm',
        type: 'oauth2',
        data: { ...secret, access_token: next.accessToken, refresh_token: next.refreshToken, expires_at: next.expiresAt },
      },
      'sha256:crm-2',
    );
    assert.equal(replaced.outcome, 'replaced');
    assert.equal(replaced.credential.lastRefreshAt, undefined);
    assert.equal(replaced.credential.expiresAt, new Date(next.expiresAt).toISOString());
    await waitFor(
      async () => (await envOfReader('crm-reader').catch(() => ({}) as Record<string, string>)).CRM_TOKEN === digest(next.accessToken),
      20_000,
      "the reader reconnected with the new Secret's token",
    );
  });

  it('refuses a bad body naming the field, and lists credentials with their source', async () => {
    await assert.rejects(
      apply({ id: 'Bad_Id', data: { value: 'x' } }, 'sha256:x'),
      (e: PunkError) => e.code === 'InvalidCredential' && /^id: /.test(e.message),
    );
    await assert.rejects(
      admin({ op: 'credentials.apply', body: { id: 'x', data: { value: 'x' } } }),
      (e: PunkError) => e.code === 'InvalidMessage' && /sourceChecksum/.test(e.message),
    );
    await admin({ op: 'credentials.create', body: { id: 'typed-in', data: { value: 'by-hand' } } });
    const { credentials } = await admin({ op: 'credentials.list' });
    assert.deepEqual(
      credentials.map((c: { id: string; source: string; sourceChecksum?: string }) => [c.id, c.source, c.sourceChecksum]),
      [
        ['crm', 'secret', 'sha256:crm-2'],
        ['github', 'secret', 'sha256:bbb'],
        ['typed-in', 'api', undefined],
      ],
    );
    // An apply takes over a credential typed in through the API.
    assert.equal((await apply({ id: 'typed-in', data: { value: 'from-secret' } }, 'sha256:t')).outcome, 'replaced');
    const text = JSON.stringify([answers, credentialEvents()]);
    for (const value of ['secret-v1', 'secret-v2', 'secret-v3', 'by-hand', 'from-secret', ...tokens.issuedTokens()])
      assert.ok(!text.includes(value), `an answer or event holds ${value}`);
  });
});
