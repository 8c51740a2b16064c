/**
 * Two gateway replicas (separate processes' worth: each its own bus, pool of database connections and vault) on
 * one database start at once with a server whose Authorization header comes from an expired OAuth2 credential
 * with a rotating refresh token: exactly one refresh reaches the token endpoint, both connect with its token, and
 * the refresh token is never presented twice.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createLogger, MemoryBus, openDatabase, streams, subjects } from '@punk/lib';
import { openScratchDb } from '../../../lib/dist/test/pgtest.js';
import { destinationPolicyOf, Keyring, parseEncryptionKey, startGateway, type Gateway } from '../index.js';
import { adminOf, newKeySpec, newTenant } from './credentials-harness.js';
import { startOAuthTokenServer } from './fixtures/oauth-token-server.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { manifest } from './harness.js';

const log = createLogger('oauth-replicas-test', process.env.TEST_LOG_LEVEL ?? 'silent');

test('two gateway replicas starting at once refresh a shared OAuth2 credential once', async (t) => {
  const tokens = await startOAuthTokenServer({ clientId: 'punk', clientSecret: 'client-secret-for-the-test', accessTokenTtlSeconds: 3600 });
  t.after(() => tokens.close());
  const upstream = await startProtectedMcpServer({ accepts: (token) => tokens.isValid(token) });
  t.after(() => upstream.close());
  const database = await openScratchDb(log);
  t.after(() => database.close());
  const key = newKeySpec();
  const keyring = () => new Keyring(parseEncryptionKey(key, 'PUNK_ENCRYPTION_KEY'), []);
  const tenant = newTenant();
  const workDir = await mkdtemp(join(tmpdir(), 'punk-oauth-replicas-'));
  t.after(() => rm(workDir, { recursive: true, force: true }));
  const server = manifest(tenant, 'protected', { url: upstream.url, headers: [{ name: 'Authorization', value: 'cred:upstream' }] });

  const replica = async (
    name: string,
    servers: (typeof server)[],
  ): Promise<{ gateway: Gateway; bus: MemoryBus; close(): Promise<void> }> => {
    const bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    const db = await openDatabase({ url: database.url, log });
    const gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db,
      servers,
      workDir: join(workDir, name),
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
      instanceId: name,
      keyring: keyring(),
    });
    return { gateway, bus, close: async () => (await gateway.stop(), await bus.close(), await db.close()) };
  };

  // The credential is stored through one replica's admin API, already expired.
  const setup = await replica('setup', []);
  const grant = tokens.issueGrant();
  await setup.bus.request(
    subjects.gatewayAdmin,
    {
      op: 'credentials.create',
      tenant,
      principal: adminOf(tenant),
      body: {
        id: 'upstream',
        data: {
          access_token: grant.accessToken,
          refresh_token: grant.refreshToken,
          expires_at: String(Date.now() - 1_000),
          token_url: tokens.tokenUrl,
          client_id: 'punk',
          client_secret: 'client-secret-for-the-test',
        },
      },
    },
    { timeoutMs: 10_000 },
  );
  await setup.close();

  const [a, b] = await Promise.all([replica('gateway-a', [server]), replica('gateway-b', [server])]);
  t.after(() => Promise.all([a.close(), b.close()]));
  await Promise.all([a.gateway.ready(), b.gateway.ready()]);
  for (const replica of [a, b]) {
    const entry = replica.gateway.catalog(tenant)[0]!;
    assert.equal(entry.state, 'ready', entry.lastError);
    assert.ok(entry.tools.some((tool) => tool.name === 'echo'));
  }
  const refreshes = tokens.requests.filter((r) => r.grantType === 'refresh_token');
  assert.equal(refreshes.length, 1, 'one refresh for both replicas');
  assert.equal(refreshes[0]!.status, 200);
  assert.equal(tokens.reusedRefreshTokens, 0, 'the rotating refresh token was never spent twice');
});
