/**
 * A server of bucket PUNK_MCP_SERVERS whose entry says `launched` (`punk cluster`'s own HTTP server processes) on a
 * gateway whose SSRF guard is closed (authentication on): that server reaches exactly its own loopback origin, also
 * once its entry moves it to another port, while an entry of the same URL without `launched` is refused by the guard.
 * A private NATS, a scratch Postgres database, governance and one gateway; server-everything over Streamable HTTP.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startGovernance } from '@punk/governance';
import { buckets, createLogger, kvKey, NatsBus, streams, subjects } from '@punk/lib';
import { destinationPolicyOf, startGateway } from '../index.js';
import { openScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startPrivateNats } from '../../../lib/dist/test/natstest.js';
import { manifest, startEverything, waitFor } from './harness.js';

test('a launched entry passes the closed SSRF guard at its own origin, on a new port too; the same URL unlaunched is refused', async (t) => {
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const log = createLogger('managed-launched', 'warn');
  // Stopped last started first, before the servers (their own `t.after`, registered later, runs after this one).
  const cleanups: Array<() => Promise<unknown>> = [];
  t.after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  const nats = await startPrivateNats();
  cleanups.push(() => nats.stop());
  const database = await openScratchDb(log);
  cleanups.push(() => database.close());
  const workDir = await mkdtemp(join(tmpdir(), 'punk-managed-launched-'));
  cleanups.push(() => rm(workDir, { recursive: true, force: true }));
  const bus = await NatsBus.connect({ url: nats.url, name: 'managed-launched', log });
  cleanups.push(() => bus.close());
  await bus.ensureStream(streams.ledger);
  const governance = await startGovernance({ bus, log });
  cleanups.push(() => governance.stop());
  const gateway = await startGateway({
    egress: destinationPolicyOf({ authMode: 'on', upstreamAllowedNetworks: [] }),
    bus,
    log,
    db: database.db,
    servers: [],
    workDir,
    startTimeoutMs: 20_000,
    callTimeoutMs: 20_000,
  });
  cleanups.push(() => gateway.stop());

  const kv = await bus.keyValue(buckets.mcpServers);
  const urlServer = (name: string, port: number) =>
    manifest(tenant, name, { url: `http://127.0.0.1:${String(port)}/mcp`, transport: 'streamable-http' });
  const stateOf = (name: string) => gateway.catalog(tenant).find((c) => c.name === name);
  const settled = (name: string) => () => ['ready', 'failed'].includes(stateOf(name)?.state ?? '');

  const first = await startEverything(t, 'streamableHttp');
  await kv.put(kvKey(tenant, 'launched'), { server: urlServer('launched', first), generation: 1, launched: true });
  await kv.put(kvKey(tenant, 'unlaunched'), { server: urlServer('unlaunched', first), generation: 1 });
  await waitFor(settled('launched'), 20_000, 'launched settled');
  await waitFor(() => /EgressRefused|special-purpose/.test(stateOf('unlaunched')?.lastError ?? ''), 20_000, 'unlaunched refused');
  assert.equal(stateOf('launched')?.state, 'ready', stateOf('launched')?.lastError);
  assert.ok(stateOf('launched')?.tools.some((tool) => tool.name === 'echo'));
  assert.match(stateOf('unlaunched')?.lastError ?? '', /127\.0\.0\.1 is a special-purpose address/);

  // Restarted on another port (a changed document under punk cluster): the new origin is the one allowed.
  const second = await startEverything(t, 'streamableHttp');
  let replaced!: () => void;
  const updated = new Promise<void>((done) => (replaced = done));
  const subscription = await bus.subscribe(subjects.registryChanged, (data) => {
    const change = data as { server: string; change: string };
    if (change.server === 'launched' && change.change === 'updated') replaced();
  });
  cleanups.push(() => subscription.unsubscribe());
  await kv.put(kvKey(tenant, 'launched'), { server: urlServer('launched', second), generation: 2, launched: true });
  await updated;
  await waitFor(settled('launched'), 20_000, 'launched settled on its new port');
  assert.equal(stateOf('launched')?.state, 'ready', stateOf('launched')?.lastError);
});
