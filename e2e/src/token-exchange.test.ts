/**
 * Token exchange (RFC 8693) on a real `punk up` (docs/identity.md): an McpServer with `spec.auth.tokenExchange` is
 * called as its caller. A caller signed in with an access token of a real authorization server (oidc-provider,
 * token-exchange-issuer.ts) reaches the upstream (an HTTP MCP server echoing the headers it got) with a token the
 * issuer exchanged for it, of the server's audience and for the caller's subject, never with the caller's own; a
 * second call reuses the cached token; the issuer's refusal is an error naming the server and the issuer's error
 * code; an API key caller is refused, told why and what to do; `tool.called` on the ledger names the subject, and no
 * token is on the ledger. Both protocol eras, on `punk up` and on `punk cluster` (two front replicas, each with its own
 * cache, NATS between front and gateway).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { decodeJwt } from 'jose';
import { connectClient, textOf, type Era } from './clients.js';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { scratchDatabase } from './distributed.js';
import { createApiKey, eventually, manifestDir, removeDir, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';
import { startTokenExchangeIssuer, type TokenExchangeIssuer } from './token-exchange-issuer.js';

const PUBLIC_URL = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const PUNK_CLIENT = { clientId: 'punk', clientSecret: randomBytes(16).toString('hex') };
const HR_AUDIENCE = 'https://hr.example.test';
const REFUSED_AUDIENCE = 'https://payroll.example.test';
/** An audience the issuer grants, of a server that accepts no token. */
const STRICT_AUDIENCE = 'https://strict.example.test';
const ERAS: Era[] = ['2025-11-25', '2026-07-28'];
/** Two users per era, so that each era's test starts with nothing cached. */
const usersOf = (era: Era) => ({ a: `alice-${era.slice(0, 4)}`, b: `bob-${era.slice(0, 4)}` });

const server = (name: string, url: string, audience: string, scopes: string[]) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  url: ${url}
  auth:
    tokenExchange: { audience: ${audience}, scopes: ${JSON.stringify(scopes)} }
`;

/** A workflow calling the hr server: its calls come from the workflow engine, with no caller's token to exchange. */
const HR_WORKFLOW = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpWorkflow
metadata: { name: hr-headers }
spec:
  start: call
  nodes:
    - { id: call, kind: tool_call, next: done, config: { server: hr, tool: headers, args: {}, saveAs: seen } }
    - { id: done, kind: output, config: { value: { kind: ref, path: vars.seen } } }
`;

/** The bearer the upstream saw on the `headers` call whose result is `result`. */
function bearerSeen(result: { content?: unknown }): string {
  const headers = JSON.parse(textOf(result)) as Record<string, string>;
  const match = /^Bearer (.+)$/.exec(headers['authorization'] ?? '');
  assert.ok(match, `the upstream saw no bearer: ${JSON.stringify(headers)}`);
  return match[1]!;
}

/** How many front replicas a mode runs: each one caches the tokens it exchanged (`punk cluster` runs two). */
const FRONTS = { up: 1, cluster: 2 } as const;

