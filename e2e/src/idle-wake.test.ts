/**
 * Wake on first call in `punk cluster`, where servers are local processes and the cluster plays the operator's part
 * (services/cli/src/cluster-idle.ts): a server with `spec.idle` unused for its `scaleToZeroAfter` has its process
 * stopped; the first call starts it again and succeeds, with progress notifications while it waits, in both eras;
 * two concurrent calls share one wake (one `server.woken` on the ledger); a server that does not come up within
 * `spec.idle.wakeTimeout` answers an error naming the McpServer and its condition.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ledgerEventSchema, streams, subjects, type NatsBus } from '@punk/lib';
import { connectClient, textOf, type Era } from './clients.js';
import { scratchDatabase, testBus } from './distributed.js';
import { freePort, listening, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

/** Waits for `probe`; past `timeoutMs` fails with `output()` (punk cluster's lines) to tell why. */
async function until(what: string, probe: () => Promise<boolean>, output: () => string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${String(timeoutMs)} ms:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const server = (name: string, args: string[], port: number, idle: string) => `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: ${name} }
spec:
  image: local/${name}
  command: [${JSON.stringify(process.execPath)}]
  args: ${JSON.stringify(args)}
  transport: streamable-http
  port: ${String(port)}
  path: /mcp
  env:
    - { name: PORT, value: "${String(port)}" }
  idle: ${idle}
`;

describe('punk cluster: servers with spec.idle sleep when unused and wake on the first call', () => {
  let nats: OwnNats;
  let db: { url: string; drop(): Promise<void> };
  let dir: string;
  let punk: RunningPunk | undefined;
  let bus: NatsBus;
  let sleepyPort: number;

  before(async () => {
    nats = await startOwnNats();
    db = await scratchDatabase();
    sleepyPort = await freePort();
    // The bench's echo server, listening only after 2 s: a start slow enough to be seen waiting.
    const slow = `await new Promise((resolve) => setTimeout(resolve, 2000));\nprocess.argv.push('http');\nawait import(${JSON.stringify(join(repoRoot, 'bench/echo-server.mjs'))});\n`;
    dir = await manifestDir('idle-wake', {
      'slow-echo.mjs': slow,
      'sleepy.yaml': server('sleepy', ['$(PUNK_MANIFEST_DIR)/slow-echo.mjs'], sleepyPort, '{ scaleToZeroAfter: 2s, wakeTimeout: 30s }'),
      // Never listens: its wake runs out of time.
      'never.yaml': server('never', ['-e', 'setInterval(() => {}, 1000)'], await freePort(), '{ scaleToZeroAfter: 1s, wakeTimeout: 3s }'),
    });
    punk = await startPunk({
      manifestDir: dir,
      command: 'cluster',
      env: { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url, PUNK_SERVER_START_TIMEOUT_MS: '6000' },
      timeoutMs: 180_000,
    });
    bus = await testBus(nats.url);
  });
  after(async () => {
    await bus?.close();
    await punk?.stop();
    await nats?.stop();
    await db?.drop();
    await removeDir(dir);
  });

  const woken = async (name: string) =>
    (await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 }))
      .map((m) => ledgerEventSchema.parse(m.data))
      .filter((e) => e.type === 'server.woken' && e.server === name);
  const output = () => punk?.output() ?? '';
  const asleep = () => until('sleepy asleep (its process stopped)', async () => !(await listening(sleepyPort)), output);

  /** Calls sleepy's echo in `era`, gathering the progress notifications of the wait. */
  const call = async (era: Era, message: string) => {
    const client = await connectClient(`${punk!.baseUrl}/mcp`, era);
    const progress: Array<{ progress: number; total?: number; message?: string }> = [];
    try {
      const result = await client.callTool(
        { name: 'sleepy__echo', arguments: { message } },
        { onprogress: (p) => void progress.push(p), timeout: 90_000 },
      );
      return { text: textOf(result), progress };
    } finally {
      await client.close();
    }
  };

  for (const era of ['2025-11-25', '2026-07-28'] as const) {
    test(`a ${era} call to the server asleep wakes it, waits with progress, and succeeds`, async () => {
      await asleep();
      const before = (await woken('sleepy')).length;
      const { text, progress } = await call(era, `hello ${era}`);
      assert.equal(text, `hello ${era}`);
      assert.ok(progress.length >= 1, `progress while it woke: ${JSON.stringify(progress)}`);
      for (const p of progress) {
        assert.match(p.message ?? '', /^starting server sleepy: \d+ of 30 s$/);
        assert.equal(p.total, 30);
      }
      assert.ok(await listening(sleepyPort), 'its process runs again');
      await until('one more server.woken', async () => (await woken('sleepy')).length === before + 1, output, 10_000);
    });
  }

  test('two concurrent calls share one wake', async () => {
    await asleep();
    const before = (await woken('sleepy')).length;
    const [a, b] = await Promise.all([call('2025-11-25', 'first'), call('2026-07-28', 'second')]);
    assert.deepEqual([a.text, b.text], ['first', 'second']);
    await until('a server.woken', async () => (await woken('sleepy')).length > before, output, 10_000);
    // Any second wake would have been recorded by now (each is appended as its process listens).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.equal((await woken('sleepy')).length, before + 1, 'one wake for both calls');
  });

  test('a server that does not come up within spec.idle.wakeTimeout answers its condition', async () => {
    await until(
      'never asleep',
      async () => {
        const slept = (await bus.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 }))
          .map((m) => ledgerEventSchema.parse(m.data))
          .some((e) => e.type === 'server.slept' && e.server === 'never');
        return slept;
      },
      output,
    );
    const client = await connectClient(`${punk!.baseUrl}/mcp`, '2025-11-25');
    try {
      const answer = await client.callTool({ name: 'never__anything', arguments: {} }, { timeout: 60_000 }).then(
        (result) => textOf(result),
        (error: unknown) => (error as Error).message,
      );
      assert.match(
        answer,
        /server never did not become ready within 3s \(McpServer default\/never spec\.idle\.wakeTimeout\); its condition: Available=False \(Waking\): its process was started \d+ s ago and does not listen yet/,
      );
    } finally {
      await client.close();
    }
  });
});
