/**
 * Protocol errors a person reads with curl, on the real `punk up`: a 2026-07-28 request whose `Mcp-Name`,
 * `Mcp-Method` or `MCP-Protocol-Version` header disagrees with its body is answered -32020 with `data.mismatch`
 * holding the header's value and the body's value (not the message twice); an unsupported `MCP-Protocol-Version`
 * lists 2026-07-28 among the supported versions on `/mcp`, and on the HTTP+SSE `/sse` says where 2026-07-28 is
 * served. The -32020 answers on `punk cluster` too.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { scratchDatabase } from './distributed.js';
import { manifestDir, removeDir, startPunk, tallyManifest, type RunningPunk } from './harness.js';
import { startOwnNats } from './nats-server.js';

const V2026 = '2026-07-28';
let dir: string;
let punk: RunningPunk;

/** The tally fixture, writing its calls into `dir`. */
const tally = (dir: string) => tallyManifest(join(dir, 'tally.log'));

before(async () => {
  dir = await manifestDir('header-mismatch-up', {});
  await writeFile(join(dir, 'tally.yaml'), tally(dir));
  punk = await startPunk({ manifestDir: dir });
});

after(async () => {
  await punk?.stop();
  await removeDir(dir);
});

const meta = (version: string) => ({
  'io.modelcontextprotocol/protocolVersion': version,
  'io.modelcontextprotocol/clientInfo': { name: 'curl', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
});

/** POSTs `body` to `path` and returns the HTTP status and the JSON-RPC error. */
async function errorOf(
  baseUrl: string,
  path: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; code: number; message: string; data: unknown }> {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
  const { error } = (await response.json()) as { error: { code: number; message: string; data: unknown } };
  return { status: response.status, ...error };
}

/** Each mismatching header of a 2026-07-28 `tools/call` answers -32020 naming both values; matching ones pass. */
async function mismatchesNamed(baseUrl: string): Promise<void> {
  const call = {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'tally__count', arguments: { n: 1 }, _meta: meta(V2026) },
  };
  const cases: { what: string; headers: Record<string, string>; mismatch: Record<string, unknown> }[] = [
    {
      what: 'Mcp-Name naming another tool',
      headers: { 'mcp-protocol-version': V2026, 'mcp-method': 'tools/call', 'mcp-name': 'tally__other' },
      mismatch: { name: 'Mcp-Name', header: 'tally__other', field: 'params.name', body: 'tally__count' },
    },
    {
      what: 'Mcp-Name absent',
      headers: { 'mcp-protocol-version': V2026, 'mcp-method': 'tools/call' },
      mismatch: { name: 'Mcp-Name', header: null, field: 'params.name', body: 'tally__count' },
    },
    {
      what: 'Mcp-Method naming another method',
      headers: { 'mcp-protocol-version': V2026, 'mcp-method': 'tools/list', 'mcp-name': 'tally__count' },
      mismatch: { name: 'Mcp-Method', header: 'tools/list', field: 'method', body: 'tools/call' },
    },
    {
      what: 'MCP-Protocol-Version naming another version than _meta',
      headers: { 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/call', 'mcp-name': 'tally__count' },
      mismatch: {
        name: 'MCP-Protocol-Version',
        header: '2025-11-25',
        field: 'params._meta["io.modelcontextprotocol/protocolVersion"]',
        body: V2026,
      },
    },
  ];
  for (const c of cases) {
    const error = await errorOf(baseUrl, '/mcp', call, c.headers);
    assert.equal(error.status, 400, c.what);
    assert.equal(error.code, -32020, c.what);
    assert.deepEqual(error.data, { mismatch: c.mismatch }, `${c.what}: ${error.message}`);
    assert.ok(error.message.includes(JSON.stringify(c.mismatch.body)), `${c.what}: the message names the body's value: ${error.message}`);
  }
  const matching = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': V2026,
      'mcp-method': 'tools/call',
      'mcp-name': 'tally__count',
    },
    body: JSON.stringify(call),
  });
  assert.equal(matching.status, 200, 'headers that repeat the body pass');
  assert.match(await matching.text(), /counted 1/);
}

test('2026-07-28: -32020 carries the header value and the body value in data.mismatch', () => mismatchesNamed(punk.baseUrl));

test('an unsupported MCP-Protocol-Version: /mcp lists 2026-07-28, /sse says where 2026-07-28 is served', async () => {
  const legacy = await errorOf(
    punk.baseUrl,
    '/mcp',
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { 'mcp-protocol-version': '2024-01-01' },
  );
  assert.equal(legacy.code, -32022);
  assert.ok((legacy.data as { supported: string[] }).supported.includes(V2026), JSON.stringify(legacy.data));
  const modern = await errorOf(
    punk.baseUrl,
    '/mcp',
    { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: meta('2099-01-01') } },
    { 'mcp-protocol-version': '2099-01-01', 'mcp-method': 'tools/list' },
  );
  assert.deepEqual(modern.data, { supported: [V2026], requested: '2099-01-01' });
  const sse = await errorOf(punk.baseUrl, '/sse', { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { 'mcp-protocol-version': V2026 });
  assert.equal(sse.status, 400);
  assert.equal(sse.code, -32022);
  assert.match(sse.message, /2026-07-28 is served on the Streamable HTTP endpoint \(this path with \/mcp in place of \/sse\)/);
});

describe('punk cluster (NATS, Postgres, the services as processes)', () => {
  test('-32020 names both values there too', { timeout: 300_000 }, async () => {
    const nats = await startOwnNats();
    const db = await scratchDatabase();
    const clusterDir = await manifestDir('header-mismatch-cluster', {});
    await writeFile(join(clusterDir, 'tally.yaml'), tally(clusterDir));
    const cluster = await startPunk({
      manifestDir: clusterDir,
      command: 'cluster',
      env: { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url },
      timeoutMs: 180_000,
    });
    try {
      await mismatchesNamed(cluster.baseUrl);
    } finally {
      await cluster.stop();
      await nats.stop();
      await db.drop();
      await removeDir(clusterDir);
    }
  });
});
