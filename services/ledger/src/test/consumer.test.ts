import test from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { MemoryBus, appendLedgerEvent, consumers, migrate, streams, subjects, type LedgerEvent } from '@punk/lib';
import { LEDGER_MIGRATIONS_DIR, LedgerStore, startLedger, type AppendResult, type RejectedMessage } from '../index.js';
import { startLedgerConsumer } from '../consumer.js';
import { backends, event, log, toolRun, uniqueTenant, until } from './helpers.js';

/** Ids of a tenant's stored events, in chain order. */
async function chainIds(store: LedgerStore, tenant: string, runIds: string[]): Promise<string[]> {
  const ids: Array<[number, string]> = [];
  for (const runId of runIds) {
    const found = await store.getRun(runId, tenant);
    if (found && found !== 'ambiguous') for (const e of found.events) ids.push([e.tenantSeq, e.id]);
  }
  return ids.sort((a, b) => a[0] - b[0]).map(([, id]) => id);
}

for (const backend of backends) {
  test(`[${backend.name}] events appended to the stream land once each, in chain order`, async () => {
    const { db, close } = await backend.open();
    const bus = new MemoryBus(log);
    try {
      const ledger = await startLedger({ bus, db, log });
      const tenant = uniqueTenant();
      const runs = [toolRun(tenant), toolRun(tenant), toolRun(tenant)];
      const events = runs.flat();
      for (const e of events) await appendLedgerEvent(bus, e);
      // The same event appended again (same msgId) is deduplicated by the stream, and with
      // another msgId (a second publisher) by the ledger itself.
      await appendLedgerEvent(bus, events[0]!);
      await bus.append(subjects.ledgerEvents, events[1]!, { msgId: `again-${events[1]!.id}` });

      const verified = await until('six events verified', async () => {
        const v = await ledger.store.verify(tenant);
        return v.ok && v.events === 6 ? v : undefined;
      });
      assert.equal(verified.events, 6);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const runIds = runs.map((r) => r[0]!.runId);
      assert.deepEqual(
        await chainIds(ledger.store, tenant, runIds),
        events.map((e) => e.id),
      );
      const count = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM ledger.events WHERE tenant = $1', [tenant]);
      assert.equal(count.rows[0]!.n, 6);
      await ledger.stop();
    } finally {
      await bus.close();
      await close();
    }
  });

  test(`[${backend.name}] a batch redelivered after its handler failed is stored once`, async () => {
    const { db, close } = await backend.open();
    const bus = new MemoryBus(log);
    try {
      await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
      await bus.ensureStream(streams.ledger);
      /** Commits, then fails as if the process lost its connection before acknowledging. */
      class AckLostStore extends LedgerStore {
        calls: AppendResult[] = [];
        override async append(events: LedgerEvent[], rejected?: RejectedMessage[]): Promise<AppendResult> {
          const result = await super.append(events, rejected);
          this.calls.push(result);
          if (this.calls.length === 1) throw new Error('connection lost before the acknowledgement');
          return result;
        }
      }
      const store = new AckLostStore(db);
      const tenant = uniqueTenant();
      const events = [...toolRun(tenant), ...toolRun(tenant)];
      for (const e of events) await appendLedgerEvent(bus, e);
      const consumer = await startLedgerConsumer(bus, store, log);
      await until('the redelivery', async () => (store.calls.length >= 2 ? true : undefined));
      await consumer.stop();
      assert.deepEqual(store.calls[0], { appended: 4, duplicates: 0, rejected: 0 });
      assert.deepEqual(store.calls[1], { appended: 0, duplicates: 4, rejected: 0 });
      const verified = await store.verify(tenant);
      assert.equal(verified.ok, true);
      assert.equal(verified.events, 4);
    } finally {
      await bus.close();
      await close();
    }
  });

  test(`[${backend.name}] malformed stream messages are kept in rejected_messages and do not block good ones`, async () => {
    const { db, close } = await backend.open();
    const bus = new MemoryBus(log);
    try {
      const ledger = await startLedger({ bus, db, log });
      const tenant = uniqueTenant();
      const before = event(tenant, 'run-1', 'tool.called', { name: 'read_file' });
      const after = event(tenant, 'run-1', 'tool.completed', { name: 'read_file' });
      const badId = randomUUID();
      await appendLedgerEvent(bus, before);
      await bus.append(subjects.ledgerEvents, { id: badId, type: 'tool.exploded', tenant }, { msgId: badId });
      // Valid by contract, but Postgres refuses a NUL character inside jsonb.
      const nul = event(tenant, 'run-1', 'tool.completed', { output: 'bad \u0000 byte' });
      await appendLedgerEvent(bus, nul);
      await appendLedgerEvent(bus, after);

      const rejected = await until('two rejected messages', async () => {
        const list = await ledger.store.listRejected();
        return list.length === 2 ? list : undefined;
      });
      assert.deepEqual(
        rejected.map((r) => r.msgId),
        [badId, nul.id],
      );
      assert.match(rejected[0]!.error, /malformed message on punk\.ledger\.events: (type|runId)/);
      assert.deepEqual(rejected[0]!.payload, { id: badId, type: 'tool.exploded', tenant });
      assert.deepEqual(rejected[1]!.payload, JSON.parse(JSON.stringify(nul)));
      const run = await until('the good events', async () => {
        const found = await ledger.store.getRun('run-1', tenant);
        return found && found !== 'ambiguous' && found.events.length === 2 ? found : undefined;
      });
      assert.deepEqual(
        run.events.map((e) => e.id),
        [before.id, after.id],
      );
      assert.equal((await ledger.store.verify(tenant)).ok, true);
      await ledger.stop();
      assert.equal(consumers.ledgerWriter, 'ledger-writer');
    } finally {
      await bus.close();
      await close();
    }
  });
}
