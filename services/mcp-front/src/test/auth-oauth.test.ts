/**
 * mcp-front as an OAuth 2.1 resource server, in front of the real gateway and governance on a MemoryBus:
 * a local authorization server of the test's own (RSA keys made with jose, a JWKS and an RFC 7662
 * introspection endpoint, RFC 8414 metadata and a client_credentials token endpoint on a local HTTP server)
 * issues the tokens; real SDK clients of both eras (one discovering the issuer from the 401 on its own) and
 * raw HTTP requests present them. The public URL is https://… while the fronts listen on plain http, as
 * behind an ingress that terminates TLS.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { McpServer } from '@modelcontextprotocol/server';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startGovernance, type GovernanceService } from '@punk/governance';
import {
  createLogger,
  ledgerEventSchema,
  loadConfig,
  mcpServerSpecSchema,
  MemoryBus,
  streams,
  subjects,
  type McpServer as McpServerManifest,
} from '@punk/lib';
import express from 'express';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { z } from 'zod';
import { authOptionsFromConfig, createFront, type Front, type FrontOptions } from '../index.js';
import { everything } from './replica-harness.js';

const log = createLogger('auth-oauth-test', 'silent');
const PUBLIC = 'https://punk.example.test';
const REQUIRED_SCOPE = 'mcp:tools';
const INTROSPECTION_CLIENT = { id: 'punk-front', secret: randomBytes(16).toString('hex') };
/** A machine client registered with the local issuer (client_credentials grant). */
const ROBOT = { id: 'robot', secret: randomBytes(16).toString('hex') };

/** An RSA signing key of the local issuer. */
interface IssuerKey {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
  publicPem: string;
}

async function issuerKey(kid: string): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  return {
    kid,
    privateKey,
    publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' },
    publicPem: await exportSPKI(publicKey),
  };
}

/** Listens on a free port of 127.0.0.1; resolves with the server and its base URL. */
async function listen(handler: Parameters<typeof createServer>[1]): Promise<{ http: HttpServer; base: string }> {
  const http = createServer(handler);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return { http, base: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
}

async function closeHttp(http: HttpServer): Promise<void> {
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
}

/**
 * The local authorization server: `/jwks` serves `keys` as they are now, `/introspect` answers from
 * `tokens`, and `/token` grants `client_credentials` to {@link ROBOT} (RFC 8414 metadata at
 * `/.well-known/oauth-authorization-server`), minting with `mint`.
 */
async function startIssuer(
  keys: { current: IssuerKey[] },
  tokens: Map<string, Record<string, unknown>>,
  mint: (clientId: string, params: URLSearchParams) => Promise<string>,
) {
  const introspections: Array<{ authorization: string | undefined; body: string }> = [];
  const tokenRequests: URLSearchParams[] = [];
  const jwksFetches: string[][] = [];
  const { http, base } = await listen((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', async () => {
      if (req.url === '/.well-known/oauth-authorization-server') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            issuer: base,
            authorization_endpoint: `${base}/authorize`,
            token_endpoint: `${base}/token`,
            jwks_uri: `${base}/jwks`,
            grant_types_supported: ['client_credentials'],
            token_endpoint_auth_methods_supported: ['client_secret_basic'],
            response_types_supported: ['code'],
          }),
        );
        return;
      }
      if (req.url === '/token' && req.method === 'POST') {
        const params = new URLSearchParams(body);
        tokenRequests.push(params);
        if (req.headers.authorization !== basicOf(ROBOT.id, ROBOT.secret) || params.get('grant_type') !== 'client_credentials') {
          res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
          return;
        }
        const accessToken = await mint(ROBOT.id, params);
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ access_token: accessToken, token_type: 'Bearer', expires_in: 300 }));
        return;
      }
      if (req.url === '/jwks') {
        jwksFetches.push(keys.current.map((k) => k.kid));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: keys.current.map((k) => k.publicJwk) }));
        return;
      }
      if (req.url === '/introspect' && req.method === 'POST') {
        introspections.push({ authorization: req.headers.authorization, body });
        if (req.headers.authorization !== basicOf(INTROSPECTION_CLIENT.id, INTROSPECTION_CLIENT.secret)) {
          res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
          return;
        }
        const token = new URLSearchParams(body).get('token') ?? '';
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(tokens.get(token) ?? { active: false }));
        return;
      }
      res.writeHead(404).end();
    });
  });
  return { http, base, issuer: base, introspections, tokenRequests, jwksFetches };
}

