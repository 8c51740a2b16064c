/**
 * Credential references of an upstream connection, against real servers on loopback: `spec.headers` resolved
 * through the vault and sent on every request, `cred:` env values of a local server, and the one renewal, one
 * reconnect and one retry after an HTTP 401 — never a loop, never a secret in a log line or an error.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { McpServer } from '@modelcontextprotocol/server';
import { PunkError, redact } from '@punk/lib';
import { z } from 'zod';
import { fixture, manifest, startHarness, waitFor } from './harness.js';
import { startMutableToolsServer } from './fixtures/mutable-tools-server.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { mapSecrets, startUpstream } from './upstream-harness.js';

type ToolResult = { content: { type: string; text: string }[]; isError?: boolean };
const NO_RETRY = 3_600_000;

test('headers from the vault and literal headers reach the server on every request, and the secret is never logged', async (t) => {
  const server = await startProtectedMcpServer({ token: 'planted-secret-7f3a' });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:api-token': { value: 'Bearer planted-secret-7f3a' } });
  const under = await startUpstream(
    manifest('t-headers', 'protected', {
      url: server.url,
      headers: [
        { name: 'Authorization', value: 'cred:api-token' },
        { name: 'X-Client-Team', value: 'platform' },
      ],
    }),
    { secrets },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  const outcome = await under.upstream.callTool('echo', { text: 'hi' }, undefined);
  assert.ok(outcome.ok);
  assert.equal((outcome.result as ToolResult).content[0]!.text, 'hi');
  assert.ok(server.requests.length >= 3, 'handshake, listing and call requests');
  for (const request of server.requests) {
    assert.equal(request.headers.authorization, 'Bearer planted-secret-7f3a', `${request.method} ${request.path}`);
    assert.equal(request.headers['x-client-team'], 'platform');
  }
  assert.ok(under.lines.length > 0);
  assert.ok(!under.lines.some((line) => line.includes('planted-secret-7f3a')), 'no log line holds the secret');
});

test('a reference that does not resolve fails the start naming the header, and a missing vault says so', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const spec = { url: server.url, headers: [{ name: 'Authorization', valueFrom: { credentialRef: { name: 'missing' } } }] };
  const unknown = await startUpstream(manifest('t-missing', 'protected', spec), { secrets: mapSecrets({}), initialBackoffMs: NO_RETRY });
  t.after(() => unknown.close());
  assert.equal(unknown.upstream.state, 'failed');
  assert.match(unknown.upstream.error!, /header Authorization: credential missing does not exist/);
  const vaultless = await startUpstream(manifest('t-vaultless', 'protected', spec));
  t.after(() => vaultless.close());
  assert.equal(vaultless.upstream.state, 'failed');
  assert.match(vaultless.upstream.error!, /header Authorization references a credential, but this gateway has no credentials vault/);
  assert.equal(server.requests.length, 0, 'nothing was sent without the header');
});

test('env values of a local server come from the vault (cred: literals and credentialRef), and a Secret is refused by name', async (t) => {
  const secrets = mapSecrets({ 'cred:db': { value: 'postgres://u:env-secret-91@db/x' }, 'cred:api/key': { value: 'api-secret-12' } });
  const counter = (name: string, env: unknown[]) =>
    manifest('t-env', name, { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')], env });
  const under = await startUpstream(
    counter('counter', [
      { name: 'DATABASE_URL', value: 'cred:db' },
      { name: 'API_KEY', valueFrom: { credentialRef: { name: 'api', key: 'key' } } },
      { name: 'PLAIN', value: 'x-$(API_KEY)' },
    ]),
    { secrets },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  const outcome = await under.upstream.callTool('env', {}, undefined);
  assert.ok(outcome.ok);
  const { env } = JSON.parse((outcome.result as ToolResult).content[0]!.text) as { env: Record<string, string> };
  // The process got the values; the result that goes back to the caller has them masked (no credential reaches a client).
  assert.equal(env.DATABASE_URL, '<redacted>');
  assert.equal(env.API_KEY, '<redacted>');
  assert.equal(env.PLAIN, 'x-<redacted>', 'later literals may still expand an earlier variable');
  assert.ok(!under.lines.some((line) => line.includes('env-secret-91') || line.includes('api-secret-12')));

  const secret = await startUpstream(
    counter('secret', [{ name: 'API_TOKEN', valueFrom: { secretKeyRef: { name: 'tokens', key: 'api' } } }]),
    { secrets },
  );
  t.after(() => secret.close());
  assert.equal(secret.upstream.state, 'failed');
  assert.match(secret.upstream.error!, /env API_TOKEN comes from Secret tokens, which only the cluster resolves/);
  assert.deepEqual(secret.states, ['starting', 'failed'], 'no restart: retrying cannot help');
});

test('an HTTP 401 on a call renews the OAuth2 credential once, reconnects with the new header and retries the call once', async (t) => {
  const server = await startProtectedMcpServer({ token: 'access-1' });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } }, () => 'Bearer access-2');
  const under = await startUpstream(
    manifest('t-renew', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    { secrets },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);

  // The authorization server rotated the token: the old one is refused from now on.
  server.requireToken('access-2');
  const outcome = await under.upstream.callTool('echo', { text: 'after rotation' }, undefined);
  assert.ok(outcome.ok, JSON.stringify(outcome));
  assert.equal((outcome.result as ToolResult).content[0]!.text, 'after rotation');
  assert.deepEqual(secrets.renewals, [{ credentialId: 'oauth', rejected: 'Bearer access-1' }]);
  assert.ok(server.requests.some((r) => r.refused === 401));
  const last = server.requests.at(-1)!;
  assert.equal(last.headers.authorization, 'Bearer access-2');
  assert.equal(under.upstream.state, 'ready');
  assert.equal(under.upstream.catalog().circuit, 'closed', 'a refused credential is not a server failure');
  assert.ok(!under.lines.some((line) => line.includes('access-1') || line.includes('access-2')));
});

test('an HTTP 401 while listing after list_changed renews the credential once and lists again; the tools stay served', async (t) => {
  let accepted = 'access-1';
  const server = await startMutableToolsServer([{ name: 'add', description: 'Adds.', inputSchema: { type: 'object' } }], {
    accepts: (token) => token === accepted,
  });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } }, () => 'Bearer access-2');
  const under = await startUpstream(
    manifest('t-list-401', 'oauth', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    { secrets },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  // The upstream stops accepting the token, then says its tools changed.
  accepted = 'access-2';
  server.setTool({ name: 'sub', description: 'Subtracts.', inputSchema: { type: 'object' } });
  await waitFor(
    () => under.upstream.catalog().tools.some((tool) => tool.name === 'sub'),
    10_000,
    'the new listing, with the renewed credential',
  );
  assert.deepEqual(secrets.renewals, [{ credentialId: 'oauth', rejected: 'Bearer access-1' }]);
  assert.ok(
    under.upstream.catalog().tools.some((tool) => tool.name === 'add'),
    'the tools stayed served',
  );
  assert.equal(under.upstream.state, 'ready');
});

test('calls refused together share one renewal', async (t) => {
  const server = await startProtectedMcpServer({ token: 'access-1' });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } }, () => 'Bearer access-2');
  const under = await startUpstream(
    manifest('t-together', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    { secrets },
  );
  t.after(() => under.close());
  server.requireToken('access-2');
  const outcomes = await Promise.all([1, 2, 3].map((i) => under.upstream.callTool('echo', { text: `call ${i}` }, undefined)));
  assert.deepEqual(
    outcomes.map((o) => o.ok && (o.result as ToolResult).content[0]!.text),
    ['call 1', 'call 2', 'call 3'],
  );
  assert.equal(secrets.renewals.length, 1);
});

test('an HTTP 401 at connect time is renewed once too', async (t) => {
  const server = await startProtectedMcpServer({ token: 'fresh' });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer stale', oauth2: 'oauth' } }, () => 'Bearer fresh');
  const under = await startUpstream(
    manifest('t-connect', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    { secrets },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  assert.equal(secrets.renewals.length, 1);
  assert.equal(under.upstream.knownTool('echo') !== undefined, true);
});

test('a second 401 after the renewal is a clear error, after exactly one renewal', async (t) => {
  const server = await startProtectedMcpServer({ token: 'access-1' });
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } }, () => 'Bearer access-2');
  const under = await startUpstream(
    manifest('t-revoked', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    {
      secrets,
      initialBackoffMs: NO_RETRY,
    },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);

  // The grant was revoked: no token works any more.
  server.requireToken('nobody-has-this');
  await assert.rejects(under.upstream.callTool('echo', { text: 'x' }, undefined), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'UpstreamUnauthorized');
    assert.match(error.message, /answered HTTP 401 \(unauthorized\) again after its OAuth2 credentials were renewed/);
    assert.ok(!error.message.includes('access-'), 'no token in the error');
    return true;
  });
  assert.equal(secrets.renewals.length, 1);
  assert.equal(under.upstream.state, 'failed');
});

test('a renewal the vault cannot make surfaces its error, and a 401 with nothing to renew says so', async (t) => {
  const server = await startProtectedMcpServer({ token: 'access-1' });
  t.after(() => server.close());
  const refusing = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } });
  const oauth = await startUpstream(
    manifest('t-refresh-fails', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    { secrets: refusing },
  );
  t.after(() => oauth.close());
  const plain = await startUpstream(
    manifest('t-static', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:static' }] }),
    {
      secrets: mapSecrets({ 'cred:static': { value: 'Bearer access-1' } }),
    },
  );
  t.after(() => plain.close());
  assert.equal(oauth.upstream.state, 'ready');
  assert.equal(plain.upstream.state, 'ready');

  server.requireToken('access-2');
  await assert.rejects(oauth.upstream.callTool('echo', { text: 'x' }, undefined), { code: 'CredentialRefreshFailed' });
  assert.equal(refusing.renewals.length, 1);
  await assert.rejects(plain.upstream.callTool('echo', { text: 'x' }, undefined), (error: unknown) => {
    assert.ok(error instanceof PunkError && error.code === 'UpstreamUnauthorized');
    assert.match(error.message, /no header comes from an OAuth2 credential that could be renewed/);
    return true;
  });
});

test('a credential value that no header or variable can hold fails the start naming the entry and the credential, never the value', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const secrets = mapSecrets({ 'cred:crlf': { value: 'Bearer TOPSECRET-CRLF-999\r\nX: y' }, 'cred:nul': { value: 'NULSECRET-777\0z' } });
  const header = await startUpstream(
    manifest('t-crlf', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:crlf' }] }),
    { secrets, initialBackoffMs: NO_RETRY },
  );
  t.after(() => header.close());
  assert.equal(header.upstream.state, 'failed');
  assert.equal(
    header.upstream.error,
    'server t-crlf/protected: header Authorization: the value of credential cred:crlf is not a valid HTTP header value (RFC 9110 §5.5: visible ASCII, spaces, tabs and Latin-1 letters): it holds a line break, another control character or a character outside Latin-1; replace the credential',
  );
  assert.equal(server.requests.length, 0);
  const env = await startUpstream(
    manifest('t-nul', 'counter', {
      image: 'local/counter',
      command: [process.execPath, fixture('counter.mjs')],
      env: [{ name: 'TOKEN', value: 'cred:nul' }],
    }),
    { secrets, initialBackoffMs: NO_RETRY },
  );
  t.after(() => env.close());
  assert.equal(env.upstream.state, 'failed');
  assert.equal(
    env.upstream.error,
    'server t-nul/counter: env TOKEN: the value of credential cred:nul holds a NUL character, which no environment variable can; replace the credential',
  );
  const logged = [...header.lines, ...env.lines].join('');
  assert.ok(!/TOPSECRET|NULSECRET/.test(logged), 'no log line holds a value');
});

test('an upstream that echoes the request headers in its error answer: every secret value of the connection is redacted from the error', async (t) => {
  // Every JSON-RPC request is answered with an error whose message quotes the request's headers.
  const echo = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      const id = (JSON.parse(body || '{}') as { id?: unknown }).id ?? null;
      const error = { code: -32603, message: `refused: ${JSON.stringify(request.headers)}` };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id, error }));
    });
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => echo.close(resolve)));
  const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/mcp`;
  const secrets = mapSecrets({ 'cred:api': { value: 'Bearer ECHOSECRET-cred-31' } });
  const under = await startUpstream(
    manifest('t-echo', 'echo', {
      url,
      headers: [
        { name: 'Authorization', value: 'cred:api' },
        { name: 'X-Api-Key', value: 'ECHOSECRET-lit-42' },
      ],
    }),
    { secrets, initialBackoffMs: NO_RETRY },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'failed');
  assert.match(under.upstream.error!, /refused: .*<redacted>/, under.upstream.error);
  assert.ok(!under.upstream.error!.includes('ECHOSECRET'), under.upstream.error);
  assert.ok(!under.lines.some((line) => line.includes('ECHOSECRET')), 'no log line holds a value');
});

test('redact hides each secret of at least 4 characters, also when a message quotes it escaped', () => {
  const secrets = ['Bearer TOPSECRET-CRLF-999\r\nX: y', 'NULSECRET-777\0z', 'abc'];
  assert.equal(
    redact('Headers.append: "Bearer TOPSECRET-CRLF-999\r\nX: y" is invalid', secrets),
    'Headers.append: "<redacted>" is invalid',
  );
  assert.equal(redact(JSON.stringify('Bearer TOPSECRET-CRLF-999\r\nX: y'), secrets), '"<redacted>\\r\\n<redacted>"');
  assert.equal(redact("Received 'NULSECRET-777\\x00z'", secrets), "Received '<redacted>\\x00z'");
  assert.equal(redact('abc stays: too short to hide', secrets), 'abc stays: too short to hide');
});

test('8 calls in parallel while the upstream starts answering HTTP 401: one renewal, and every call succeeds on the new connection', async (t) => {
  // A sessionful server: the refused connection's session is ended with DELETE while the connection is swapped,
  // which this fetch holds open until every call has been sent (calls that arrive during the swap must wait for it).
  const server = await startProtectedMcpServer({ token: 'access-1', sessions: true });
  t.after(() => server.close());
  let releaseDelete: () => void = () => undefined;
  const deleteHeld = new Promise<void>((resolve) => (releaseDelete = resolve));
  let deletes = 0;
  const fetchHoldingDelete: typeof fetch = async (input, init) => {
    if (init?.method === 'DELETE') {
      deletes++;
      await deleteHeld;
    }
    return fetch(input, init);
  };
  const secrets = mapSecrets({ 'cred:oauth': { value: 'Bearer access-1', oauth2: 'oauth' } }, () => 'Bearer access-2');
  const under = await startUpstream(
    manifest('t-swap', 'protected', { url: server.url, headers: [{ name: 'Authorization', value: 'cred:oauth' }] }),
    {
      secrets,
      fetch: fetchHoldingDelete,
    },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  assert.ok(
    server.requests.some((r) => r.headers['mcp-session-id'] !== undefined),
    'the connection has a session',
  );

  server.requireToken('access-2');
  const first = under.upstream.callTool('echo', { text: 'call 1' }, undefined);
  await waitFor(() => deletes === 1, 10_000, 'the refused connection being closed');
  const rest = [2, 3, 4, 5, 6, 7, 8].map((i) => under.upstream.callTool('echo', { text: `call ${i}` }, undefined));
  releaseDelete();
  const outcomes = await Promise.all([first, ...rest]);
  assert.deepEqual(
    outcomes.map((o) => (o.ok ? (o.result as ToolResult).content[0]!.text : o.message)),
    [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `call ${i}`),
  );
  assert.equal(secrets.renewals.length, 1);
});

test('a stdio server that prints its environment: credential values and literal env values are redacted from its log lines and lastError', async (t) => {
  const secrets = mapSecrets({ 'cred:st1': { value: 'STDIO-cred-secret-55' } });
  const under = await startUpstream(
    manifest('t-stderr', 'printer', {
      image: 'local/sh',
      command: ['sh', '-c', 'echo "token=$TOKEN lit=$LIT short=$SHORT" >&2; exit 3'],
      env: [
        { name: 'TOKEN', value: 'cred:st1' },
        { name: 'LIT', value: 'LIT_ENV_SECRET_VALUE' },
        { name: 'SHORT', value: 'debug' },
      ],
    }),
    { secrets, initialBackoffMs: 50 },
  );
  t.after(() => under.close());
  // Restarted at least once: every start printed the line again.
  await waitFor(() => under.states.filter((s) => s === 'failed').length >= 2, 10_000, 'a restart');
  assert.match(under.upstream.error!, /stderr: token=<redacted> lit=<redacted> short=debug/, under.upstream.error);
  const printed = under.lines.filter((line) => line.includes('token='));
  assert.ok(printed.length >= 2, 'the stderr line is logged at every start');
  for (const line of [...printed, under.upstream.error!, under.upstream.failureCause ?? '']) {
    assert.ok(!line.includes('STDIO-cred-secret-55') && !line.includes('LIT_ENV_SECRET_VALUE'), line);
  }
  assert.ok(
    printed.every((line) => line.includes('token=<redacted> lit=<redacted> short=debug')),
    printed[0],
  );
});

test('a tool result that echoes the request headers: the client gets it as sent, the ledger summary has every secret value redacted', async (t) => {
  // Every tool call answers the headers of its HTTP request.
  const echo = createServer((request, response) => {
    const server = new McpServer({ name: 'header-echo', version: '1.0.0' });
    server.registerTool('headers', { description: 'Answers the request headers', inputSchema: z.object({}) }, async () => ({
      content: [
        { type: 'text', text: `x-api-key=${String(request.headers['x-api-key'])}; all headers: ${JSON.stringify(request.headers)}` },
      ],
    }));
    const transport = new NodeStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on('close', () => void server.close().catch(() => undefined));
    void server.connect(transport).then(() => transport.handleRequest(request, response));
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise((resolve) => (echo.closeAllConnections(), echo.close(resolve))));
  const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}/mcp`;
  const h = await startHarness((tenant) => [
    manifest(tenant, 'echo', { url, headers: [{ name: 'X-Api-Key', value: 'ECHOED-literal-secret-83' }] }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const result = (await h.call({ method: 'tools/call', server: 'echo', name: 'headers', arguments: {} })) as ToolResult;
  assert.match(result.content[0]!.text, /ECHOED-literal-secret-83/, 'the client gets the result as the upstream sent it');
  await waitFor(() => h.events.some((e) => e.type === 'tool.completed' && e.server === 'echo'), 5_000, 'tool.completed');
  const completed = h.events.find((e) => e.type === 'tool.completed' && e.server === 'echo')!;
  const summary = (completed.data.result as { text: string }).text;
  assert.match(summary, /^x-api-key=<redacted>; all headers: /, summary);
  assert.ok(!JSON.stringify(h.events).includes('ECHOED-literal'), 'no ledger event holds the value, not even a part of it');
});
