#!/usr/bin/env node
// What the credentials vault costs a connect: p50 / p95 of resolveValue without a refresh (a static
// credential, and an oauth2 one whose token is fresh), of one OAuth2 refresh (renewAfterUnauthorized:
// lease claim, token endpoint exchange, re-encryption, store, release), of the bare token endpoint exchange,
// and of two replicas (separate pools) refreshing one credential at once (one exchange, the other waits on
// the lease). Against the local token endpoint fixture and a scratch database on the test Postgres
// (PUNK_TEST_DATABASE_URL), then the same on embedded PGlite. Needs `npm run build`. N (default 300) per figure.
//   node bench/credential-refresh.mjs
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createLogger, openDatabase } from '@punk/lib';
import { CredentialVault, Keyring, migrateGateway, parseEncryptionKey } from '@punk/gateway';
import { fmt, pct, root } from './common.mjs';

const { createScratchDatabase } = await import(join(root, 'services/lib/dist/test/pgtest.js'));
const { startOAuthTokenServer } = await import(join(root, 'services/gateway/dist/test/fixtures/oauth-token-server.js'));
const { refreshAccessToken } = await import(join(root, 'services/gateway/dist/credentials/oauth2.js'));

const N = Number(process.env.N ?? 300);
const log = createLogger('bench', 'silent');
const keyring = new Keyring(parseEncryptionKey(randomBytes(32).toString('base64'), 'PUNK_ENCRYPTION_KEY'));
const admin = { subject: 'bench', tenant: 'bench', groups: [] };

/** Runs `fn` N times (after 20 warm-up runs) and prints p50 / p95. */
async function measure(label, fn, runs = N) {
  for (let i = 0; i < 20; i++) await fn(i);
  const samples = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await fn(i);
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  console.log(`  ${label.padEnd(58)} p50 ${fmt(pct(samples, 50)).padStart(10)}   p95 ${fmt(pct(samples, 95)).padStart(10)}   (n=${runs})`);
}

/** Prints the figures on the database `open` returns; `replicas` opens a second pool for the two-replica figure. */
async function run(name, open, replicas) {
  const db = await open();
  try {
    await migrateGateway(db, log);
    const vault = new CredentialVault({ db, log, keyring });
    await vault.create('bench', admin, { id: 'static', data: { value: randomBytes(24).toString('base64url') } });
    console.log(`${name}:`);
    await measure('resolveValue, static credential', () => vault.resolveValue('bench', 'cred:static'), N * 5);
    const secret = randomBytes(16).toString('hex');
    const confidential = await startOAuthTokenServer({ clientId: 'bench', clientSecret: secret });
    try {
      const fresh = confidential.issueGrant();
      await vault.create('bench', admin, {
        id: 'oauth',
        data: {
          access_token: fresh.accessToken,
          refresh_token: fresh.refreshToken,
          expires_at: String(fresh.expiresAt),
          token_url: confidential.tokenUrl,
          client_id: 'bench',
          client_secret: secret,
        },
      });
      await measure('resolveValue, oauth2 credential, token fresh', () => vault.resolveValue('bench', 'cred:oauth'), N * 5);
      let current = (await vault.resolveValue('bench', 'cred:oauth')).value;
      await measure('one refresh (renewAfterUnauthorized, rotating)', async () => {
        current = await vault.renewAfterUnauthorized('bench', 'oauth', current);
      });
      const bare = confidential.issueGrant();
      let refreshToken = bare.refreshToken;
      await measure('  of which the token endpoint exchange alone', async () => {
        const tokens = await refreshAccessToken({
          tokenUrl: confidential.tokenUrl,
          refreshToken,
          clientId: 'bench',
          clientSecret: secret,
          timeoutMs: 10_000,
        });
        refreshToken = tokens.refreshToken;
      });
      if (replicas) {
        const other = new CredentialVault({ db: await replicas(), log, keyring });
        const before = confidential.requests.length;
        await measure(
          'two replicas refresh one credential at once (both done)',
          async () => {
            const rejected = current;
            const [a, b] = await Promise.all([
              vault.renewAfterUnauthorized('bench', 'oauth', rejected),
              other.renewAfterUnauthorized('bench', 'oauth', rejected),
            ]);
            if (a !== b) throw new Error('replicas got different tokens');
            current = a;
          },
          Math.min(N, 100),
        );
        console.log(
          `    token endpoint requests for ${Math.min(N, 100) + 20} concurrent pairs: ${confidential.requests.length - before}; refresh tokens presented twice: ${confidential.reusedRefreshTokens}`,
        );
      }
    } finally {
      await confidential.close();
    }
  } finally {
    await db.close();
  }
}

const scratch = await createScratchDatabase();
const pools = [];
try {
  await run(
    'Postgres (scratch database on the test server)',
    () => openDatabase({ url: scratch.url, log }),
    async () => {
      const db = await openDatabase({ url: scratch.url, log });
      pools.push(db);
      return db;
    },
  );
} finally {
  for (const db of pools) await db.close();
  await scratch.drop();
}
await run('PGlite (embedded, in memory, one connection)', () => openDatabase({ dataDir: null, log }), undefined);
