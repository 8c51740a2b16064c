import test from 'node:test';
import assert from 'node:assert/strict';
import { migrate } from '@punk/lib';
import { GENESIS_HASH, LEDGER_MIGRATIONS_DIR, LedgerStore } from '../index.js';
import { backends, event, log, toolRun, uniqueTenant } from './helpers.js';

for (const backend of backends) {
  test(`[${backend.name}] appended events form one chain; duplicates are stored once; tampering is named`, async () => {
    const { db, close } = await backend.open();
    try {
      await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
      const store = new LedgerStore(db);
      const tenant = uniqueTenant();
      const other = uniqueTenant('globex');

      const runA = toolRun(tenant, 'run-a');
      const runB = toolRun(tenant, 'run-b', 'write_file');
      const first = await store.append([...runA, runA[0]!, ...toolRun(other)]);
      assert.deepEqual(first, { appended: 4, duplicates: 1, rejected: 0 }, 'an id repeated inside a batch is written once');
      const again = await store.append([...runA, ...runB]);
      assert.deepEqual(again, { appended: 2, duplicates: 2, rejected: 0 }, 'a redelivered batch adds only what is new');

      const detail = await store.getRun('run-a');
      assert.ok(detail && detail !== 'ambiguous');
      assert.deepEqual(
        detail.events.map((e) => [e.id, e.tenantSeq]),
        [
          [runA[0]!.id, 1],
          [runA[1]!.id, 2],
        ],
      );
      assert.equal(detail.events[0]!.prevHash, GENESIS_HASH);
      assert.equal(detail.events[1]!.prevHash, detail.events[0]!.hash);
      assert.equal(detail.events[0]!.occurredAt, runA[0]!.occurredAt);
      assert.deepEqual(detail.events[0]!.principal, runA[0]!.principal);
      assert.deepEqual(detail.run, {
        runId: 'run-a',
        tenant,
        firstAt: runA[0]!.occurredAt,
        lastAt: runA[1]!.occurredAt,
        eventCount: 2,
        types: ['tool.called', 'tool.completed'],
        server: 'filesystem',
        tool: 'read_file',
        outcome: 'ok',
        subject: 'alice',
      });

      const runs = await store.listRuns({ tenant, limit: 10 });
      assert.deepEqual(
        runs.map((r) => r.runId),
        ['run-b', 'run-a'],
        'newest first',
      );
      const older = await store.listRuns({ tenant, limit: 10, before: new Date(runs[0]!.lastAt) });
      assert.deepEqual(
        older.map((r) => r.runId),
        ['run-a'],
      );

      // Events without the optional fields hash and verify the same way.
      const bare = { ...event(tenant, 'run-c', 'server.state_changed', { state: 'ready' }) };
      delete bare.principal;
      delete bare.sessionId;
      delete bare.server;
      await store.append([bare]);

      const verified = await store.verify(tenant, 2);
      assert.equal(verified.ok, true);
      assert.equal(verified.events, 5);
      const head = await db.query<{ hash: string }>('SELECT hash FROM ledger.events WHERE tenant = $1 ORDER BY tenant_seq DESC LIMIT 1', [
        tenant,
      ]);
      assert.deepEqual(verified, { ok: true, tenant, events: 5, head: head.rows[0]!.hash });
      const nobody = uniqueTenant('nobody');
      assert.deepEqual(await store.verify(nobody), { ok: true, tenant: nobody, events: 0, head: GENESIS_HASH });
      assert.equal((await store.verify(other)).ok, true);
    } finally {
      await close();
    }
  });

  test(`[${backend.name}] verify names exactly the event whose stored content or link was changed`, async () => {
    const { db, close } = await backend.open();
    try {
      await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
      const store = new LedgerStore(db);
      const tenant = uniqueTenant();
      const events = [...toolRun(tenant), ...toolRun(tenant), ...toolRun(tenant)];
      await store.append(events);
      assert.equal((await store.verify(tenant)).ok, true);

      const victim = events[3]!;
      await db.query(`UPDATE ledger.events SET data = '{"name":"read_file","isError":false,"note":"edited"}' WHERE id = $1`, [victim.id]);
      const tampered = await store.verify(tenant, 2);
      assert.equal(tampered.ok, false);
      assert.ok(!tampered.ok);
      assert.deepEqual(
        { ...tampered.firstBroken, message: undefined },
        { id: victim.id, tenantSeq: 4, reason: 'HashMismatch', message: undefined },
      );
      assert.equal(tampered.events, 4);
      assert.match(tampered.firstBroken.message, /does not match the event's content/);

      // Restore the content, then remove an event: its successor no longer links.
      await db.query('UPDATE ledger.events SET data = $2 WHERE id = $1', [victim.id, JSON.stringify(victim.data)]);
      assert.equal((await store.verify(tenant)).ok, true);
      await db.query('DELETE FROM ledger.events WHERE id = $1', [events[1]!.id]);
      const gap = await store.verify(tenant);
      assert.ok(!gap.ok);
      assert.equal(gap.firstBroken.id, events[2]!.id);
      assert.equal(gap.firstBroken.reason, 'BrokenLink');
    } finally {
      await close();
    }
  });
}
