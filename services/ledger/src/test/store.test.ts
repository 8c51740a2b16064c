import test from 'node:test';
import assert from 'node:assert/strict';
import { migrate } from '@punk/lib';
import { GENESIS_HASH, LEDGER_MIGRATIONS_DIR, LedgerStore, chainEvent } from '../index.js';
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

      const verified = await store.verify(tenant, { pageSize: 2 });
      assert.equal(verified.ok, true);
      assert.equal(verified.events, 5);
      const head = await db.query<{ hash: string }>('SELECT hash FROM ledger.events WHERE tenant = $1 ORDER BY tenant_seq DESC LIMIT 1', [
        tenant,
      ]);
      assert.deepEqual(
        { ...verified, sweep: { ...verified.sweep, sweptAt: typeof verified.sweep.sweptAt } },
        {
          ok: true,
          tenant,
          events: 5,
          head: head.rows[0]!.hash,
          complete: true,
          // the five new events, each once: from genesis they are the sweep's whole pass too
          checked: 5,
          chainHead: { tenantSeq: 5, hash: head.rows[0]!.hash },
          sweep: { tenantSeq: 0, sweptAt: 'string' },
        },
      );
      // With nothing new, the next request sweeps the five again: each counted once.
      const resweep = await store.verify(tenant, { pageSize: 2 });
      assert.deepEqual([resweep.ok, resweep.checked, resweep.sweep.tenantSeq], [true, 5, 0]);
      const nobody = uniqueTenant('nobody');
      assert.deepEqual(await store.verify(nobody), {
        ok: true,
        tenant: nobody,
        events: 0,
        head: GENESIS_HASH,
        complete: true,
        checked: 0,
        chainHead: null,
        sweep: { tenantSeq: 0, sweptAt: null },
      });
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
      const tampered = await store.verify(tenant, { pageSize: 2 });
      assert.equal(tampered.ok, false);
      assert.ok(!tampered.ok);
      assert.deepEqual(
        { ...tampered.firstBroken, message: undefined },
        { id: victim.id, runId: victim.runId, tenantSeq: 4, reason: 'HashMismatch', message: undefined },
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

  test(`[${backend.name}] a deleted tail is reported where the chain ends, and appends after it leave the gap`, async () => {
    const { db, close } = await backend.open();
    try {
      await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
      const store = new LedgerStore(db);
      const tenant = uniqueTenant();
      const events = [...toolRun(tenant), ...toolRun(tenant), ...toolRun(tenant)];
      await store.append(events);
      assert.equal((await store.verify(tenant)).ok, true);

      // Given the last two events deleted straight in the database,
      await db.query('DELETE FROM ledger.events WHERE tenant = $1 AND tenant_seq > 4', [tenant]);
      // verify says the chain ends at 4 where its head record says 6,
      const truncated = await store.verify(tenant);
      assert.ok(!truncated.ok, JSON.stringify(truncated));
      assert.deepEqual({ ...truncated.firstBroken, message: undefined }, { tenantSeq: 5, reason: 'TruncatedTail', message: undefined });
      assert.match(truncated.firstBroken.message, /ends at tenant_seq 4 but its head record is tenant_seq 6 .*events 5 to 6 are missing/);
      assert.deepEqual(truncated.chainHead?.tenantSeq, 6);
      // and after more appends the chain goes on from its head record, so the gap stays visible.
      const later = toolRun(tenant);
      await store.append(later);
      const gap = await store.verify(tenant);
      assert.ok(!gap.ok);
      assert.deepEqual(
        { ...gap.firstBroken, message: undefined },
        { id: later[0]!.id, runId: later[0]!.runId, tenantSeq: 7, reason: 'BrokenLink', message: undefined },
      );
      assert.match(gap.firstBroken.message, /events 5 to 6 are missing/);

      // A replaced last event (same position, other content and hash) does not match the head record either.
      const other = uniqueTenant();
      await store.append(toolRun(other));
      const replacement = toolRun(other)[0]!;
      const [{ hash: prev }] = (
        await db.query<{ hash: string }>('SELECT hash FROM ledger.events WHERE tenant = $1 AND tenant_seq = 1', [other])
      ).rows as [{ hash: string }];
      const forged = chainEvent(replacement, 2, prev);
      await db.query(
        'UPDATE ledger.events SET id = $2, data = $3, hash = $4, occurred_at = $5, run_id = $6, type = $7 WHERE tenant = $1 AND tenant_seq = 2',
        [other, forged.id, JSON.stringify(forged.data), forged.hash, forged.occurredAt, forged.runId, forged.type],
      );
      const replaced = await store.verify(other, { from: 'genesis' });
      assert.ok(!replaced.ok, JSON.stringify(replaced));
      assert.deepEqual(
        { ...replaced.firstBroken, message: undefined },
        { id: forged.id, runId: forged.runId, tenantSeq: 2, reason: 'HeadMismatch', message: undefined },
      );
    } finally {
      await close();
    }
  });

  test(`[${backend.name}] verification is bounded per request and resumes where the last one stopped`, async () => {
    const { db, close } = await backend.open();
    try {
      await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
      const store = new LedgerStore(db);
      const tenant = uniqueTenant();
      const events = Array.from({ length: 25 }, () => toolRun(tenant)).flat();
      await store.append(events);

      // Given a budget of 20 events per request, the 50 events take three requests,
      const positions: Array<[number, boolean, number]> = [];
      for (let i = 0; i < 3; i++) {
        const step = await store.verify(tenant, { maxEvents: 20, pageSize: 7 });
        assert.equal(step.ok, true, JSON.stringify(step));
        positions.push([step.events, step.complete, step.checked]);
      }
      assert.deepEqual(positions, [
        [20, false, 20],
        [40, false, 20],
        [50, true, 20],
      ]);
      // then, with nothing new, each request sweeps a stretch of the verified events again,
      const sweeping = await store.verify(tenant, { maxEvents: 20 });
      assert.ok(sweeping.ok && sweeping.complete);
      assert.equal(sweeping.checked, 20);
      assert.ok(sweeping.sweep.tenantSeq >= 20 || sweeping.sweep.sweptAt !== null, JSON.stringify(sweeping));

      // and an edit behind the checkpoint is found by the sweep, or at once from genesis.
      await db.query(`UPDATE ledger.events SET data = '{"edited":true}' WHERE id = $1`, [events[2]!.id]);
      let found: Awaited<ReturnType<LedgerStore['verify']>> | undefined;
      for (let i = 0; i < 5 && (found === undefined || found.ok); i++) found = await store.verify(tenant, { maxEvents: 20 });
      assert.ok(found && !found.ok, JSON.stringify(found));
      assert.equal(found.firstBroken.id, events[2]!.id);
      const fromStart = await store.verify(tenant, { from: 'genesis', maxEvents: 20 });
      assert.ok(!fromStart.ok);
      assert.equal(fromStart.firstBroken.id, events[2]!.id);
      assert.equal(fromStart.checked, 3);
    } finally {
      await close();
    }
  });
}
