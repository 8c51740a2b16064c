/**
 * Kill the front replica that holds a 2025-era client's GET stream: the
 * client reconnects to the other replica with `Last-Event-ID` and receives
 * every event it missed, in order, once (MCP 2025-11-25 basic/transports,
 * "Resumability and Redelivery"). Separate OS processes on a NATS of the
 * test's own.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { NatsBus, createLogger, subjects } from '@punk/lib';
import { scratchDatabase } from './distributed.js';
import { manifestDir as makeManifestDir, removeDir } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';
import { startService, type ServiceProcess } from './processes.js';

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };

let nats: OwnNats;
let manifestDir: string;
let bus: NatsBus;
let db: { url: string; drop(): Promise<void> };
const tenant = `t-${randomBytes(3).toString('hex')}`;
const running: ServiceProcess[] = [];

before(async () => {
  nats = await startOwnNats();
  db = await scratchDatabase();
  manifestDir = await makeManifestDir('failover', {
    'everything.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: everything, namespace: ${tenant} }
spec:
  package: { name: "@modelcontextprotocol/server-everything" }
  args: ["stdio"]
`,
  });
  const env = { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url, PUNK_MANIFESTS: manifestDir, PUNK_TENANT: tenant };
  running.push(await startService('governance', env), await startService('gateway', env));
  running.push(await startService('mcp-front', env), await startService('mcp-front', env));
  bus = await NatsBus.connect({ url: nats.url, name: 'failover-test', log: createLogger('test', 'silent') });
});

after(async () => {
  await bus?.close();
  await Promise.all(running.map((s) => s.stop('SIGTERM')));
  await nats?.stop();
  await db?.drop();
  await removeDir(manifestDir);
});

/** Reads SSE events (`id`, `data`) from a streaming response until `count` data events arrived or `timeoutMs` passed. */
async function readEvents(response: Response, count: number, timeoutMs: number): Promise<Array<{ id: string; data: string }>> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const events: Array<{ id: string; data: string }> = [];
  let buffer = '';
  const deadline = Date.now() + timeoutMs;
  while (events.filter((e) => e.data !== '').length < count && Date.now() < deadline) {
    const chunk = await Promise.race([
      reader.read(),
      new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, deadline - Date.now()))),
    ]);
    if (chunk === null || chunk.done) break;
    buffer += decoder.decode(chunk.value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = '';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) id = line.slice(3).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      }
      if (id || data.length > 0) events.push({ id, data: data.join('\n') });
    }
  }
  await reader.cancel().catch(() => undefined);
  return events;
}

async function announceChange(): Promise<void> {
  await bus.publish(subjects.registryChanged, { tenant, server: 'everything', change: 'list_changed' });
}

test('a GET stream survives the death of the replica that held it', async () => {
  const [frontA, frontB] = running.filter((s) => s.name === 'mcp-front') as [ServiceProcess, ServiceProcess];
  const init = await fetch(`${frontA.url}/mcp`, {
    method: 'POST',
    headers: HEADERS,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'failover', version: '1' } },
    }),
  });
  await init.text();
  const sessionId = init.headers.get('mcp-session-id');
  assert.ok(sessionId, 'initialize answered a session id');
  const session = { ...HEADERS, 'mcp-session-id': sessionId };
  const initialized = await fetch(`${frontA.url}/mcp`, {
    method: 'POST',
    headers: session,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  assert.equal(initialized.status, 202);

  // The GET stream is held by replica B; one change reaches it.
  const stream = await fetch(`${frontB.url}/mcp`, { headers: { ...session, accept: 'text/event-stream' } });
  assert.equal(stream.status, 200);
  // One change is one list_changed per list the endpoint offers (tools, resources, prompts).
  const reading = readEvents(stream, 3, 5_000);
  await new Promise((r) => setTimeout(r, 300));
  await announceChange();
  const seen = (await reading).filter((e) => e.data !== '');
  const perChange = seen.length;
  assert.ok(perChange >= 1, 'the first change arrived on the stream held by B');
  assert.ok(seen.some((e) => /notifications\/tools\/list_changed/.test(e.data)));
  const lastId = seen[seen.length - 1]!.id;
  assert.ok(lastId);

  // B dies; two more changes happen while the client has no stream.
  await frontB.stop('SIGKILL');
  await announceChange();
  await new Promise((r) => setTimeout(r, 300));
  await announceChange();
  await new Promise((r) => setTimeout(r, 500));

  // The client resumes on A with Last-Event-ID and gets exactly the two it missed, in order.
  const resumed = await fetch(`${frontA.url}/mcp`, { headers: { ...session, accept: 'text/event-stream', 'last-event-id': lastId } });
  assert.equal(resumed.status, 200);
  const missed = (await readEvents(resumed, 2 * perChange + 1, 3_000)).filter((e) => e.data !== '');
  assert.equal(missed.length, 2 * perChange, `exactly the missed events: ${JSON.stringify(missed)}`);
  for (const event of missed) assert.match(event.data, /list_changed/);
  const seqs = missed.map((e) => Number(e.id.split(':').pop()));
  assert.deepEqual(
    seqs,
    [...seqs].sort((a, b) => a - b),
    'in order',
  );
  assert.equal(new Set(missed.map((e) => e.id)).size, missed.length, 'each once');
  assert.ok(!missed.some((e) => seen.some((s) => s.id === e.id)), 'nothing delivered twice');
});
