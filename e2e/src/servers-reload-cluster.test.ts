/**
 * McpServer documents reload live under the real `punk cluster` (two fronts, two gateways, governance and two
 * ledgers over a nats-server and a scratch Postgres database of the test's own, authentication on), as under
 * `punk up` (servers-reload-up): files holding a stdio server (the tally fixture) and an HTTP server the cluster runs
 * itself (everything-http) are dropped into the watched directory, and connected clients of both eras hear
 * `notifications/tools/list_changed` and see and call the servers' tools without a restart (the launched HTTP
 * server passes the SSRF guard); an edit restarts a server with its new definition (the HTTP one on its new port); a
 * typo in its document keeps the server as last loaded; removing the documents stops them and their tools go away.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, textOf, type Era } from './clients.js';
import { scratchDatabase } from './distributed.js';
import {
  createApiKey,
  eventually,
  freePort,
  listening,
  manifestDir,
  removeDir,
  repoRoot,
  startAuthCluster,
  tallyManifest,
  type RunningPunk,
} from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');
const ERAS = ['2025-11-25', '2026-07-28'] as const satisfies readonly Era[];

let nats: OwnNats;
let db: { url: string; drop(): Promise<void> };
let dir: string;
let cluster: RunningPunk;
let clients: Record<Era, Client>;

const tally = (tools: string) => tallyManifest(join(dir, 'tally.log'), tools);

/** The everything-http example, declaring `port` (the example itself declares none: Punk picks one). */
const everythingHttp = async (port: number) =>
  (await readFile(join(repoRoot, 'examples/everything-http.yaml'), 'utf8')).replace(
    '  path: /mcp\n',
    `  path: /mcp\n  port: ${String(port)}\n`,
  );

/** Every tool name `era`'s client is served now (a 2026-07-28 client's cached list, 60 s by its `ttlMs`, is refreshed). */
const toolNames = async (era: Era = '2025-11-25') => {
  const names: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await clients[era].listTools(cursor ? { cursor } : undefined, { cacheMode: 'refresh' });
    names.push(...page.tools.map((t) => t.name));
    cursor = page.nextCursor;
  } while (cursor);
  return names.sort();
};

before(async () => {
  nats = await startOwnNats();
  db = await scratchDatabase();
  dir = await manifestDir('servers-reload-cluster', {});
  cluster = await startAuthCluster(dir, nats.url, db.url, BOOTSTRAP);
  const { key } = await createApiKey(cluster.baseUrl, BOOTSTRAP, { name: 'reload' });
  const headers = { Authorization: `Bearer ${key}` };
  clients = {
    '2025-11-25': await connectClient(`${cluster.baseUrl}/mcp`, '2025-11-25', headers),
    '2026-07-28': await connectClient(`${cluster.baseUrl}/mcp`, '2026-07-28', headers),
  };
});

after(async () => {
  for (const client of Object.values(clients ?? {})) await client.close();
  await cluster?.stop();
  await nats?.stop();
  await db?.drop();
  await removeDir(dir);
});

let httpPort: number;

test(
  'servers added to the watched directory are served without a restart, and clients of both eras hear list_changed',
  { timeout: 240_000 },
  async () => {
    for (const era of ERAS)
      assert.deepEqual(
        (await toolNames(era)).filter((n) => n.startsWith('tally__') || n.startsWith('everything-http__')),
        [],
      );
    const heard = new Promise<void>((done) =>
      clients['2025-11-25'].setNotificationHandler('notifications/tools/list_changed', () => done()),
    );
    const heard2026 = new Promise<void>((done) =>
      clients['2026-07-28'].setNotificationHandler('notifications/tools/list_changed', () => done()),
    );
    const subscription = await clients['2026-07-28'].listen({ toolsListChanged: true });
    // Let the 2025 client's GET stream open before the change.
    await new Promise((done) => setTimeout(done, 500));

    httpPort = await freePort();
    await writeFile(join(dir, 'tally.yaml'), tally('{}'));
    await writeFile(join(dir, 'everything-http.yaml'), await everythingHttp(httpPort));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no notifications/tools/list_changed within 90 s:\n${cluster.output().slice(-4000)}`)),
        90_000,
      );
    });
    await Promise.race([Promise.all([heard, heard2026]), late]).finally(() => clearTimeout(timer));
    await subscription.close();

    for (const era of ERAS) {
      const names = await eventually(async () => {
        const now = await toolNames(era);
        return now.includes('tally__count') && now.includes('everything-http__echo') ? now : undefined;
      }, 60_000);
      assert.ok(names, `${era}: the new servers' tools are listed: ${cluster.output().slice(-4000)}`);
      assert.deepEqual(
        names.filter((n) => n.startsWith('tally__')),
        ['tally__charge', 'tally__count', 'tally__read_slowly'],
      );
      const echo = await clients[era].callTool({ name: 'everything-http__echo', arguments: { message: `reloaded ${era}` } });
      assert.match(textOf(echo), new RegExp(`reloaded ${era}`), `${era}: the launched HTTP server passes the SSRF guard`);
    }
    assert.match(cluster.output(), /loaded McpServer default\/tally from tally\.yaml \(document 1\): starting it/);
    assert.match(cluster.output(), /loaded McpServer default\/everything-http from everything-http\.yaml \(document 1\): starting it/);
    assert.equal(textOf(await clients['2025-11-25'].callTool({ name: 'tally__count', arguments: { n: 1 } })), 'counted 1');
    assert.doesNotMatch(cluster.output(), /restart to serve the change/);
  },
);

