import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { freePort } from './harness.js';
import {
  adminOf,
  assertNoSecrets,
  keyringOf,
  newKeySpec,
  newTenant,
  rejection,
  startVaultWorld,
  type VaultWorld,
} from './credentials-harness.js';
import { startOAuthTokenServer, type OAuthTokenServer } from './fixtures/oauth-token-server.js';

const CLIENT_SECRET = 'PLANTED-client-secret-5e2f8a';
let world: VaultWorld;
/** A confidential client (client_secret_basic), whose responses wait 300 ms so concurrent refreshes overlap. */
let confidential: OAuthTokenServer;
/** A public client (client_id in the body), answering at once. */
let publicClient: OAuthTokenServer;
const keyring = keyringOf(newKeySpec('current'));
const outputs: unknown[] = [];
/** Tokens of servers a test closed, for the final leak search. */
const slowTokens: string[] = [];

before(async () => {
  world = await startVaultWorld();
  confidential = await startOAuthTokenServer({ clientId: 'punk-gateway', clientSecret: CLIENT_SECRET, delayMs: 300 });
  publicClient = await startOAuthTokenServer({ clientId: 'punk-public' });
});
after(async () => {
  await confidential.close();
  await publicClient.close();
  await world.close();
});

const failing = async (fn: () => Promise<unknown>, code: string) => {
  const error = await rejection(fn, code);
  outputs.push(error);
  return error;
};

/** Stores an oauth2 credential for a new grant of `server`, its access token expiring at `expiresAt`. */
async function grantCredential(
  server: OAuthTokenServer,
  tenant: string,
  id: string,
  expiresAt: number,
  extra: Record<string, string> = {},
) {
  const tokens = server.issueGrant({ scope: 'repo read:org' });
  const confidentialClient = server === confidential;
  await world.vault(keyring).create(tenant, adminOf(tenant), {
    id,
    data: {
      access_token: tokens.accessToken,
      refresh_token: tokens.refreshToken,
      expires_at: String(expiresAt),
      token_url: server.tokenUrl,
      client_id: confidentialClient ? 'punk-gateway' : 'punk-public',
      ...(confidentialClient && { client_secret: CLIENT_SECRET }),
      ...extra,
    },
  });
  return tokens;
}

test('a token expiring within 60 s is refreshed before use: rotated tokens are stored re-encrypted, and used until they near expiry', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyring);
  const before = confidential.requests.length;
  const first = await grantCredential(confidential, tenant, 'github', Date.now() + 30_000, { scope: 'repo' });

  const resolved = await vault.resolveValue(tenant, 'cred:github');
  assert.equal(resolved.oauth2, 'github');
  assert.match(resolved.value, /^Bearer at_/);
  const token = resolved.value.slice('Bearer '.length);
  assert.notEqual(token, first.accessToken);
  assert.ok(confidential.isValid(token));
  const sent = confidential.requests.slice(before);
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0], { grantType: 'refresh_token', clientAuth: 'basic', scope: 'repo', status: 200, error: undefined });

  const info = await vault.get(tenant, 'github');
  outputs.push(info);
  assert.ok(Date.parse(info.expiresAt!) > Date.now() + 3_000_000, 'expires_at = now + expires_in');
  assert.ok(info.lastRefreshAt);
  assert.equal(info.refreshError, undefined);
  assert.deepEqual(info.keys, ['access_token', 'client_id', 'client_secret', 'expires_at', 'refresh_token', 'scope', 'token_url']);
  assert.equal(info.keyId, 'current');

  // Fresh now: used as stored, no request.
  assert.deepEqual(await vault.resolveValue(tenant, 'cred:github'), resolved);
  assert.equal(confidential.requests.length, before + 1);
  // The rotated refresh token was stored: the spent one would be refused (invalid_grant) and this would fail.
  confidential.invalidateAccessToken(token);
  const renewed = await vault.renewAfterUnauthorized(tenant, 'github', resolved.value);
  assert.ok(confidential.isValid(renewed.slice(7)));
  assert.equal(confidential.reusedRefreshTokens, 0);

  const events = world.events.filter((e) => e.tenant === tenant && e.type === 'credential.refreshed');
  assert.deepEqual(
    events.map((e) => [e.data.trigger, e.data.rotated]),
    [
      ['expiry', true],
      ['unauthorized', true],
    ],
  );
  assert.equal(events[0]!.runId, 'credential.github');
  outputs.push(...events);
});

