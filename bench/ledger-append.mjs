#!/usr/bin/env node
// What the ledger store's append costs per governed call (a tool.called with its folded allow decision and its
// tool.completed) by batch size: process CPU and wall time per call, on PGlite in process (DIR unset: in memory;
// DIR=path: a data directory, as `punk up --data`). The ledger consumer batches everything a group-commit window
// holds, so this is what the window size buys.
//   node bench/ledger-append.mjs        CALLS=6000 per batch size (default)
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { root } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 6000);
const { createLogger, migrate, openDatabase } = await import(join(root, 'services/lib/dist/index.js'));
const { LedgerStore, LEDGER_MIGRATIONS_DIR } = await import(join(root, 'services/ledger/dist/index.js'));

const log = createLogger('bench', 'warn');
const db = await openDatabase({ dataDir: process.env.DIR ?? null, log });
await migrate(db, { schema: 'ledger', dir: LEDGER_MIGRATIONS_DIR, log });
const store = new LedgerStore(db);
const principal = { subject: 'anonymous', tenant: 'default', groups: [] };
const event = (type, runId, data) => ({
  id: randomUUID(),
  type,
  tenant: 'default',
  runId,
  occurredAt: new Date().toISOString(),
  source: 'gateway',
  principal,
  sessionId: randomUUID(),
  server: 'everything',
  data,
});
const decision = { decision: 'allow', level: 1, levelSource: 'heuristic', action: 'read:everything/echo' };
const call = () => {
  const run = randomUUID();
  return [
    event('tool.called', run, { name: 'echo', arguments: { message: 'bench' }, sideEffectLevel: 1, decision }),
    event('tool.completed', run, { name: 'echo', durationMs: 1, isError: false, result: { items: 1 } }),
  ];
};

console.log(`ledger append on ${process.env.DIR ? `data dir ${process.env.DIR}` : 'in-memory PGlite'}, ${CALLS} calls each`);
for (const perBatch of [4, 8, 25, 100, 400]) {
  let cpu = 0;
  const started = performance.now();
  for (let done = 0; done < CALLS; done += perBatch) {
    const batch = Array.from({ length: perBatch }, call).flat();
    const before = process.cpuUsage();
    await store.append(batch);
    const used = process.cpuUsage(before);
    cpu += used.user + used.system;
  }
  const wall = ((performance.now() - started) * 1000) / CALLS;
  console.log(`${String(perBatch).padStart(3)} calls/batch: ${(cpu / CALLS).toFixed(0)} µs CPU, ${wall.toFixed(0)} µs wall per call`);
}
await db.close();
