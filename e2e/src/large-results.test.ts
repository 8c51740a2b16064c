/**
 * Results of any size up to `PUNK_MAX_RESULT_BYTES` reach the client intact, in `punk up` (in-process bus) and in
 * `punk cluster` (NATS, whose `max_payload` is 1 MiB): a real SDK client of a 2025-11-25 session (its POST streams
 * are stored in JetStream) calls a stdio server that answers as many bytes as asked (services/gateway/src/test/fixtures/sized.mjs). With
 * the default limit (32 MiB), 4 MiB results, 2 MiB arguments and a 2 MiB resource cross intact, and a 40 MiB result
 * is at once a tool error naming the limit, which the ledger records as the call's failure (a 40 MiB resource a
 * JSON-RPC error naming it); a 2026-07-28 client gets 4 MiB too; with the limit raised to
 * 48 MiB the 40 MiB result arrives intact, and so does a result of exactly 48 MiB (its reply, past the limit by its
 * envelope, is carried).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { connectClient, textOf } from './clients.js';
import { scratchDatabase } from './distributed.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

const MiB = 1024 * 1024;
const LINE = 'punk large-result line 0123456789\n';

const SIZED = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: sized }
spec:
  image: local/sized
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'services/gateway/src/test/fixtures/sized.mjs'))}]
  tools:
    overrides:
      - { name: sized, sideEffectLevel: 1 }
      - { name: measure, sideEffectLevel: 1 }
`;

/** Checks a text the fixture made of `bytes` bytes, without building a copy of it. */
function assertSized(text: string, bytes: number): void {
  assert.equal(text.length, bytes, 'every byte arrived');
  for (let at = 0; at < text.length; at += LINE.length * 4099) {
    assert.equal(text.slice(at, at + LINE.length), LINE.slice(0, Math.min(LINE.length, text.length - at)), `intact at ${at}`);
  }
  assert.ok(text.endsWith(LINE.slice(0, ((bytes - 1) % LINE.length) + 1)), 'intact at the end');
}

/**
 * The largest `bytes` whose `sized` result, `{"content":[{"type":"text","text":…}]}` as JSON, is at most `limit`
 * bytes: 39 bytes around the text, and each line's newline escaped in two.
 */
function bytesWithResultOf(limit: number): number {
  const size = (bytes: number) => 39 + bytes + Math.floor(bytes / LINE.length);
  let bytes = Math.floor(((limit - 39) * LINE.length) / (LINE.length + 1));
  while (size(bytes + 1) <= limit) bytes += 1;
  while (size(bytes) > limit) bytes -= 1;
  assert.equal(
    Buffer.byteLength(JSON.stringify({ content: [{ type: 'text', text: LINE.repeat(Math.ceil(bytes / LINE.length)).slice(0, bytes) }] })),
    size(bytes),
  );
  return bytes;
}

type Mode = 'up' | 'cluster';

/** Starts `punk <mode>` on the sized server, with `env`; for the cluster, on a NATS server and a database of its own. */
async function deployment(mode: Mode, env: Record<string, string>): Promise<{ punk: RunningPunk; stop(): Promise<void> }> {
  const dir = await manifestDir(`large-${mode}`, { 'sized.yaml': SIZED });
  let nats: OwnNats | undefined;
  let db: { url: string; drop(): Promise<void> } | undefined;
  if (mode === 'cluster') {
    nats = await startOwnNats();
    db = await scratchDatabase();
  }
  const punk = await startPunk({
    manifestDir: dir,
    command: mode,
    timeoutMs: 180_000,
    env: { PUNK_LOG_LEVEL: 'warn', ...(nats && db && { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url }), ...env },
  });
  return {
    punk,
    stop: async () => {
      await punk.stop();
      await nats?.stop();
      await db?.drop();
      await removeDir(dir);
    },
  };
}