test('a public client sends its client_id in the body; a token far from expiry is not refreshed', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyring);
  const before = publicClient.requests.length;
  const fresh = await grantCredential(publicClient, tenant, 'fresh', Date.now() + 3_600_000);
  assert.equal((await vault.resolveValue(tenant, 'cred:fresh')).value, `Bearer ${fresh.accessToken}`);
  assert.equal(publicClient.requests.length, before, 'no refresh far from expiry');

  await grantCredential(publicClient, tenant, 'expired', Date.now() - 1_000);
  const bare = await vault.resolveValue(tenant, 'cred:expired/access_token');
  assert.ok(publicClient.isValid(bare.value));
  assert.deepEqual(
    publicClient.requests.slice(before).map((r) => r.clientAuth),
    ['body'],
  );
  // A credential holding only a refresh token gets its first access token at first use.
  const grant = publicClient.issueGrant();
  await vault.create(tenant, adminOf(tenant), {
    id: 'refresh-only',
    data: { refresh_token: grant.refreshToken, token_url: publicClient.tokenUrl, client_id: 'punk-public' },
  });
  const first = await vault.resolveValue(tenant, 'cred:refresh-only');
  assert.ok(publicClient.isValid(first.value.slice(7)));
});

test('after a 401 the credential is refreshed once; a replica that saw the same rejected token gets the stored one without a request', async () => {
  const tenant = newTenant();
  const replicaA = world.vault(keyring, { db: await world.openPool() });
  const replicaB = world.vault(keyring, { db: await world.openPool() });
  const grant = await grantCredential(publicClient, tenant, 'api', Date.now() + 3_600_000);
  const before = publicClient.requests.length;
  const rejected = (await replicaA.resolveValue(tenant, 'cred:api')).value;
  assert.equal(rejected, `Bearer ${grant.accessToken}`);
  publicClient.invalidateAccessToken(grant.accessToken);

  const renewed = await replicaA.renewAfterUnauthorized(tenant, 'api', rejected);
  assert.notEqual(renewed, rejected);
  assert.ok(publicClient.isValid(renewed.slice(7)));
  assert.equal(publicClient.requests.length, before + 1);
  // B also saw the old token refused: it takes A's token, no second refresh.
  assert.equal(await replicaB.renewAfterUnauthorized(tenant, 'api', rejected), renewed);
  assert.equal(publicClient.requests.length, before + 1);
  // If the new token is refused too, one more renewal refreshes again (the caller retries once; no loop here).
  assert.notEqual(await replicaB.renewAfterUnauthorized(tenant, 'api', renewed), renewed);
  assert.equal(publicClient.requests.length, before + 2);
});

test('a revoked grant fails with the token endpoint error, recorded once, without a second request', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyring);
  const grant = await grantCredential(publicClient, tenant, 'revoked', Date.now() + 3_600_000);
  publicClient.revokeGrant(grant.refreshToken);
  const before = publicClient.requests.length;

  const error = await failing(
    () => vault.renewAfterUnauthorized(tenant, 'revoked', `Bearer ${grant.accessToken}`),
    'CredentialRefreshFailed',
  );
  assert.match(
    error.message,
    new RegExp(
      `^refreshing credential revoked in tenant ${tenant} failed: the token endpoint http://127\\.0\\.0\\.1:\\d+/token answered HTTP 400 invalid_grant: the grant was revoked \\(the refresh token was revoked, expired or already used: store the credential again with a new grant\\)$`,
    ),
  );
  assert.equal(error.details!.error, 'invalid_grant');
  assert.equal(publicClient.requests.length, before + 1, 'exactly one request');
  assert.equal(publicClient.requests.at(-1)!.error, 'invalid_grant');

  const info = await vault.get(tenant, 'revoked');
  assert.equal(info.refreshError, error.message);
  const failed = world.events.filter((e) => e.tenant === tenant && e.type === 'credential.refresh_failed');
  assert.equal(failed.length, 1);
  assert.deepEqual(failed[0]!.data, { id: 'revoked', trigger: 'unauthorized', error: 'invalid_grant', message: error.message });
  outputs.push(info, ...failed);
  // The lease was released: a later attempt is a new single request (the caller decides whether to try again).
  assert.equal(
    (await world.db.query(`SELECT refresh_lease_holder FROM gateway.credentials WHERE tenant = $1`, [tenant])).rows[0]!
      .refresh_lease_holder,
    null,
  );
});

