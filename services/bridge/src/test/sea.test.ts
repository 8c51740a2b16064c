// The single executable (`npm run build:sea -w @punk/bridge` makes dist-sea/punk-bridge), run as an init container
// would leave it in a pod: no Node of its own needed. Skipped, saying so, when it has not been built.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { connectClient, FIXTURE, runBridge, runEgressProxy, runToExit, SEA_BINARY, textOf } from './harness.js';

const skip = !existsSync(SEA_BINARY) && 'dist-sea/punk-bridge is not built (npm run build:sea -w @punk/bridge)';

test('the single executable serves a stdio server to the SDK client and stops on SIGTERM', { skip }, async () => {
  const bridge = await runBridge(FIXTURE, ['--max-sessions', '4'], { PUNK_TEST_GREETING: 'from the pod' }, [SEA_BINARY]);
  try {
    const { client } = await connectClient(bridge);
    assert.ok(Number(textOf(await client.callTool({ name: 'pid', arguments: {} }))) > 0);
    assert.equal(textOf(await client.callTool({ name: 'env', arguments: { name: 'PUNK_TEST_GREETING' } })), 'from the pod');
    await client.close();
  } finally {
    assert.deepEqual(await bridge.stop(), { code: 0, signal: null });
  }
});

test('the single executable runs the egress proxy and refuses what it does not allow', { skip }, async () => {
  const server = createServer((req, res) => res.end(`hello ${req.url}`));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const proxy = await runEgressProxy(
    ['--allow', `localhost:${port}`, '--allow', `127.0.0.1/32:${port}`, '--allow', 'localhost:1'],
    [SEA_BINARY],
  );
  try {
    const { hostname, port: proxyPort } = new URL(proxy.url);
    const through = (url: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: hostname, port: proxyPort, path: url, agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
    assert.deepEqual(await through(`http://localhost:${port}/ok`), { status: 200, body: 'hello /ok' });
    assert.equal((await through(`http://127.0.0.2:${port}/`)).status, 403);
    // A name rule alone never leads to loopback (the address classes bundled in the executable).
    assert.match(
      (await through('http://localhost:1/')).body,
      /^egress to localhost:1 is refused: localhost resolves to a loopback address 127\.0\.0\.1/,
    );
  } finally {
    await proxy.stop();
    server.close();
  }
});

test('the single executable answers a bad flag with a usage error, exit 2', { skip }, async () => {
  const run = await runToExit(['serve', '--max-sessions', 'many', '--', 'x'], [SEA_BINARY]);
  assert.equal(run.code, 2);
  assert.match(run.stderr, /--max-sessions "many" must be a whole number/);
});
