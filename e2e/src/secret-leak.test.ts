/**
 * No secret ever leaves the vault: this test plants recognisable secrets (a static credential, an OAuth2 client
 * secret and tokens, every token the token endpoint issues later, and a literal header value typed into a
 * registration), drives every path that touches them through the real `punk up` (credentials and registry API,
 * test endpoint, tool calls with a refresh ahead of expiry, a refresh after a 401, a revoked grant, bad input,
 * a credential value with a line break used in a header, a literal header value with one, a NUL value, the ledger API), and searches every output: HTTP answers (bodies and headers), the process's logs, the ledger,
 * and the database files at rest. Every API answer is also checked against the OpenAPI document.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startOAuthTokenServer, type OAuthTokenServer } from '../../services/gateway/dist/test/fixtures/oauth-token-server.js';
import { startProtectedMcpServer, type ProtectedMcpServer } from '../../services/gateway/dist/test/fixtures/protected-mcp-server.js';
import { checkAnswer } from '../../services/mcp-front/dist/test/openapi-check.js';
import { connectClient, textOf } from './clients.js';
import { manifestDir, removeDir, startPunk, type RunningPunk } from './harness.js';

const planted = (label: string) => `planted-${label}-${randomBytes(8).toString('hex')}`;
const STATIC_SECRET = planted('static');
const ROTATED_SECRET = planted('rotated');
const LITERAL_HEADER = planted('literal');
const REJECTED_VALUE = planted('rejected');
const CLIENT_SECRET = planted('client-secret');
const CRLF_SECRET = planted('crlf');
const CRLF_LITERAL = planted('crlf-literal');
const NUL_SECRET = planted('nul');

let tokens: OAuthTokenServer;
let upstream: ProtectedMcpServer;
let punk: RunningPunk;
let manifests: string;
let dataRoot: string;
/** Everything Punk answered: status lines, headers and bodies. */
const answers: string[] = [];

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${punk.baseUrl}/api/v1${path}`, {
    method,
    ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  answers.push(`${method} ${path} ${response.status} ${JSON.stringify([...response.headers])} ${text}`);
  const json = text === '' ? undefined : JSON.parse(text);
  checkAnswer(method, `/api/v1${path}`, response.status, json);
  return { status: response.status, json };
}

/** Every file under `dir`, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(path)));
    else if ((await stat(path)).isFile()) out.push(path);
  }
  return out;
}

before(async () => {
  tokens = await startOAuthTokenServer({ clientId: 'punk-gateway', clientSecret: CLIENT_SECRET, accessTokenTtlSeconds: 3600 });
  upstream = await startProtectedMcpServer({ accepts: (token) => tokens.isValid(token) });
  manifests = await manifestDir('leak', {});
  dataRoot = await mkdtemp(join(tmpdir(), 'punk-leak-data-'));
  punk = await startPunk({
    manifestDir: manifests,
    args: ['--data', join(dataRoot, 'data')],
    env: { PUNK_LOG_LEVEL: 'trace', PUNK_ENCRYPTION_KEY: randomBytes(32).toString('base64') },
  });
});

after(async () => {
  await punk?.stop();
  await upstream?.close();
  await tokens?.close();
  await removeDir(manifests);
  await removeDir(dataRoot);
});

test('no planted secret appears in any answer, log line, ledger event or database file', { timeout: 180_000 }, async () => {
  const grant = tokens.issueGrant();
  // Expired: the first connect refreshes ahead of use.
  const oauth = {
    access_token: grant.accessToken,
    refresh_token: grant.refreshToken,
    expires_at: String(Date.now() - 1_000),
    token_url: tokens.tokenUrl,
    client_id: 'punk-gateway',
    client_secret: CLIENT_SECRET,
  };
  assert.equal((await api('POST', '/credentials', { id: 'api-key', data: { value: STATIC_SECRET } })).status, 201);
  const created = await api('POST', '/credentials', { id: 'upstream-oauth', data: oauth });
  assert.equal(created.status, 201);
  assert.equal(created.json.credential.type, 'oauth2');
  assert.deepEqual([...created.json.credential.keys].sort(), Object.keys(oauth).sort());
  // Bad input is refused naming the field, never echoing the value.
  const refused = await api('POST', '/credentials', { id: 'bad', data: { value: REJECTED_VALUE }, extra: REJECTED_VALUE });
  assert.equal(refused.status, 400);
  assert.match(refused.json.error.message, /extra/);
  assert.equal((await api('POST', '/credentials', { id: 'api-key', data: { value: REJECTED_VALUE } })).status, 409);
  assert.equal((await api('GET', '/credentials')).json.credentials.length, 2);
  assert.equal((await api('GET', '/credentials/upstream-oauth')).json.credential.id, 'upstream-oauth');

  const registration = {
    name: 'protected',
    type: 'http',
    url: upstream.url,
    headers: { Authorization: 'cred:upstream-oauth', 'X-Api-Key': 'cred:api-key', 'X-Literal': LITERAL_HEADER },
  };
  const registered = await api('POST', '/mcp/servers', registration);
  assert.equal(registered.status, 201);
  assert.equal(registered.json.server.registration.headers['X-Literal'], '<redacted>');
  const tested = await api('POST', '/mcp/servers/protected/test');
  assert.equal(tested.json.ok, true, JSON.stringify(tested.json));
  assert.ok(tested.json.tools.some((t: { name: string }) => t.name === 'echo'));
  assert.equal(
    tokens.requests.filter((r) => r.grantType === 'refresh_token').length,
    1,
    'the expired access token was refreshed once, at connect',
  );
  const sent = upstream.requests.filter((r) => r.refused === undefined).at(-1)!;
  assert.equal(sent.headers['x-api-key'], STATIC_SECRET, 'the static credential reached the upstream');
  assert.equal(sent.headers['x-literal'], LITERAL_HEADER);
  // Rotated in place (PUT): the next connect sends the new value; a value no header can carry is refused when stored.
  const rotated = await api('PUT', '/credentials/api-key', { data: { value: ROTATED_SECRET } });
  assert.equal(rotated.status, 200);
  assert.deepEqual(rotated.json.credential.keys, ['value']);
  assert.equal((await api('POST', '/mcp/servers/protected/test')).json.ok, true);
  assert.equal(upstream.requests.filter((r) => r.refused === undefined).at(-1)!.headers['x-api-key'], ROTATED_SECRET);
  const placeholder = await api('PUT', '/credentials/api-key', { data: { value: 'Bearer ghp_…' } });
  assert.equal(placeholder.status, 400);
  assert.match(placeholder.json.error.message, /^data\.value: holds U\+2026 at character 12, a character no HTTP header can carry/);
  assert.equal((await api('PUT', '/credentials/no-such', { data: { value: 'x' } })).status, 404);

  const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
  try {
    const call = async () => client.callTool({ name: 'protected__echo', arguments: { text: 'hello' } });
    await waitUntil(async () => textOf(await call()) === 'hello', 'the registered server answers through /mcp');

    // The upstream stops accepting the current token: one 401, one refresh, one retry.
    const before401 = tokens.requests.length;
    for (const token of tokens.issuedTokens()) tokens.invalidateAccessToken(token);
    assert.equal(textOf(await call()), 'hello');
    assert.equal(tokens.requests.length - before401, 1, 'one refresh after the 401');

    // A revoked grant: a clear error, one refresh attempt, no loop.
    // Only the grant's live refresh token (the vault holds it) names the grant: try each token issued.
    const revoked = tokens.issuedTokens().filter((token) => {
      try {
        tokens.revokeGrant(token);
        return true;
      } catch {
        return false;
      }
    });
    assert.equal(revoked.length, 1);
    const beforeRevoked = tokens.requests.length;
    const failure = await call().then(
      (result) => assert.fail(`a call with a revoked grant answered ${JSON.stringify(result)}`),
      (error: unknown) => `${(error as Error).message} ${JSON.stringify((error as { data?: unknown }).data)}`,
    );
    assert.match(failure, /CredentialRefreshFailed/);
    assert.match(failure, /grant was revoked/);
    assert.equal(tokens.requests.length - beforeRevoked, 1, 'a revoked grant is tried once');
    answers.push(failure);
  } finally {
    await client.close();
  }

  // A credential whose value no header can hold (a line break: allowed, since env values such as PEM keys have
  // them) fails the connection with a sentence naming the header and the credential, never the value.
  assert.equal((await api('POST', '/credentials', { id: 'crlf', data: { value: `Bearer ${CRLF_SECRET}\r\nX: y` } })).status, 201);
  assert.equal(
    (await api('POST', '/mcp/servers', { name: 'crlf', type: 'http', url: upstream.url, headers: { Authorization: 'cred:crlf' } })).status,
    201,
  );
  const crlfTest = await api('POST', '/mcp/servers/crlf/test');
  assert.equal(crlfTest.status, 200);
  assert.equal(crlfTest.json.ok, false);
  assert.match(crlfTest.json.error, /header Authorization: the value of credential cred:crlf is not a valid HTTP header value/);
  assert.match(
    (await api('GET', '/mcp/servers/crlf')).json.server.lastError ?? '',
    /credential cred:crlf is not a valid HTTP header value/,
  );
  assert.equal((await api('DELETE', '/mcp/servers/crlf')).status, 204);
  // The same value typed in as a literal is refused at registration, and a NUL at credential creation: by field, without echo.
  const literal = await api('POST', '/mcp/servers', {
    name: 'crlf-literal',
    type: 'http',
    url: upstream.url,
    headers: { 'X-Literal': `${CRLF_LITERAL}\r\nX: y` },
  });
  assert.equal(literal.status, 400);
  assert.equal(literal.json.error.code, 'InvalidRegistration');
  assert.match(literal.json.error.message, /^body\.headers\.X-Literal: must be a valid HTTP field value/);
  const nul = await api('POST', '/credentials', { id: 'nul', data: { value: `${NUL_SECRET}\u0000z` } });
  assert.equal(nul.status, 400);
  assert.match(nul.json.error.message, /^data\.value: must not contain a NUL character/);
  // An id that cannot be one is unknown, not a database error.
  const nulId = await api('DELETE', '/credentials/%00');
  assert.equal(nulId.status, 404);
  assert.equal(nulId.json.error.code, 'CredentialNotFound');

  const shown = await api('GET', '/mcp/servers/protected');
  assert.equal(shown.json.server.registration.headers['X-Literal'], '<redacted>');
  assert.equal((await api('PUT', '/mcp/servers/protected', shown.json.server.registration)).status, 200);
  await api('GET', '/mcp/servers');
  await api('GET', '/mcp/servers/protected/tools');
  assert.equal((await api('DELETE', '/mcp/servers/protected')).status, 204);
  assert.equal((await api('DELETE', '/credentials/upstream-oauth')).status, 204);

  // The ledger: every run of the tenant with its events.
  const runs = await waitUntil(async () => {
    const listed = (await api('GET', '/runs?limit=500')).json.runs as Array<{ runId: string; types: string[] }>;
    return listed.some((r) => r.types.includes('credential.deleted')) ? listed : undefined;
  }, 'the ledger has the credential events');
  for (const run of runs) await api('GET', `/runs/${encodeURIComponent(run.runId)}?tenant=default`);
  const types = new Set(runs.flatMap((r) => r.types));
  for (const type of [
    'credential.created',
    'credential.refreshed',
    'credential.refresh_failed',
    'credential.deleted',
    'server.registered',
    'server.tested',
    'server.updated',
    'server.deregistered',
    'tool.called',
  ]) {
    assert.ok(types.has(type), `the ledger records ${type}`);
  }
  assert.equal((await api('GET', '/ledger/verify')).json.ok, true);

  await punk.stop();
  const secrets = [
    STATIC_SECRET,
    ROTATED_SECRET,
    LITERAL_HEADER,
    REJECTED_VALUE,
    CLIENT_SECRET,
    CRLF_SECRET,
    CRLF_LITERAL,
    NUL_SECRET,
    grant.accessToken,
    grant.refreshToken,
    ...tokens.issuedTokens(),
  ];
  const outputs = { answers: answers.join('\n'), logs: punk.output() };
  assert.ok(outputs.logs.length > 10_000, 'the logs were captured (trace level)');
  for (const secret of secrets) {
    for (const [where, text] of Object.entries(outputs))
      assert.ok(!text.includes(secret), `a planted secret appears in the ${where}: ${secret.slice(0, 16)}…`);
  }
  // At rest: credentials are encrypted (a literal header value is stored as typed: use cred: references for secrets).
  const files = await filesUnder(join(dataRoot, 'data'));
  assert.ok(files.length > 0);
  for (const file of files) {
    const bytes = await readFile(file);
    for (const secret of secrets.filter((s) => s !== LITERAL_HEADER))
      assert.equal(bytes.includes(secret), false, `${file} holds a planted secret in clear`);
  }
});

async function waitUntil<T>(probe: () => Promise<T | undefined | false>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (${String(last)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