test('an endpoint that echoes the request in its invalid_grant description: the client secret, Basic credential and tokens are scrubbed', async () => {
  // A secret that form-encoding changes, so its raw, form-encoded and percent-encoded spellings all differ.
  const secret = 'PLANTED echo+secret/&=9c1d';
  const echoing = await startOAuthTokenServer({ clientId: 'punk-echo', clientSecret: secret, echoRequest: true });
  try {
    const tenant = newTenant();
    const vault = world.vault(keyring);
    const grant = echoing.issueGrant({ scope: 'repo' });
    await vault.create(tenant, adminOf(tenant), {
      id: 'echoed',
      data: {
        access_token: grant.accessToken,
        refresh_token: grant.refreshToken,
        token_url: echoing.tokenUrl,
        client_id: 'punk-echo',
        client_secret: secret,
      },
    });
    echoing.revokeGrant(grant.refreshToken);

    const error = await failing(
      () => vault.renewAfterUnauthorized(tenant, 'echoed', `Bearer ${grant.accessToken}`),
      'CredentialRefreshFailed',
    );
    const basic = Buffer.from(`punk-echo:${new URLSearchParams([['', secret]]).toString().slice(1)}`).toString('base64');
    // The endpoint did echo them (the fixture's answer reached the message), and every one was replaced.
    assert.match(
      error.message,
      /answered HTTP 400 invalid_grant: the grant was revoked \(request: authorization=Basic <redacted> decoded=<redacted> body=grant_type=refresh_token&refresh_token=<redacted>\)/,
    );
    const info = await vault.get(tenant, 'echoed');
    const failed = world.events.filter((e) => e.tenant === tenant && e.type === 'credential.refresh_failed');
    assert.equal(failed.length, 1);
    const spellings = [
      secret,
      encodeURIComponent(secret),
      new URLSearchParams([['', secret]]).toString().slice(1),
      basic,
      `Basic ${basic}`,
      Buffer.from(basic, 'base64').toString(),
      grant.refreshToken,
      grant.accessToken,
    ];
    assertNoSecrets(spellings, [error, info, ...failed, ...world.logs]);
    slowTokens.push(...spellings);
  } finally {
    await echoing.close();
  }
});

test('a client secret too short to hide (under 4 characters) does not garble the message by hiding its letters everywhere', async () => {
  const echoing = await startOAuthTokenServer({ clientId: 'punk-short', clientSecret: 's', echoRequest: true });
  try {
    const tenant = newTenant();
    const vault = world.vault(keyring);
    const grant = echoing.issueGrant();
    await vault.create(tenant, adminOf(tenant), {
      id: 'short',
      data: {
        access_token: grant.accessToken,
        refresh_token: grant.refreshToken,
        token_url: echoing.tokenUrl,
        client_id: 'punk-short',
        client_secret: 's',
      },
    });
    echoing.revokeGrant(grant.refreshToken);
    const error = await failing(
      () => vault.renewAfterUnauthorized(tenant, 'short', `Bearer ${grant.accessToken}`),
      'CredentialRefreshFailed',
    );
    assert.match(error.message, /answered HTTP 400 invalid_grant: the grant was revoked \(request: authorization=Basic <redacted> /);
    assert.ok(!error.message.includes(grant.refreshToken));
  } finally {
    await echoing.close();
  }
});

test('two gateway replicas on separate pools refresh one credential at once: one token request, one token, no refresh token spent twice', async () => {
  const tenant = newTenant();
  const replicas = [world.vault(keyring, { db: await world.openPool() }), world.vault(keyring, { db: await world.openPool() })];
  const original = await grantCredential(confidential, tenant, 'shared', Date.now() + 20_000);
  const before = confidential.requests.length;
  const reusedBefore = confidential.reusedRefreshTokens;

  // Three concurrent connects on each replica; the token endpoint holds its answer 300 ms, so they all overlap.
  const resolved = await Promise.all(replicas.flatMap((vault) => [1, 2, 3].map(() => vault.resolveValue(tenant, 'cred:shared'))));
  assert.equal(confidential.requests.length, before + 1, 'exactly one token endpoint request');
  assert.equal(new Set(resolved.map((r) => r.value)).size, 1, 'every caller got the same token');
  const token = resolved[0]!.value.slice(7);
  assert.notEqual(token, original.accessToken);
  assert.ok(confidential.isValid(token));

  // Both replicas see a 401 for that token at once: again one request.
  confidential.invalidateAccessToken(token);
  const renewed = await Promise.all(replicas.map((vault) => vault.renewAfterUnauthorized(tenant, 'shared', `Bearer ${token}`)));
  assert.equal(confidential.requests.length, before + 2);
  assert.equal(renewed[0], renewed[1]);
  assert.ok(confidential.isValid(renewed[0]!.slice(7)));
  assert.equal(confidential.reusedRefreshTokens, reusedBefore, 'no rotated refresh token was presented twice');
  assert.equal(world.events.filter((e) => e.tenant === tenant && e.type === 'credential.refreshed').length, 2);

  // Revoked: both replicas fail with the same error, from one request.
  const revokedTenant = newTenant();
  const grant = await grantCredential(confidential, revokedTenant, 'shared', Date.now() + 20_000);
  confidential.revokeGrant(grant.refreshToken);
  const beforeRevoked = confidential.requests.length;
  const outcomes = await Promise.allSettled(replicas.map((vault) => vault.resolveValue(revokedTenant, 'cred:shared')));
  assert.equal(confidential.requests.length, beforeRevoked + 1);
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'rejected');
    const reason = outcome.reason as { code: string; message: string };
    assert.equal(reason.code, 'CredentialRefreshFailed');
    assert.match(reason.message, /answered HTTP 400 invalid_grant/);
    outputs.push(reason);
  }
});

