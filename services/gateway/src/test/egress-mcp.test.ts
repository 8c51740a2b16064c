/**
 * A real MCP connection through the SSRF guard: the SDK v2 Client over StreamableHTTPClientTransport and
 * over SSEClientTransport (the 2024-11-05 HTTP+SSE transport, whose EventSource GET uses the same fetch),
 * both given guardedFetch, against @modelcontextprotocol/server-everything on loopback, reachable through
 * allowedNetworks 127.0.0.1/32, and refused without it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client, SSEClientTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { guardedFetch, type DestinationPolicy } from '../index.js';
import { startEverything } from './harness.js';

/** Reachable: loopback allowed as a listed network; the test name resolves to 127.0.0.1, counted. */
function policyFor(lookups: string[]): DestinationPolicy {
  return {
    allowPrivate: false,
    allowedNetworks: ['127.0.0.1/32'],
    lookup: async (hostname) => {
      lookups.push(hostname);
      return [{ address: '127.0.0.1', family: 4 }];
    },
  };
}

test('Streamable HTTP: an SDK client lists and calls tools of server-everything through guardedFetch', async (t) => {
  const port = await startEverything(t, 'streamableHttp');
  const lookups: string[] = [];
  const fetchGuarded = guardedFetch(policyFor(lookups));
  t.after(() => fetchGuarded.close());
  const client = new Client({ name: 'egress-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://everything.example.test:${port}/mcp`), { fetch: fetchGuarded }));
  t.after(() => client.close());

  const { tools } = await client.listTools();
  assert.ok(
    tools.some((tool) => tool.name === 'echo'),
    'the everything server lists echo',
  );
  const echoed = (await client.callTool({ name: 'echo', arguments: { message: 'through the guard' } })) as { content: { text: string }[] };
  assert.match(echoed.content[0]!.text, /through the guard/);
  assert.ok(
    lookups.length >= 3 && lookups.every((name) => name === 'everything.example.test'),
    'every request resolved the name once through the policy',
  );
});

test('HTTP+SSE (2024-11-05): an SDK client lists tools of server-everything through guardedFetch, the event stream included', async (t) => {
  const port = await startEverything(t, 'sse');
  const lookups: string[] = [];
  const fetchGuarded = guardedFetch(policyFor(lookups));
  t.after(() => fetchGuarded.close());
  const client = new Client({ name: 'egress-test', version: '1.0.0' });
  await client.connect(new SSEClientTransport(new URL(`http://everything.example.test:${port}/sse`), { fetch: fetchGuarded }));
  t.after(() => client.close());

  const { tools } = await client.listTools();
  assert.ok(tools.some((tool) => tool.name === 'echo'));
  const echoed = (await client.callTool({ name: 'echo', arguments: { message: 'over sse' } })) as { content: { text: string }[] };
  assert.match(echoed.content[0]!.text, /over sse/, 'the result came back on the event stream');
  assert.ok(lookups.length >= 2, 'the GET stream and the POSTs all went through the guard');
});

test('without an allowed network the same connection is refused (authentication on, loopback upstream)', async (t) => {
  const port = await startEverything(t, 'streamableHttp');
  const fetchGuarded = guardedFetch({ allowPrivate: false, allowedNetworks: [] });
  t.after(() => fetchGuarded.close());
  const client = new Client({ name: 'egress-test', version: '1.0.0' });
  await assert.rejects(
    client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: fetchGuarded })),
    {
      code: 'EgressRefused',
      message: /refused: 127\.0\.0\.1 is a special-purpose address, class loopback/,
    },
  );
});
