/**
 * Two checkouts side by side: two real `punk up` on `examples/everything-http.yaml` as it is (no `port`: each picks
 * a free loopback port, which `$(PORT)` passes to the server), with data directories in one parent. Both serve
 * everything-http, each server listens on a port of its own, and each data directory has its own servers' working
 * directories.
 */
import assert from 'node:assert/strict';
import { copyFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';

let dir: string;
const punks: RunningPunk[] = [];

before(async () => {
  dir = await manifestDir('side-by-side-up', {});
  await copyFile(join(repoRoot, 'examples/everything-http.yaml'), join(dir, 'everything-http.yaml'));
  // One after the other, as two people would start them: the second finds the first's server running.
  for (const name of ['one', 'two'])
    punks.push(await startPunk({ manifestDir: dir, args: ['--data', join(dir, name)], timeoutMs: 150_000 }));
});

after(async () => {
  await Promise.all(punks.map((punk) => punk.stop()));
  await removeDir(dir);
});

// Ready means the server answered on its port and Punk checked that the listener is that server's own process
// (local-port.ts): with one fixed port the second would fail with ServerPortInUse.
test('both serve everything-http, on ports of their own, with servers directories of their own', { timeout: 180_000 }, async () => {
  for (const [i, punk] of punks.entries()) {
    const view = (await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers/everything-http`)).json()) as {
      server: { state: string; lastError?: string };
    };
    assert.equal(view.server.state, 'ready', `punk up #${String(i + 1)}: ${view.server.lastError ?? ''}\n${punk.output().slice(-3000)}`);
    for (const era of ['2025-11-25', '2026-07-28'] as const) {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era);
      try {
        const echoed = await client.callTool({ name: 'everything-http__echo', arguments: { message: `side ${String(i)}` } });
        assert.equal(textOf(echoed), `Echo: side ${String(i)}`, era);
      } finally {
        await client.close();
      }
    }
  }
  for (const name of ['one', 'two']) {
    const home = await stat(join(dir, `${name}-servers`, 'default', 'everything-http'));
    assert.ok(home.isDirectory(), `${name}-servers holds the working directory of ${name}'s server`);
  }
});