test('a lease left by a replica that died expires and is taken over; one held too long is a clear error', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyring, { leaseWaitMs: 5_000 });
  await grantCredential(publicClient, tenant, 'orphaned', Date.now() + 10_000);
  await world.db.query(
    `UPDATE gateway.credentials SET refresh_lease_holder = 'dead-replica', refresh_lease_until = now() + interval '400 milliseconds' WHERE tenant = $1`,
    [tenant],
  );
  const resolved = await vault.resolveValue(tenant, 'cred:orphaned');
  assert.ok(publicClient.isValid(resolved.value.slice(7)));

  await grantCredential(publicClient, tenant, 'stuck', Date.now() + 10_000);
  await world.db.query(
    `UPDATE gateway.credentials SET refresh_lease_holder = 'slow-replica', refresh_lease_until = now() + interval '1 hour' WHERE tenant = $1 AND id = 'stuck'`,
    [tenant],
  );
  const busy = await failing(() => world.vault(keyring, { leaseWaitMs: 300 }).resolveValue(tenant, 'cred:stuck'), 'CredentialRefreshBusy');
  assert.equal(
    busy.message,
    `credential stuck in tenant ${tenant}: another gateway replica has been refreshing it for more than 300 ms; try again`,
  );
});

test('an unreachable or slow token endpoint is a clear error naming it, recorded as the refresh error', async () => {
  const tenant = newTenant();
  const vault = world.vault(keyring, { refreshTimeoutMs: 100 });
  const closedPort = await freePort();
  await vault.create(tenant, adminOf(tenant), {
    id: 'unreachable',
    data: {
      access_token: 'PLANTED-stale-access-1',
      refresh_token: 'PLANTED-refresh-unreachable',
      token_url: `http://127.0.0.1:${closedPort}/oauth/token?tenant_secret=PLANTED-query-secret`,
      client_id: 'c',
      expires_at: '0',
    },
  });
  const unreachable = await failing(() => vault.resolveValue(tenant, 'cred:unreachable'), 'CredentialRefreshFailed');
  assert.match(
    unreachable.message,
    new RegExp(`the token endpoint http://127\\.0\\.0\\.1:${closedPort}/oauth/token could not be reached: ECONNREFUSED$`),
  );
  assert.equal((await vault.get(tenant, 'unreachable')).refreshError, unreachable.message);

  const slow = await startOAuthTokenServer({ clientId: 'punk-public', delayMs: 1_000 });
  try {
    const grant = slow.issueGrant();
    await vault.create(tenant, adminOf(tenant), {
      id: 'slow',
      data: {
        access_token: grant.accessToken,
        refresh_token: grant.refreshToken,
        token_url: slow.tokenUrl,
        client_id: 'punk-public',
        expires_at: '0',
      },
    });
    const timedOut = await failing(() => vault.resolveValue(tenant, 'cred:slow'), 'CredentialRefreshFailed');
    assert.match(timedOut.message, /the token endpoint http:\/\/127\.0\.0\.1:\d+\/token did not answer within 100 ms$/);
    slowTokens.push(...slow.issuedTokens());
  } finally {
    await slow.close();
  }
});

test('no token, refresh token or client secret appears in any error, answer, ledger event or log line', () => {
  const secrets = [
    CLIENT_SECRET,
    'PLANTED-stale-access-1',
    'PLANTED-refresh-unreachable',
    'PLANTED-query-secret',
    ...confidential.issuedTokens(),
    ...publicClient.issuedTokens(),
    ...slowTokens,
  ];
  assert.ok(secrets.length > 20);
  assertNoSecrets(secrets, [...outputs, ...world.events, ...world.logs]);
  assert.ok(world.logs.some((line) => line.includes('refreshed an oauth2 credential')));
});
