/**
 * The `punk cluster` proxy in front of real HTTP backends: with the ledger API internal, its 403 names no backend
 * URL, while the other paths still reach the fronts.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { createLogger } from '@punk/lib';
import { startProxy } from '../proxy.js';

/** An HTTP server on a free loopback port answering every request with `name`; `url` is its base URL. */
async function backend(name: string): Promise<{ server: Server; url: string }> {
  const server = createServer((_req, res) => res.end(name));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}` };
}

test('with the ledger API internal, the 403 names no internal URL; other paths still reach a front', async (t) => {
  const ledger = await backend('ledger');
  const front = await backend('front');
  const proxy = await startProxy({
    host: '127.0.0.1',
    port: 0,
    backends: { ledgers: [ledger.url], fronts: [front.url] },
    log: createLogger('proxy-test', 'silent'),
    ledgerApi: 'internal',
  });
  t.after(async () => {
    await proxy.close();
    for (const { server } of [ledger, front]) {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  });
  for (const path of ['/api/v1/ledger/verify', '/api/v1/runs', '/api/v1/runs/some-run']) {
    const answer = await fetch(`${proxy.url}${path}`);
    const body = await answer.text();
    assert.equal(answer.status, 403, path);
    assert.equal((JSON.parse(body) as { error: { code: string } }).error.code, 'InternalApi');
    assert.match(body, /PUNK_AUTH_MODE=on/);
    assert.ok(!body.includes(ledger.url) && !/https?:\/\/|127\.0\.0\.1/.test(body), `${path} names no internal URL: ${body}`);
  }
  const forwarded = await fetch(`${proxy.url}/mcp`);
  assert.equal(await forwarded.text(), 'front');
});