/** An RFC 6749 §2.3.1 `Authorization: Basic` value. */
function basicOf(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** A remote MCP server that records the headers of every request that reaches it; tool `whoami` is level 1. */
async function startRecorder(): Promise<{ http: HttpServer; url: string; headers: IncomingHttpHeaders[] }> {
  const headers: IncomingHttpHeaders[] = [];
  const { http, base } = await listen(async (req, res) => {
    headers.push(req.headers);
    const server = new McpServer({ name: 'recorder', version: '1.0.0' });
    server.registerTool('whoami', { description: 'Says hello', inputSchema: z.object({}) }, async () => ({
      content: [{ type: 'text', text: 'hello from the recorder' }],
    }));
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => void server.close().catch(() => undefined));
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  return { http, url: `${base}/mcp`, headers };
}

function remote(name: string, namespace: string, url: string): McpServerManifest {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace },
    spec: mcpServerSpecSchema.parse({ url }),
  };
}

/** A front with `auth` on its own port. */
async function startFront(
  bus: MemoryBus,
  tenant: string,
  auth: FrontOptions['auth'],
): Promise<{ front: Front; http: HttpServer; base: string }> {
  const front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000, ...(auth && { auth }) });
  const app = express();
  app.use(front.router);
  const http = await new Promise<HttpServer>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
  return { front, http, base: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
}

/** Sends a 2025-11-25 `initialize` with raw HTTP, with `Authorization: Bearer <token>` when given. */
function initialize(url: string, token?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...(token !== undefined && { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'auth-test', version: '1.0.0' } },
    }),
  });
}

