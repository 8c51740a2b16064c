/**
 * No vault credential reaches a client through what an upstream answers: an upstream that echoes the request headers
 * it received (e2e/src/echo-server.ts) and a local server that reports its environment (counter.mjs) are registered
 * in the real `punk up` with `cred:` header and env values, and called through `/mcp` with the SDK client in both
 * eras, over a shared and a per-client upstream session. The secret values are nowhere in what the clients receive
 * (results, structured content, errors, progress and log messages, resource contents), and the ledger is still redacted.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, listAllTools, type Era } from './clients.js';
import { startEchoServer, type EchoServer } from './echo-server.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

const HEADER_SECRET = `S3CR3T-${randomBytes(8).toString('hex')}`;
const ENV_SECRET = `env-secret-${randomBytes(8).toString('hex')}`;
const COUNTER = join(repoRoot, 'services/gateway/src/test/fixtures/counter.mjs');

let echo: EchoServer;
let punk: RunningPunk;
let manifests: string;
let dataRoot: string;

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${punk.baseUrl}/api/v1${path}`, {
    method,
    ...(body !== undefined && { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
}

before(async () => {
  echo = await startEchoServer();
  manifests = await manifestDir('result-leak', {});
  dataRoot = await mkdtemp(join(tmpdir(), 'punk-result-leak-'));
  punk = await startPunk({
    manifestDir: manifests,
    args: ['--data', join(dataRoot, 'data')],
    env: { PUNK_ENCRYPTION_KEY: randomBytes(32).toString('base64') },
  });
  assert.equal((await api('POST', '/credentials', { id: 'echo-key', data: { value: HEADER_SECRET } })).status, 201);
  assert.equal((await api('POST', '/credentials', { id: 'env-key', data: { value: ENV_SECRET } })).status, 201);
  const http = { type: 'http', url: echo.url, headers: { Authorization: 'cred:echo-key' } };
  assert.equal((await api('POST', '/mcp/servers', { name: 'echo', ...http })).status, 201);
  assert.equal((await api('POST', '/mcp/servers', { name: 'echopc', ...http, sessionMode: 'per-client' })).status, 201);
  const stdio = { type: 'stdio', command: process.execPath, args: [COUNTER], env: { API_KEY: 'cred:env-key' } };
  assert.equal((await api('POST', '/mcp/servers', { name: 'env', ...stdio })).status, 201);
});

after(async () => {
  await punk?.stop();
  await echo?.close();
  await removeDir(manifests);
  await removeDir(dataRoot);
});

/** Everything `client` receives from calls that make the upstreams echo their credentials, as text. */
async function receivedBy(client: Client): Promise<{ everything: string; headers: Record<string, unknown>; env: string }> {
  const notifications: unknown[] = [];
  client.setNotificationHandler('notifications/message', (notification) => void notifications.push(notification.params));
  const tools = await eventually(async () => {
    const names = (await listAllTools(client)).map((tool) => tool.name);
    return ['echo__headers', 'echopc__headers', 'env__env'].every((name) => names.includes(name)) ? names : undefined;
  }, 30_000);
  assert.ok(tools, 'the three servers are served');
  const received: unknown[] = [notifications];
  let headers: Record<string, unknown> = {};
  for (const server of ['echo', 'echopc']) {
    const result = await client.callTool(
      { name: `${server}__headers`, arguments: {}, _meta: { 'io.modelcontextprotocol/logLevel': 'debug' } },
      { onprogress: (progress) => void notifications.push(progress) },
    );
    received.push(result);
    headers = (result.structuredContent as { headers: Record<string, unknown> }).headers;
    const failure = await client.callTool({ name: `${server}__fail`, arguments: {} }).then(
      (answer) => answer,
      (error: unknown) => ({ message: (error as Error).message, data: (error as { data?: unknown }).data }),
    );
    received.push(failure);
    assert.match(JSON.stringify(failure), /refused: /, 'the upstream error reached the client');
  }
  received.push(await client.readResource({ uri: 'echo://headers' }));
  const refused = await client.readResource({ uri: 'echo://fail' }).then(
    (answer) => assert.fail(`a failing resource answered ${JSON.stringify(answer)}`),
    (error: unknown) => ({ message: (error as Error).message, data: (error as { data?: unknown }).data }),
  );
  assert.match(JSON.stringify(refused), /authorization/, 'the upstream error, with its data, reached the client');
  received.push(refused);
  const env = await client.callTool({ name: 'env__env', arguments: {} });
  received.push(env);
  const envText = (env.content as Array<{ text: string }>)[0]!.text;
  assert.ok(notifications.length > 0, 'progress or log messages reached the client');
  return { everything: JSON.stringify(received), headers, env: envText };
}

for (const era of ['2025-11-25', '2026-07-28'] as Era[]) {
  test(`no vault credential reaches a ${era} client through results, errors or notifications`, { timeout: 120_000 }, async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, era);
    try {
      const { everything, headers, env } = await receivedBy(client);
      assert.equal(echo.lastHeaders.authorization, HEADER_SECRET, 'the upstream got the credential');
      assert.equal(headers['authorization'], '<redacted>', 'the echoed header is masked, the structure kept');
      assert.equal((JSON.parse(env) as { env: Record<string, string> }).env['API_KEY'], '<redacted>', 'the env value is masked');
      assert.ok(!everything.includes(HEADER_SECRET), `the header credential reached the client: ${everything}`);
      assert.ok(!everything.includes(ENV_SECRET), 'the env credential reached the client');
    } finally {
      await client.close();
    }
  });
}

test('the ledger holds no credential either', { timeout: 60_000 }, async () => {
  const runs = await eventually(async () => {
    const listed = (await api('GET', '/runs?limit=500')).json.runs as Array<{ runId: string; types: string[] }>;
    return listed.some((run) => run.types.includes('tool.completed')) ? listed : undefined;
  }, 30_000);
  assert.ok(runs, 'calls are on the ledger');
  const events = await Promise.all(
    runs.map(async (run) => (await api('GET', `/runs/${encodeURIComponent(run.runId)}?tenant=default`)).json),
  );
  const text = JSON.stringify(events);
  assert.match(text, /tool\.completed/);
  assert.ok(!text.includes(HEADER_SECRET) && !text.includes(ENV_SECRET), 'a credential is on the ledger');
});
