/**
 * `punk up` answers a call only once its audit record is committed: SIGKILLed in the middle of a burst from several
 * SDK sessions and started again on the same data directory, every call a client got its result for has its
 * `tool.called` and `tool.completed` events; a tail deleted from the database while it is stopped is reported by
 * verify, naming where the chain ends. Uncommitted events never exceed `PUNK_LEDGER_MAX_PENDING` (appends wait
 * instead), as `/metrics` shows; and an ephemeral run says at start that it keeps nothing, and leaves nothing in its
 * temporary directory once stopped.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { connectClient, textOf, type Era } from './clients.js';
import { manifestDir, removeDir, repoRoot, startPunk, type RunningPunk, verifyLedger } from './harness.js';
import { scrape, sumOf, valueOf } from './prometheus-text.js';

const EVERYTHING = `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: everything }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'))}]
  image: local/everything
  args: [stdio]
`;

const LEDGER_STREAM = { stream: 'PUNK_LEDGER' };

/**
 * `sessions` SDK sessions (alternating protocol eras) each calling `everything/echo` with a unique message, until
 * `total` calls were answered or a call fails (the process is gone); resolves with the messages whose results came
 * back. `onAnswer` hears the count after each answer.
 */
async function burst(baseUrl: string, sessions: number, total: number, onAnswer: (answered: number) => void = () => {}): Promise<string[]> {
  const got: string[] = [];
  const eras: Era[] = ['2025-11-25', '2026-07-28'];
  const clients = await Promise.all(
    Array.from({ length: sessions }, (_, s) => connectClient(`${baseUrl}/servers/everything/mcp`, eras[s % 2]!)),
  );
  await Promise.all(
    clients.map(async (client, s) => {
      for (let n = 0; got.length < total; n++) {
        const message = `burst-${s}-${n}`;
        let text: string;
        try {
          text = textOf(await client.callTool({ name: 'echo', arguments: { message } }));
        } catch {
          return; // the process is gone: this call's answer never came
        }
        assert.match(text, new RegExp(message));
        got.push(message);
        onAnswer(got.length);
      }
      await client.close();
    }),
  );
  return got;
}