test(
  'an edit restarts a server with its new definition; a typo in its document keeps it as last loaded',
  { timeout: 240_000 },
  async () => {
    const oldPort = httpPort;
    httpPort = await freePort();
    await writeFile(join(dir, 'tally.yaml'), tally('{ deny: [charge] }'));
    await writeFile(join(dir, 'everything-http.yaml'), await everythingHttp(httpPort));
    const names = await eventually(async () => {
      const now = await toolNames();
      return now.includes('tally__count') && !now.includes('tally__charge') ? now : undefined;
    }, 60_000);
    assert.ok(names, `the denied tool is gone: ${cluster.output().slice(-4000)}`);
    assert.match(cluster.output(), /changed McpServer default\/tally from tally\.yaml \(document 1\): restarting it/);
    assert.match(cluster.output(), /changed McpServer default\/everything-http from everything-http\.yaml \(document 1\): restarting it/);
    const echoed = await eventually(async () => {
      const echo = await clients['2025-11-25'].callTool({ name: 'everything-http__echo', arguments: { message: 'on the new port' } });
      return echo.isError ? undefined : echo;
    }, 60_000);
    assert.ok(echoed, `the HTTP server answers on its new port: ${cluster.output().slice(-4000)}`);
    assert.match(textOf(echoed), /on the new port/);
    assert.equal(await listening(httpPort), true, 'the restarted process listens on the new port');
    assert.equal(await listening(oldPort), false, 'the old process stopped');

    // A typo in the server's own document: the document is refused, and the server stays as it was.
    await writeFile(join(dir, 'tally.yaml'), tally('{ deny: [charge] }\n  transport: carrier-pigeon'));
    const kept = await eventually(
      async () => (/McpServer default\/tally kept as last loaded: tally\.yaml has errors/.test(cluster.output()) ? true : undefined),
      30_000,
    );
    assert.ok(kept, cluster.output().slice(-4000));
    assert.match(cluster.output(), /manifest error: tally\.yaml \(document 1\) spec\.transport: /);
    assert.equal(textOf(await clients['2026-07-28'].callTool({ name: 'tally__count', arguments: { n: 2 } })), 'counted 2', 'still served');
  },
);

test('removed servers are stopped and their tools are no longer listed', { timeout: 240_000 }, async () => {
  await rm(join(dir, 'tally.yaml'));
  await rm(join(dir, 'everything-http.yaml'));
  for (const era of ERAS) {
    const names = await eventually(async () => {
      const now = await toolNames(era);
      return now.some((n) => n.startsWith('tally__') || n.startsWith('everything-http__')) ? undefined : now;
    }, 60_000);
    assert.ok(names, `${era}: ${cluster.output().slice(-4000)}`);
  }
  assert.match(cluster.output(), /removed McpServer default\/tally: its document is gone; stopping it/);
  assert.match(cluster.output(), /removed McpServer default\/everything-http: its document is gone; stopping it/);
  assert.equal(await listening(httpPort), false, 'the HTTP server process stopped');
  assert.doesNotMatch(cluster.output(), /everything-http exited unexpectedly/);
});
