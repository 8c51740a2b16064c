/**
 * A local HTTP server must listen on loopback only: one that Node runs gets the loopback preload (its wildcard
 * listen lands on 127.0.0.1), one that binds every interface itself fails, naming the address and the fix, and is
 * not started again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { portListeners } from '../local-port.js';
import { freePort, installed, manifest, startHarness } from './harness.js';

const everythingBin = installed('@modelcontextprotocol/server-everything/dist/index.js');

void test('an HTTP server listening beyond loopback is never ready, and the error names the address and the fix', async (t) => {
  const port = await freePort();
  const h = await startHarness((tenant) => [
    manifest(tenant, 'wide', {
      image: 'local/wide:1',
      // Run through sh, not node: no preload, so server-everything binds every interface as it does on its own.
      command: ['sh', '-c', 'exec "$0" "$1" streamableHttp', process.execPath, everythingBin],
      transport: 'streamable-http',
      port,
      env: [{ name: 'PORT', value: String(port) }],
    }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const [server] = h.gateway.catalog(h.tenant);
  assert.equal(server?.state, 'failed');
  assert.match(server.lastError ?? '', new RegExp(`listens on \\[::\\] port ${String(port)}, beyond loopback`));
  assert.match(server.lastError ?? '', /Make it listen on 127\.0\.0\.1/);
  // Final: no restart is scheduled (a retry would fail the same way).
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.equal(h.gateway.catalog(h.tenant)[0]?.state, 'failed');
  assert.doesNotMatch(h.gateway.catalog(h.tenant)[0]?.lastError ?? '', /circuit open|consecutive/);
});

void test('the same server run by node listens on 127.0.0.1 only (the loopback preload) and is ready', async (t) => {
  const port = await freePort();
  const h = await startHarness((tenant) => [
    manifest(tenant, 'narrow', {
      image: 'local/narrow:1',
      command: [process.execPath, everythingBin, 'streamableHttp'],
      transport: 'streamable-http',
      port,
      env: [{ name: 'PORT', value: String(port) }],
    }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const [server] = h.gateway.catalog(h.tenant);
  assert.equal(server?.state, 'ready', server?.lastError);
  assert.deepEqual(
    (await portListeners(port))?.map((l) => l.address),
    ['127.0.0.1'],
  );
});