/** Connects an SDK client of `era` sending `token` on every request. */
async function connect(url: string, token: string, era: '2025-11-25' | '2026-07-28'): Promise<Client> {
  const client =
    era === '2026-07-28'
      ? new Client({ name: 'auth-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
      : new Client({ name: 'auth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** The RFC 6750 challenge parameters of a response. */
function challengeOf(response: Response): Record<string, string> {
  const header = response.headers.get('www-authenticate') ?? '';
  assert.match(header, /^Bearer /, `a Bearer challenge, got ${JSON.stringify(header)}`);
  return Object.fromEntries([...header.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

describe('mcp-front as an OAuth 2.1 resource server', () => {
  const tenant = `oauth-${randomBytes(4).toString('hex')}`;
  const tokens = new Map<string, Record<string, unknown>>();
  const keys: { current: IssuerKey[] } = { current: [] };
  let key1: IssuerKey;
  let key2: IssuerKey;
  let strangerKey: IssuerKey;
  let issuer: Awaited<ReturnType<typeof startIssuer>>;
  let recorder: Awaited<ReturnType<typeof startRecorder>>;
  let bus: MemoryBus;
  let workDir: string;
  let governance: GovernanceService;
  let gateway: Gateway;
  let database: ScratchDb;
  let jwks: Awaited<ReturnType<typeof startFront>>;
  let introspected: Awaited<ReturnType<typeof startFront>>;
  let staticKey: Awaited<ReturnType<typeof startFront>>;

  /** A JWT signed by `key` (default the first issuer key) with good claims for `/mcp`, changed by `claims`. */
  async function jwt(
    claims: Record<string, unknown> = {},
    options: { key?: IssuerKey; expiresIn?: string; issuer?: string; audience?: string } = {},
  ): Promise<string> {
    const key = options.key ?? key1;
    return new SignJWT({ scope: `openid ${REQUIRED_SCOPE}`, groups: ['engineering'], ...claims })
      .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'at+jwt' })
      .setIssuer(options.issuer ?? issuer.issuer)
      .setSubject('alice')
      .setAudience(options.audience ?? `${PUBLIC}/mcp`)
      .setIssuedAt()
      .setExpirationTime(options.expiresIn ?? '5m')
      .sign(key.privateKey);
  }

  before(async () => {
    [key1, key2, strangerKey] = await Promise.all([issuerKey('key-1'), issuerKey('key-2'), issuerKey('stranger')]);
    keys.current = [key1];
    issuer = await startIssuer(keys, tokens, (clientId, params) =>
      new SignJWT({ scope: params.get('scope') ?? '', client_id: clientId })
        .setProtectedHeader({ alg: 'RS256', kid: key1.kid })
        .setIssuer(issuer.issuer)
        .setSubject(clientId)
        .setAudience(params.get('resource') ?? 'no-resource-requested')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(key1.privateKey),
    );
    recorder = await startRecorder();
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    workDir = await mkdtemp(join(tmpdir(), 'punk-auth-'));
    governance = await startGovernance({ bus, log });
    database = await openScratchDb(log);
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [everything('everything', tenant), remote('recorder', tenant, recorder.url)],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
    });
    await gateway.ready();
    jwks = await startFront(bus, tenant, {
      publicUrl: PUBLIC,
      issuer: issuer.issuer,
      jwksUrl: `${issuer.base}/jwks`,
      jwksCooldownMs: 0,
      requiredScopes: [REQUIRED_SCOPE],
    });
    introspected = await startFront(bus, tenant, {
      publicUrl: PUBLIC,
      issuer: issuer.issuer,
      introspection: { url: `${issuer.base}/introspect`, clientId: INTROSPECTION_CLIENT.id, clientSecret: INTROSPECTION_CLIENT.secret },
    });
    staticKey = await startFront(bus, tenant, { publicUrl: PUBLIC, jwtKey: key1.publicPem, tenantClaim: 'tenant' });
  });

  after(async () => {
    for (const f of [jwks, introspected, staticKey]) {
      if (!f) continue;
      await f.front.close();
      await closeHttp(f.http);
    }
    await gateway?.stop();
    await database?.close();
    await governance?.stop();
    await bus?.close();
    for (const server of [issuer?.http, recorder?.http]) if (server) await closeHttp(server);
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('without a token: 401 with a challenge naming the resource metadata (https, from the public URL) and the scope', async () => {
    const response = await initialize(`${jwks.base}/mcp`);
    assert.equal(response.status, 401);
    const challenge = challengeOf(response);
    assert.equal(challenge['resource_metadata'], `${PUBLIC}/.well-known/oauth-protected-resource/mcp`);
    assert.equal(challenge['scope'], REQUIRED_SCOPE);
    assert.equal(challenge['error'], undefined, 'no error code when no credentials were sent (RFC 6750 §3.1)');
    const body = (await response.json()) as { jsonrpc: string; error: { message: string } };
    assert.equal(body.jsonrpc, '2.0');
    assert.match(body.error.message, /authentication required/);
    const perServer = await initialize(`${jwks.base}/servers/everything/mcp`);
    assert.equal(challengeOf(perServer)['resource_metadata'], `${PUBLIC}/.well-known/oauth-protected-resource/servers/everything/mcp`);
  });

  it('serves RFC 9728 metadata for the public URL and each endpoint path, saying https behind a plain-http listener', async () => {
    for (const [path, resource] of [
      ['/mcp', `${PUBLIC}/mcp`],
      ['', PUBLIC],
      ['/servers/everything/mcp', `${PUBLIC}/servers/everything/mcp`],
      [`/servers/${tenant}/everything/mcp`, `${PUBLIC}/servers/${tenant}/everything/mcp`],
    ] as const) {
      const response = await fetch(`${jwks.base}/.well-known/oauth-protected-resource${path}`);
      assert.equal(response.status, 200, path);
      assert.deepEqual(await response.json(), {
        resource,
        authorization_servers: [issuer.issuer],
        scopes_supported: [REQUIRED_SCOPE],
        bearer_methods_supported: ['header'],
        resource_name: 'Punk MCP endpoint',
      });
    }
    assert.equal((await fetch(`${jwks.base}/.well-known/oauth-protected-resource/not/an/endpoint`)).status, 404);
    const preflight = await fetch(`${jwks.base}/.well-known/oauth-protected-resource/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example.test',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'mcp-protocol-version',
      },
    });
    assert.equal(preflight.status, 204, 'a browser client may read the metadata');
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
    assert.equal(preflight.headers.get('access-control-allow-headers'), 'mcp-protocol-version');
  });

  it('a good token works with the SDK client of both eras, and its subject reaches governance and the ledger', async () => {
    const token = await jwt();
    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const client = await connect(`${jwks.base}/mcp`, token, era);
      try {
        const { tools } = await client.listTools();
        assert.ok(
          tools.some((t) => t.name === 'everything__echo'),
          `${era}: ${tools.map((t) => t.name).join(', ')}`,
        );
        const result = await client.callTool({ name: 'everything__echo', arguments: { message: `hello ${era}` } });
        assert.match(JSON.stringify(result.content), new RegExp(`hello ${era}`));
      } finally {
        await client.close();
      }
    }
    const events = (await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 })).map((m) =>
      ledgerEventSchema.parse(m.data),
    );
    const called = events.filter((e) => e.type === 'tool.called' && e.tenant === tenant);
    assert.equal(called.length, 2);
    for (const event of called) {
      assert.equal(event.principal?.subject, 'alice');
      assert.deepEqual(event.principal?.groups, ['engineering']);
      // The gateway decided for alice: its decision to allow travels in her tool.called.
      assert.equal((event.data['decision'] as { decision?: unknown } | undefined)?.decision, 'allow');
    }
  });

  it('the SDK client discovers everything from the 401 (RFC 9728, RFC 8414), gets a token for this resource (RFC 8707) and calls, through a TLS-terminating ingress', async () => {
    // The client knows only the public https URL; the "ingress" (its fetch) forwards to the plain-http listener.
    const ingress: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (url.origin !== PUBLIC) return fetch(input, init);
      return fetch(new URL(`${url.pathname}${url.search}`, jwks.base), init);
    };
    const client = new Client({ name: 'robot', version: '1.0.0' });
    const authProvider = new ClientCredentialsProvider({ clientId: ROBOT.id, clientSecret: ROBOT.secret, expectedIssuer: issuer.issuer });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(`${PUBLIC}/mcp`), { authProvider, fetch: ingress }));
      const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'machine to machine' } });
      assert.match(JSON.stringify(result.content), /machine to machine/);
    } finally {
      await client.close();
    }
    const request = issuer.tokenRequests.at(-1)!;
    assert.equal(request.get('resource'), `${PUBLIC}/mcp`, 'the token was asked for this endpoint');
    assert.equal(request.get('scope'), REQUIRED_SCOPE, 'with the scope the challenge named');
  });

  it('the token is never forwarded to the upstream server', async () => {
    const token = await jwt();
    const client = await connect(`${jwks.base}/mcp`, token, '2025-11-25');
    try {
      const result = await client.callTool({ name: 'recorder__whoami', arguments: {} });
      assert.match(JSON.stringify(result.content), /hello from the recorder/);
    } finally {
      await client.close();
    }
    assert.ok(recorder.headers.length > 0, 'the upstream was reached');
    for (const headers of recorder.headers) {
      assert.equal(headers.authorization, undefined);
      assert.ok(!JSON.stringify(headers).includes(token.split('.')[2]!), 'no header carries the token');
    }
  });

  const refused: Array<[string, () => Promise<string>, RegExp]> = [
    ['expired', () => jwt({}, { expiresIn: '-2m' }), /expired/],
    ['for another audience', () => jwt({}, { audience: 'https://elsewhere.example.test/mcp' }), /not meant for this resource/],
    [
      'for another endpoint (per-server token on /mcp)',
      () => jwt({}, { audience: `${PUBLIC}/servers/everything/mcp` }),
      /not meant for this resource/,
    ],
    ['from another issuer', () => jwt({}, { issuer: 'https://evil.example.test/' }), /another authorization server/],
    ['signed by a key the issuer does not publish', () => jwt({}, { key: strangerKey }), /no key .* matches|signature/],
    [
      'unsigned (alg: none)',
      async () =>
        unsecured({
          sub: 'alice',
          iss: issuer.issuer,
          aud: `${PUBLIC}/mcp`,
          scope: REQUIRED_SCOPE,
          exp: Math.floor(Date.now() / 1000) + 300,
        }),
      /algorithm|malformed/,
    ],
    ['with a tampered payload', async () => tamper(await jwt()), /signature/],
    ['not a JWT at all', async () => 'opaque-but-not-introspected', /malformed/],
  ];
  for (const [what, make, reason] of refused) {
    it(`a token ${what}: 401 invalid_token`, async () => {
      const response = await initialize(`${jwks.base}/mcp`, await make());
      assert.equal(response.status, 401);
      const challenge = challengeOf(response);
      assert.equal(challenge['error'], 'invalid_token');
      assert.equal(challenge['resource_metadata'], `${PUBLIC}/.well-known/oauth-protected-resource/mcp`);
      assert.match(challenge['error_description'] ?? '', reason);
    });
  }

  it('a token without the required scope: 403 insufficient_scope naming it', async () => {
    const response = await initialize(`${jwks.base}/mcp`, await jwt({ scope: 'openid' }));
    assert.equal(response.status, 403);
    const challenge = challengeOf(response);
    assert.equal(challenge['error'], 'insufficient_scope');
    assert.equal(challenge['scope'], REQUIRED_SCOPE);
  });

  it('a token for the per-server endpoint works there', async () => {
    const response = await initialize(
      `${jwks.base}/servers/everything/mcp`,
      await jwt({}, { audience: `${PUBLIC}/servers/everything/mcp` }),
    );
    assert.equal(response.status, 200);
  });

  it('a token in the URL is refused: 400 invalid_request', async () => {
    const response = await initialize(`${jwks.base}/mcp?access_token=${await jwt()}`);
    assert.equal(response.status, 400);
    assert.equal(challengeOf(response)['error'], 'invalid_request');
  });

  it('the JWKS rotates: a token with a new kid is accepted after a refetch, a retired key is refused', async () => {
    assert.equal((await initialize(`${jwks.base}/mcp`, await jwt())).status, 200);
    keys.current = [key2];
    const fetchesBefore = issuer.jwksFetches.length;
    assert.equal((await initialize(`${jwks.base}/mcp`, await jwt({}, { key: key2 }))).status, 200);
    assert.ok(issuer.jwksFetches.length > fetchesBefore, 'the unknown kid made the front fetch the JWKS again');
    const retired = await initialize(`${jwks.base}/mcp`, await jwt({}, { key: key1 }));
    assert.equal(retired.status, 401);
    assert.match(challengeOf(retired)['error_description'] ?? '', /no key .* matches/);
    keys.current = [key1, key2];
  });

  it('introspection (RFC 7662): an active token works; inactive or foreign-audience ones are refused', async () => {
    const exp = Math.floor(Date.now() / 1000) + 300;
    tokens.set('opaque-good', {
      active: true,
      sub: 'bob',
      aud: `${PUBLIC}/mcp`,
      iss: issuer.issuer,
      scope: REQUIRED_SCOPE,
      exp,
      groups: ['ops'],
    });
    tokens.set('opaque-inactive', { active: false });
    tokens.set('opaque-elsewhere', { active: true, sub: 'bob', aud: 'https://elsewhere.example.test/mcp', exp });
    tokens.set('opaque-expired', { active: true, sub: 'bob', aud: `${PUBLIC}/mcp`, exp: Math.floor(Date.now() / 1000) - 120 });
    const client = await connect(`${introspected.base}/mcp`, 'opaque-good', '2026-07-28');
    try {
      const result = await client.callTool({ name: 'everything__echo', arguments: { message: 'introspected' } });
      assert.match(JSON.stringify(result.content), /introspected/);
    } finally {
      await client.close();
    }
    const last = issuer.introspections.at(-1)!;
    assert.equal(new URLSearchParams(last.body).get('token'), 'opaque-good');
    assert.match(last.authorization ?? '', /^Basic /);
    for (const [token, reason] of [
      ['opaque-inactive', /not active/],
      ['opaque-elsewhere', /not meant for this resource/],
      ['opaque-expired', /expired/],
    ] as const) {
      const response = await initialize(`${introspected.base}/mcp`, token);
      assert.equal(response.status, 401, token);
      assert.match(challengeOf(response)['error_description'] ?? '', reason);
    }
  });

  it('introspection that fails on the authorization server: 503, not a refusal of the token', async () => {
    const broken = await startFront(bus, tenant, {
      publicUrl: PUBLIC,
      introspection: { url: `${issuer.base}/introspect`, clientId: INTROSPECTION_CLIENT.id, clientSecret: 'wrong' },
    });
    try {
      const response = await initialize(`${broken.base}/mcp`, 'opaque-good');
      assert.equal(response.status, 503);
      assert.equal(response.headers.get('www-authenticate'), null);
    } finally {
      await broken.front.close();
      await closeHttp(broken.http);
    }
  });

  it('with authentication off every caller is anonymous: no challenge, no metadata, and the admin API says how to turn it on', async () => {
    const open = await startFront(bus, tenant, undefined);
    try {
      assert.equal((await initialize(`${open.base}/mcp`)).status, 200);
      assert.equal((await initialize(`${open.base}/mcp`, 'whatever')).status, 200, 'a token is ignored');
      assert.equal((await fetch(`${open.base}/.well-known/oauth-protected-resource/mcp`)).status, 404);
      const admin = await fetch(`${open.base}/api/v1/api-keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"name":"x"}',
      });
      assert.equal(admin.status, 404);
      assert.match(((await admin.json()) as { error: { message: string } }).error.message, /PUNK_AUTH_MODE=on/);
    } finally {
      await open.front.close();
      await closeHttp(open.http);
    }
  });

  it('a static key verifies tokens, and a tenant claim naming another tenant is 403', async () => {
    const ok = await initialize(`${staticKey.base}/mcp`, await jwt({ tenant }));
    assert.equal(ok.status, 200);
    const other = await initialize(`${staticKey.base}/mcp`, await jwt({ tenant: 'someone-else' }));
    assert.equal(other.status, 403);
    assert.match(((await other.json()) as { error: { message: string } }).error.message, /for tenant someone-else/);
    const none = await initialize(`${staticKey.base}/mcp`, await jwt());
    assert.equal(none.status, 403);
    const stranger = await initialize(`${staticKey.base}/mcp`, await jwt({ tenant }, { key: strangerKey }));
    assert.equal(stranger.status, 401);
  });

  it('an access token with the admin scope is a tenant admin of its tenant; with the platform admin scope it acts in every tenant, whatever its tenant claim', async () => {
    const servers = async (token: string, query = '') =>
      fetch(`${staticKey.base}/api/v1/mcp/servers${query}`, { headers: { authorization: `Bearer ${token}` } });
    const tenantAdmin = await jwt({ tenant, scope: 'punk:admin' }, { audience: PUBLIC });
    assert.equal((await servers(tenantAdmin)).status, 200);
    const refused = await servers(tenantAdmin, '?tenant=someone-else');
    assert.equal(refused.status, 403);
    assert.match(
      ((await refused.json()) as { error: { message: string } }).error.message,
      new RegExp(
        `admin of tenant ${tenant} acts only in tenant ${tenant}: acting in tenant someone-else needs the scope punk:platform-admin`,
      ),
    );
    const platform = await jwt({ tenant: 'someone-else', scope: 'punk:platform-admin' }, { audience: PUBLIC });
    assert.equal((await servers(platform, '?tenant=someone-else')).status, 200);
    assert.equal((await servers(platform)).status, 200, "a platform admin's tenant claim may name another tenant");
    assert.equal(
      (await initialize(`${staticKey.base}/mcp`, await jwt({ tenant: 'someone-else', scope: 'punk:platform-admin' }))).status,
      200,
    );
  });

  it("Punk's OAuth client for token exchange needs both its id and secret, and PUNK_AUTH_ISSUER; start-up says so", () => {
    const env = { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: PUBLIC, PUNK_AUTH_JWKS_URL: 'https://issuer.example.test/jwks' };
    const rule = /PUNK_OAUTH_CLIENT_ID and PUNK_OAUTH_CLIENT_SECRET go together, with PUNK_AUTH_ISSUER/;
    assert.throws(
      () => authOptionsFromConfig(loadConfig({ ...env, PUNK_AUTH_ISSUER: 'https://issuer.example.test', PUNK_OAUTH_CLIENT_ID: 'punk' })),
      rule,
    );
    assert.throws(
      () => authOptionsFromConfig(loadConfig({ ...env, PUNK_OAUTH_CLIENT_ID: 'punk', PUNK_OAUTH_CLIENT_SECRET: 's3cret' })),
      rule,
    );
    assert.deepEqual(
      authOptionsFromConfig(
        loadConfig({
          ...env,
          PUNK_AUTH_ISSUER: 'https://issuer.example.test',
          PUNK_OAUTH_CLIENT_ID: 'punk',
          PUNK_OAUTH_CLIENT_SECRET: 's3cret',
        }),
      )?.oauthClient,
      { clientId: 'punk', clientSecret: 's3cret' },
    );
  });

  it('an oct (HMAC) key verifies HS256 tokens once PUNK_AUTH_ALGORITHMS names HS256; start-up refuses it with the default algorithms, and refuses a garbage key', async () => {
    const secret = randomBytes(32);
    const env = {
      PUNK_AUTH_MODE: 'on',
      PUNK_PUBLIC_URL: PUBLIC,
      PUNK_AUTH_JWT_KEY: JSON.stringify({ kty: 'oct', k: secret.toString('base64url') }),
    };
    assert.throws(
      () => authOptionsFromConfig(loadConfig(env)),
      /PUNK_AUTH_JWT_KEY is an oct \(HMAC\) key, but PUNK_AUTH_ALGORITHMS \(RS256,.*\) names none of HS256, HS384, HS512.*set PUNK_AUTH_ALGORITHMS=HS256/,
    );
    assert.throws(
      () => authOptionsFromConfig(loadConfig({ ...env, PUNK_AUTH_JWT_KEY: 'garbage' })),
      /PUNK_AUTH_JWT_KEY: not a PEM public key or a JWK/,
    );
    assert.throws(
      () => authOptionsFromConfig(loadConfig({ ...env, PUNK_AUTH_JWT_KEY: key1.publicPem, PUNK_AUTH_ALGORITHMS: 'HS256' })),
      /PUNK_AUTH_JWT_KEY is a public key, but PUNK_AUTH_ALGORITHMS \(HS256\) names only HMAC algorithms/,
    );
    const hmac = await startFront(bus, tenant, authOptionsFromConfig(loadConfig({ ...env, PUNK_AUTH_ALGORITHMS: 'HS256' })));
    try {
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('alice')
        .setAudience(`${PUBLIC}/mcp`)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(secret);
      assert.equal((await initialize(`${hmac.base}/mcp`, token)).status, 200);
      assert.equal((await initialize(`${hmac.base}/mcp`, await jwt())).status, 401, 'an RS256 token is refused');
    } finally {
      await hmac.front.close();
      await closeHttp(hmac.http);
    }
  });
});

/** An unsecured JWT (RFC 7519 §6): header `{"alg":"none"}` and an empty signature. */
function unsecured(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(claims)}.`;
}

/** The same JWT with its payload changed (`sub` replaced) and the original signature kept. */
function tamper(token: string): string {
  const [header, payload, signature] = token.split('.');
  const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Record<string, unknown>;
  return `${header}.${Buffer.from(JSON.stringify({ ...claims, sub: 'mallory' })).toString('base64url')}.${signature}`;
}