/** The ledger's events of the run whose `tool.completed` satisfies `match`, once it is there. */
async function completedEvent(baseUrl: string, match: (data: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const found = await eventually(async () => {
    const { runs } = (await (await fetch(`${baseUrl}/api/v1/runs?limit=100`)).json()) as {
      runs: Array<{ runId: string; types: string[] }>;
    };
    for (const run of runs.filter((r) => r.types.includes('tool.completed'))) {
      const { events } = (await (await fetch(`${baseUrl}/api/v1/runs/${encodeURIComponent(run.runId)}`)).json()) as {
        events: Array<{ type: string; data: Record<string, unknown> }>;
      };
      const completed = events.find((e) => e.type === 'tool.completed' && match(e.data));
      if (completed) return completed.data;
    }
    return undefined;
  }, 60_000);
  assert.ok(found, 'the ledger holds the call');
  return found;
}

for (const mode of ['up', 'cluster'] as Mode[]) {
  describe(`punk ${mode}, default PUNK_MAX_RESULT_BYTES`, () => {
    let running: Awaited<ReturnType<typeof deployment>>;
    before(async () => {
      running = await deployment(mode, { PUNK_MAX_BODY_BYTES: String(4 * MiB) });
    });
    after(() => running?.stop());

    test('4 MiB results, 2 MiB arguments and a 2 MiB resource arrive intact', { timeout: 300_000 }, async () => {
      const client = await connectClient(`${running.punk.baseUrl}/servers/default/sized/mcp`, '2025-11-25');
      try {
        assertSized(textOf(await client.callTool({ name: 'sized', arguments: { bytes: 4 * MiB } }, { timeout: 120_000 })), 4 * MiB);
        const measured = await client.callTool({ name: 'measure', arguments: { text: 'y'.repeat(2 * MiB) } }, { timeout: 120_000 });
        assert.equal(textOf(measured), `received ${2 * MiB} characters`);
        const read = await client.readResource({ uri: `sized://${2 * MiB}` }, { timeout: 120_000 });
        assertSized((read.contents[0] as { text: string }).text, 2 * MiB);
      } finally {
        await client.close();
      }
      const stateless = await connectClient(`${running.punk.baseUrl}/servers/default/sized/mcp`, '2026-07-28');
      try {
        assertSized(textOf(await stateless.callTool({ name: 'sized', arguments: { bytes: 4 * MiB } }, { timeout: 120_000 })), 4 * MiB);
      } finally {
        await stateless.close();
      }
      const completed = await completedEvent(running.punk.baseUrl, (data) => data.name === 'sized' && data.isError === false);
      assert.equal(completed.isError, false, 'the 4 MiB call is on the ledger as a success');
    });

    test('a 40 MiB result is at once a tool error naming the limit, and the ledger records the failure', { timeout: 300_000 }, async () => {
      const client = await connectClient(`${running.punk.baseUrl}/servers/default/sized/mcp`, '2025-11-25');
      try {
        // The client's deadline is far past the server's call deadline (60 s): the answer comes from the limit.
        const result = await client.callTool({ name: 'sized', arguments: { bytes: 40 * MiB } }, { timeout: 240_000 });
        assert.equal(result.isError, true, JSON.stringify(result).slice(0, 500));
        assert.match(
          textOf(result),
          /the result of tool sized on server sized is \d+ bytes, past the limit of 33554432 bytes \(PUNK_MAX_RESULT_BYTES\)/,
        );
        await assert.rejects(client.readResource({ uri: `sized://${40 * MiB}` }, { timeout: 240_000 }), (error: unknown) => {
          assert.equal((error as { code?: number }).code, -32603);
          assert.match((error as Error).message, /past the limit of 33554432 bytes \(PUNK_MAX_RESULT_BYTES\)/);
          return true;
        });
      } finally {
        await client.close();
      }
      const completed = await completedEvent(running.punk.baseUrl, (data) => data.name === 'sized' && data.isError === true);
      assert.match(String(completed.error), /past the limit of 33554432 bytes \(PUNK_MAX_RESULT_BYTES\)/);
    });
  });

  describe(`punk ${mode}, PUNK_MAX_RESULT_BYTES raised to 48 MiB`, () => {
    let running: Awaited<ReturnType<typeof deployment>>;
    before(async () => {
      running = await deployment(mode, { PUNK_MAX_RESULT_BYTES: String(48 * MiB) });
    });
    after(() => running?.stop());

    test('a 40 MiB result arrives intact, and so does one of exactly the limit', { timeout: 300_000 }, async () => {
      const client = await connectClient(`${running.punk.baseUrl}/servers/default/sized/mcp`, '2025-11-25');
      try {
        assertSized(textOf(await client.callTool({ name: 'sized', arguments: { bytes: 40 * MiB } }, { timeout: 240_000 })), 40 * MiB);
        // The reply around it is past the limit by its envelope: the bus carries that (a trial got a protocol
        // error here, with the call on the ledger as a success).
        const bytes = bytesWithResultOf(48 * MiB);
        assertSized(textOf(await client.callTool({ name: 'sized', arguments: { bytes } }, { timeout: 240_000 })), bytes);
      } finally {
        await client.close();
      }
    });
  });
}
