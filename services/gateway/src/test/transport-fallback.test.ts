/**
 * HTTP transports of url servers against server-everything on loopback: a server that only speaks the
 * 2024-11-05 HTTP+SSE transport is reached by the fallback after its 404 to the Streamable HTTP POST
 * (MCP 2025-11-25 basic/transports "Backwards Compatibility"), `transport: sse` goes straight to SSE, a
 * Streamable HTTP server is not fallen back from, and the given fetch carries every request of both.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { freePort, installed, manifest, waitFor } from './harness.js';
import { startProtectedMcpServer } from './fixtures/protected-mcp-server.js';
import { mapSecrets, startUpstream } from './upstream-harness.js';

type ToolResult = { content: { type: string; text: string }[] };

/** Runs `mcp-server-everything <mode>` on a free port; resolves once it listens. */
async function everything(t: TestContext, mode: 'sse' | 'streamableHttp'): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [installed('@modelcontextprotocol/server-everything/dist/index.js'), mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  t.after(() => void child.kill());
  const listening = () =>
    new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
  await waitFor(listening, 15_000, `server-everything ${mode} listening`);
  return `http://127.0.0.1:${port}`;
}

/** A fetch that records `<METHOD> <path>` and the headers of every request it makes. */
function recordingFetch(): { fetch: typeof fetch; requests: string[]; headers: Headers[] } {
  const requests: string[] = [];
  const headers: Headers[] = [];
  return {
    requests,
    headers,
    fetch: (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      requests.push(`${init?.method ?? (input instanceof Request ? input.method : 'GET')} ${url.pathname}`);
      headers.push(new Headers(init?.headers));
      return fetch(input, init);
    },
  };
}

test('an HTTP+SSE-only server answers the Streamable HTTP POST with 404, and the connection falls back to SSE', async (t) => {
  const base = await everything(t, 'sse');
  // What makes it an old server: POST to its SSE URL is refused.
  const probe = await fetch(`${base}/sse`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.ok([404, 405].includes(probe.status), `POST /sse answered ${probe.status}`);

  const recorded = recordingFetch();
  const under = await startUpstream(manifest('t-sse', 'old-server', { url: `${base}/sse` }), { fetch: recorded.fetch });
  t.after(() => under.close());
  const upstream = under.upstream;
  assert.equal(upstream.state, 'ready', upstream.error);
  const entry = upstream.catalog();
  assert.equal(entry.transport, 'sse');
  assert.match(entry.protocolVersion ?? '', /^20(24|25)-/);
  assert.ok(entry.tools.some((tool) => tool.name === 'echo'));
  const outcome = await upstream.callTool('echo', { message: 'over sse' }, undefined);
  assert.ok(outcome.ok);
  assert.match((outcome.result as ToolResult).content[0]!.text, /over sse/);

  // Streamable HTTP was tried first on the same URL, then the SSE stream opened there; messages go to its endpoint.
  const firstGet = recorded.requests.indexOf('GET /sse');
  assert.ok(firstGet > 0, recorded.requests.join(', '));
  assert.ok(recorded.requests.slice(0, firstGet).every((r) => r === 'POST /sse'));
  assert.ok(recorded.requests.includes('POST /message'));
  assert.ok(under.lines.some((line) => line.includes('refused the Streamable HTTP handshake (HTTP 404)')));
  assert.ok(
    under.lines.some((line) => line.includes('"transport":"sse"') && line.includes('connected to server t-sse/old-server over sse')),
    'the transport used is logged',
  );
});

test('transport: sse goes straight to the SSE stream, and its stream and posts carry the headers', async (t) => {
  const base = await everything(t, 'sse');
  const recorded = recordingFetch();
  const under = await startUpstream(
    manifest('t-sse-declared', 'old-server', { url: `${base}/sse`, transport: 'sse', headers: [{ name: 'X-Api-Key', value: 'cred:key' }] }),
    { fetch: recorded.fetch, secrets: mapSecrets({ 'cred:key': { value: 'sse-key-1' } }) },
  );
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  assert.equal(under.upstream.catalog().transport, 'sse');
  assert.ok((await under.upstream.callTool('echo', { message: 'x' }, undefined)).ok);
  assert.equal(recorded.requests[0], 'GET /sse');
  assert.ok(!recorded.requests.includes('POST /sse'));
  assert.ok(recorded.requests.includes('POST /message'));
  for (const headers of recorded.headers) assert.equal(headers.get('x-api-key'), 'sse-key-1');
});

test('a Streamable HTTP server is spoken to over Streamable HTTP, without a fallback; its idle session is ended and reopened', async (t) => {
  const base = await everything(t, 'streamableHttp');
  const recorded = recordingFetch();
  const under = await startUpstream(manifest('t-streamable', 'new-server', { url: `${base}/mcp` }), {
    fetch: recorded.fetch,
    idleTimeoutMs: 300,
  });
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'ready', under.upstream.error);
  assert.equal(under.upstream.catalog().transport, 'streamable-http');
  const outcome = await under.upstream.callTool('echo', { message: 'over streamable http' }, undefined);
  assert.ok(outcome.ok);
  assert.ok(
    recorded.requests.every((r) => r.endsWith(' /mcp')),
    recorded.requests.join(', '),
  );
  assert.ok(!under.lines.some((line) => line.includes('trying the HTTP+SSE transport')));

  // Idle: the session is ended with DELETE; the next call opens a new one.
  await waitFor(() => under.upstream.state === 'idle', 10_000, 'idle close');
  await waitFor(() => recorded.requests.includes('DELETE /mcp'), 5_000, 'the session ended');
  const sessions = () => new Set(recorded.headers.map((h) => h.get('mcp-session-id')).filter(Boolean)).size;
  const before = sessions();
  const again = await under.upstream.callTool('echo', { message: 'after idle' }, undefined);
  assert.ok(again.ok);
  assert.equal(sessions(), before + 1, 'a new session');
});

test('a URL that speaks neither transport fails naming the refused handshake and the failed fallback', async (t) => {
  const server = await startProtectedMcpServer();
  t.after(() => server.close());
  const under = await startUpstream(manifest('t-neither', 'nothing-here', { url: `http://127.0.0.1:${server.port}/not-mcp` }), {
    initialBackoffMs: 60_000,
  });
  t.after(() => under.close());
  assert.equal(under.upstream.state, 'failed');
  assert.match(under.upstream.error!, /the Streamable HTTP handshake was answered HTTP 404 .*and the HTTP\+SSE fallback failed: /);
  const seen = server.requests.map((r) => `${r.method} ${r.path}`);
  assert.ok(seen.indexOf('POST /not-mcp') >= 0 && seen.indexOf('GET /not-mcp') > seen.indexOf('POST /not-mcp'), seen.join(', '));
});