for (const mode of ['up', 'cluster'] as const)
  describe(`token exchange on punk ${mode}`, { timeout: 300_000 }, () => {
    let nats: OwnNats | undefined;
    let db: { url: string; drop(): Promise<void> } | undefined;
    let issuer: TokenExchangeIssuer;
    let upstream: EchoServer;
    let strict: EchoServer;
    let dir: string;
    let punk: RunningPunk;
    const clients: Client[] = [];
    const tokens = new Set<string>();

    before(async () => {
      upstream = await startEchoServer();
      strict = await startEchoServer({ refuseBearers: true });
      issuer = await startTokenExchangeIssuer({
        resource: PUBLIC_URL,
        users: ERAS.flatMap((era) => Object.values(usersOf(era))),
        punk: PUNK_CLIENT,
        audiences: [HR_AUDIENCE, STRICT_AUDIENCE],
        refusedAudiences: [REFUSED_AUDIENCE],
        exchangedTokenTtl: 600,
      });
      dir = await manifestDir('token-exchange', {
        'hr.yaml': server('hr', upstream.url, HR_AUDIENCE, ['hr:read']),
        'payroll.yaml': server('payroll', upstream.url, REFUSED_AUDIENCE, []),
        'strict.yaml': server('strict', strict.url, STRICT_AUDIENCE, []),
        'workflow.yaml': HR_WORKFLOW,
      });
      if (mode === 'cluster') {
        nats = await startOwnNats();
        db = await scratchDatabase();
      }
      punk = await startPunk({
        manifestDir: dir,
        ...(mode === 'cluster' && { command: 'cluster', timeoutMs: 180_000 }),
        env: {
          ...(nats && db && { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url }),
          PUNK_AUTH_MODE: 'on',
          PUNK_PUBLIC_URL: PUBLIC_URL,
          PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP,
          PUNK_AUTH_ISSUER: issuer.issuer,
          PUNK_AUTH_JWKS_URL: issuer.jwksUrl,
          PUNK_AUTH_ALGORITHMS: 'ES256',
          PUNK_OAUTH_CLIENT_ID: PUNK_CLIENT.clientId,
          PUNK_OAUTH_CLIENT_SECRET: PUNK_CLIENT.clientSecret,
          // Every log line, so that the test below can tell no token is in any.
          PUNK_LOG_LEVEL: 'trace',
          // The upstream listens on loopback, which the SSRF guard refuses with authentication on.
          PUNK_UPSTREAM_ALLOWED_NETWORKS: '127.0.0.1/32',
          // Pooled connections close after a second without calls, so a call can reconnect (see the reconnect test).
          PUNK_UPSTREAM_IDLE_TIMEOUT_MS: '1000',
        },
      });
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await punk?.stop();
      await upstream?.close();
      await strict?.close();
      await issuer?.close();
      await nats?.stop();
      await db?.drop();
      if (dir) await removeDir(dir);
    });

    /** A client of `era` signed in as `user` with a fresh access token of the issuer. */
    async function signedIn(era: Era, user: string): Promise<{ client: Client; token: string }> {
      const token = await issuer.userToken(user);
      tokens.add(token);
      const client = await connectClient(`${punk.baseUrl}/mcp`, era, { authorization: `Bearer ${token}` });
      clients.push(client);
      return { client, token };
    }

    for (const era of ERAS) {
      const { a, b } = usersOf(era);

      test(`${era}: a user reaches the upstream with a token exchanged for them, cached for the next call`, async () => {
        const before = issuer.exchanges;
        const alice = await signedIn(era, a);
        const first = bearerSeen(await alice.client.callTool({ name: 'hr__headers', arguments: {} }));
        tokens.add(first);
        assert.notEqual(first, alice.token, "the caller's own token never goes upstream");
        const claims = decodeJwt(first);
        assert.equal(claims.sub, a);
        assert.equal(claims.aud, HR_AUDIENCE);
        assert.equal(claims['scope'], 'hr:read');
        assert.deepEqual(claims['act'], { sub: PUNK_CLIENT.clientId });
        assert.equal(issuer.exchanges, before + 1);

        // Each front replica exchanges once per user, then serves its cached token: a second call under punk up, and
        // as many as it takes to land on both replicas of punk cluster, add no exchange past one per replica.
        const bearers = new Set([first]);
        for (let call = 1; call < 2 * FRONTS[mode]; call++) {
          const again = bearerSeen(await alice.client.callTool({ name: 'hr__headers', arguments: {} }));
          tokens.add(again);
          assert.equal(decodeJwt(again).sub, a);
          bearers.add(again);
        }
        assert.ok(issuer.exchanges - before <= FRONTS[mode], `${issuer.exchanges - before} exchanges for one user`);
        assert.equal(bearers.size, issuer.exchanges - before, 'the calls reuse the cached tokens');
        if (mode === 'up') assert.equal(issuer.exchanges, before + 1, 'no second exchange');

        const afterAlice = issuer.exchanges;
        const bob = await signedIn(era, b);
        const bobs = bearerSeen(await bob.client.callTool({ name: 'hr__headers', arguments: {} }));
        tokens.add(bobs);
        assert.equal(decodeJwt(bobs).sub, b, 'another user gets a token of their own');
        assert.equal(issuer.exchanges, afterAlice + 1);
      });

      test(`${era}: a call that reconnects an idle connection sends its handshake and listings with Punk's headers, only the call with the caller's token`, async () => {
        const alice = await signedIn(era, a);
        await new Promise((resolve) => setTimeout(resolve, 2_500)); // the pooled connection closes (state idle)
        const from = upstream.requests.length;
        const bearer = bearerSeen(await alice.client.callTool({ name: 'hr__headers', arguments: {} }));
        const seen = upstream.requests.slice(from);
        const handshake = seen.filter((r) => r.method === 'initialize' || r.method === 'server/discover');
        assert.ok(handshake.length > 0, `the call reconnected: ${JSON.stringify(seen.map((r) => r.method))}`);
        for (const request of seen.filter((r) => r.method !== 'tools/call'))
          assert.equal(request.authorization, undefined, `${request.method ?? 'a response'} goes with the connection's headers`);
        assert.deepEqual(
          seen.filter((r) => r.method === 'tools/call').map((r) => r.authorization),
          [`Bearer ${bearer}`],
        );
      });

      test(`${era}: an upstream refusing the exchanged token (HTTP 401) is an error saying so; its connection is not renewed`, async () => {
        const { client } = await signedIn(era, a);
        const from = strict.requests.length;
        const before = issuer.exchanges;
        await assert.rejects(client.callTool({ name: 'strict__headers', arguments: {} }), (error: Error) => {
          assert.match(
            error.message,
            /server default\/strict answered HTTP 401 \(unauthorized\) to the token exchanged for the caller \(spec\.auth\.tokenExchange\)/,
          );
          return true;
        });
        const seen = strict.requests.slice(from);
        assert.deepEqual(
          seen.filter((r) => r.method === 'tools/call').map((r) => r.authorization !== undefined),
          [true],
          'the call went once, with its token',
        );
        // The call may reconnect an idle connection first; nothing reconnects after the refusal.
        const call = seen.findIndex((r) => r.method === 'tools/call');
        assert.deepEqual(
          seen.slice(call + 1).filter((r) => r.method === 'initialize' || r.method === 'server/discover'),
          [],
          'no reconnect of the shared connection',
        );
        // The refused token is not kept: the next call exchanges again (under punk cluster, maybe on the other front).
        await assert.rejects(client.callTool({ name: 'strict__headers', arguments: {} }));
        assert.equal(issuer.exchanges, before + 2);
      });

      test(`${era}: the issuer refusing the exchange is an error naming the server and the issuer's error code`, async () => {
        const { client } = await signedIn(era, a);
        await assert.rejects(client.callTool({ name: 'payroll__headers', arguments: {} }), (error: Error) => {
          assert.match(
            error.message,
            /refused to exchange the caller's token for server "payroll" \(audience https:\/\/payroll\.example\.test\): invalid_grant/,
          );
          return true;
        });
      });

      test(`${era}: an API key caller is refused, told why and how to call instead`, async () => {
        const { key, id } = await createApiKey(punk.baseUrl, BOOTSTRAP, { name: `key ${era}` });
        const client = await connectClient(`${punk.baseUrl}/mcp`, era, { authorization: `Bearer ${key}` });
        clients.push(client);
        const before = issuer.exchanges;
        await assert.rejects(client.callTool({ name: 'hr__headers', arguments: {} }), (error: Error) => {
          assert.match(
            error.message,
            new RegExp(`server "hr" is called as its caller .*caller api-key:${id} signed in without an OAuth token`),
          );
          assert.match(error.message, /sign in with an access token of http:\/\/127\.0\.0\.1:\d+ instead/);
          return true;
        });
        assert.equal(issuer.exchanges, before);
      });
    }

    test("a workflow run's call to the server fails closed: it carries no caller's token, and never goes as Punk", async () => {
      const run = await fetch(`${punk.baseUrl}/api/v1/workflows/hr-headers/runs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BOOTSTRAP}`, 'content-type': 'application/json' },
        body: JSON.stringify({ arguments: {}, waitSeconds: 30 }),
      });
      assert.equal(run.status, 201);
      const body = (await run.json()) as { state: string; error?: { code: string; message: string } };
      assert.equal(body.state, 'failed');
      assert.equal(body.error?.code, 'OAuthTokenRequired');
      assert.match(
        body.error.message,
        /server "hr" is called as its caller \(spec\.auth\.tokenExchange, audience https:\/\/hr\.example\.test\), and this tools\/call carries no token exchanged for its caller workflow-engine/,
      );
    });

    test("the ledger's tool.called names the subject the upstream saw, and holds no token", async () => {
      const admin = { headers: { authorization: `Bearer ${BOOTSTRAP}` } };
      const expected = ERAS.flatMap((era) => Object.values(usersOf(era))).map((user) => `exchanged token for subject ${user}`);
      const found = await eventually(async () => {
        const { runs } = (await (await fetch(`${punk.baseUrl}/api/v1/runs?limit=100`, admin)).json()) as {
          runs: Array<{ runId: string; server?: string; types: string[] }>;
        };
        const texts = await Promise.all(
          runs
            .filter((r) => r.types.includes('tool.called'))
            .map(async (r) => (await fetch(`${punk.baseUrl}/api/v1/runs/${r.runId}`, admin)).text()),
        );
        const identities = texts.flatMap((text) =>
          (JSON.parse(text) as { events: Array<{ type: string; server?: string; data: { upstreamIdentity?: string } }> }).events
            .filter((e) => e.type === 'tool.called' && e.server === 'hr')
            .map((e) => e.data.upstreamIdentity),
        );
        // The calls to hr that reached the upstream (2 × replicas + 1 of A and one of B per era), each recorded as its caller.
        const complete = identities.length === ERAS.length * (2 * FRONTS[mode] + 2);
        return complete && expected.every((identity) => identities.includes(identity)) ? { identities, texts } : undefined;
      }, 20_000);
      assert.ok(found, 'every call to hr has a tool.called naming its caller');
      const ledger = found.texts.join('\n');
      for (const token of tokens) assert.ok(!ledger.includes(token), 'no token value is on the ledger');
      assert.doesNotMatch(
        punk.output(),
        new RegExp([...tokens].map((t) => t.slice(-24).replace(/[-]/g, '\\-')).join('|')),
        'no token in the logs',
      );
    });
  });
