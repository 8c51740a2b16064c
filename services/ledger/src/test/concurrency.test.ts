import test from 'node:test';
import assert from 'node:assert/strict';
import { migrate, openDatabase } from '@punk/lib';
import { LEDGER_MIGRATIONS_DIR, LedgerStore } from '../index.js';
import { createScratchDatabase } from './pgtest.js';
import { log, toolRun, uniqueTenant } from './helpers.js';

test('[postgres] two ledger writers appending for one tenant at once build a single unforked chain', async () => {
  const scratch = await createScratchDatabase();
  const a = await openDatabase({ url: scratch.url, log });
  const b = await openDatabase({ url: scratch.url, log });
  try {
    await Promise.all([
      migrate(a, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log }),
      migrate(b, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log }),
    ]);
    const tenant = uniqueTenant();
    const writers = [new LedgerStore(a), new LedgerStore(b)];
    const batches = Array.from({ length: 40 }, () => [...toolRun(tenant), ...toolRun(tenant)]);
    // Each writer also replays some of the other's batches, as two consumers might after a redelivery.
    await Promise.all(
      writers.map((store, w) =>
        (async () => {
          for (let i = 0; i < batches.length; i++) if (i % 2 === w || i % 5 === 0) await store.append(batches[i]!);
        })(),
      ),
    );
    const verified = await writers[0]!.verify(tenant);
    assert.equal(verified.ok, true);
    assert.equal(verified.events, 160);
    const positions = await a.query<{ n: number; distinct_prev: number; max: string }>(
      'SELECT count(*)::int AS n, count(DISTINCT prev_hash)::int AS distinct_prev, max(tenant_seq)::text AS max FROM ledger.events WHERE tenant = $1',
      [tenant],
    );
    assert.deepEqual(positions.rows[0], { n: 160, distinct_prev: 160, max: '160' }, 'no two events share a predecessor');
  } finally {
    await a.close();
    await b.close();
    await scratch.drop();
  }
});