describe('the embedded ledger is durable', () => {
  let dir: string;
  /** The data directory of the first two tests: the second deletes the tail the first left. */
  let data: string;
  let punk: RunningPunk | undefined;

  before(async () => {
    dir = await manifestDir('ledger-durability', { 'everything.yaml': EVERYTHING });
    data = join(dir, 'data');
  });
  after(async () => {
    await punk?.stop();
    await removeDir(dir);
  });

  // Two starts of a new data directory and a burst: minutes on a loaded machine.
  test('SIGKILLed in a burst from six sessions: every answered call is on the ledger after a restart', { timeout: 360_000 }, async () => {
    punk = await startPunk({ manifestDir: dir, args: ['--data', data] });
    const running = punk;
    assert.doesNotMatch(running.output(), /ephemeral run/);

    // Given six sessions calling at once, when the process is SIGKILLed right after the 100th answer,
    const messages = await burst(running.baseUrl, 6, Infinity, (count) => {
      if (count === 100) running.process.kill('SIGKILL');
    });
    await running.stop();
    punk = undefined;
    assert.ok(messages.length >= 100, `${messages.length} calls answered`);

    // then, started again on the same data directory, its chain verifies,
    punk = await startPunk({ manifestDir: dir, args: ['--data', data] });
    const afterRestart = await verifyLedger(punk.baseUrl);
    assert.equal(afterRestart.ok, true, JSON.stringify(afterRestart));
    assert.equal(afterRestart.complete, true);
    assert.equal(await punk.stop(), 0);
    punk = undefined;

    // and every call whose answer a client had has its tool.called and its tool.completed there.
    const db = new PGlite(data);
    try {
      const called = await db.query<{ message: string; id: string }>(
        `SELECT data->'arguments'->>'message' AS message, id::text FROM ledger.events WHERE type = 'tool.called'`,
      );
      const completed = await db.query<{ called: string }>(
        `SELECT data->>'calledEventId' AS called FROM ledger.events WHERE type = 'tool.completed'`,
      );
      const calledIds = new Map(called.rows.map((r) => [r.message, r.id]));
      const completedOf = new Set(completed.rows.map((r) => r.called));
      const missingCalled = messages.filter((m) => !calledIds.has(m));
      const missingCompleted = messages.filter((m) => calledIds.has(m) && !completedOf.has(calledIds.get(m)!));
      assert.deepEqual(missingCalled, [], `answered calls without tool.called (of ${messages.length})`);
      assert.deepEqual(missingCompleted, [], `answered calls without tool.completed (of ${messages.length})`);
    } finally {
      await db.close();
    }
  });

  test('a tail deleted from the stopped data directory is reported by verify, naming the missing events', async () => {
    // Given the last three events deleted straight from the stopped database,
    const db = new PGlite(data);
    let last: number;
    try {
      last = (await db.query<{ n: number }>(`SELECT max(tenant_seq)::int AS n FROM ledger.events WHERE tenant = 'default'`)).rows[0]!.n;
      const deleted = await db.query(`DELETE FROM ledger.events WHERE tenant = 'default' AND tenant_seq > $1`, [last - 3]);
      assert.equal(deleted.affectedRows, 3);
    } finally {
      await db.close();
    }
    // then verify reports the deleted tail, naming the missing positions: as a truncated tail, or as a gap once
    // the restarted process appended its own events (the chain goes on from its head record).
    punk = await startPunk({ manifestDir: dir, args: ['--data', data] });
    const truncated = await verifyLedger(punk.baseUrl);
    assert.equal(truncated.ok, false, JSON.stringify(truncated));
    assert.ok(['TruncatedTail', 'BrokenLink'].includes(truncated.firstBroken!.reason), JSON.stringify(truncated));
    assert.match(truncated.firstBroken!.message, new RegExp(`events ${last - 2} to ${last} are missing`));
    assert.ok(truncated.chainHead!.tenantSeq >= last);
    assert.equal(await punk.stop(), 0);
    punk = undefined;
  });

  test('back-pressure: with PUNK_LEDGER_MAX_PENDING=4 and twelve sessions, never more than 4 events wait for their commit', async () => {
    await punk?.stop();
    // Its own TMPDIR, to see what an ephemeral run puts there (its database, its servers' working directories).
    const temporary = await mkdtemp(join(tmpdir(), 'punk-ephemeral-tmp-'));
    punk = await startPunk({ manifestDir: dir, env: { PUNK_LEDGER_MAX_PENDING: '4', TMPDIR: temporary } });
    // An ephemeral run says plainly that it keeps nothing.
    assert.match(
      punk.output(),
      /ephemeral run: the database is in a temporary directory removed at exit, so the ledger, runs, .* are lost when this process ends/,
    );

    const messages = await burst(punk.baseUrl, 12, 240);
    assert.ok(messages.length >= 240, `${messages.length} calls answered`);
    // An ephemeral append does not wait for its commit; a ledger read waits for every earlier one.
    assert.equal((await verifyLedger(punk.baseUrl)).ok, true);
    const metrics = await scrape(punk.baseUrl);
    assert.equal(valueOf(metrics, 'punk_bus_stream_pending_limit_messages', LEDGER_STREAM), 4);
    const peak = valueOf(metrics, 'punk_bus_stream_pending_peak_messages', LEDGER_STREAM);
    assert.ok(peak >= 1 && peak <= 4, `peak of pending ledger events: ${peak}`);
    assert.ok(valueOf(metrics, 'punk_bus_stream_append_waits_total', LEDGER_STREAM) > 0, 'appends waited for room');
    assert.equal(valueOf(metrics, 'punk_bus_stream_pending_messages', LEDGER_STREAM), 0, 'nothing pending once the ledger caught up');
    // Every answered call's events are committed.
    assert.ok(
      sumOf(metrics, 'punk_ledger_events_appended_total', { type: 'tool.completed' }) >= messages.length,
      'a tool.completed per answered call',
    );
    assert.ok(
      (await readdir(temporary)).some((name) => name.startsWith('punk-db-')),
      'the database is in a temporary directory while the run lasts',
    );
    assert.equal(await punk.stop(), 0);
    punk = undefined;
    // A clean stop removes the database and the servers' working directories (a library's own cache may stay).
    assert.deepEqual(
      (await readdir(temporary)).filter((name) => name.startsWith('punk-')),
      [],
    );
    await removeDir(temporary);
  });
});
