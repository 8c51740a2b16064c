import { randomUUID } from 'node:crypto';
import { createLogger, openDatabase, type Database, type LedgerEvent, type LedgerEventType } from '@punk/lib';
import { createScratchDatabase } from './pgtest.js';

export const log = createLogger('ledger-test', process.env.PUNK_TEST_LOG_LEVEL === undefined ? 'silent' : process.env.PUNK_TEST_LOG_LEVEL);

/** A database backend the ledger must behave the same on. */
export interface Backend {
  name: 'postgres' | 'pglite';
  open(): Promise<{ db: Database; close(): Promise<void> }>;
}

/** Real Postgres (a fresh database per call) and ephemeral PGlite. */
export const backends: Backend[] = [
  {
    name: 'postgres',
    async open() {
      const scratch = await createScratchDatabase();
      const db = await openDatabase({ url: scratch.url, log });
      return {
        db,
        async close() {
          await db.close();
          await scratch.drop();
        },
      };
    },
  },
  {
    name: 'pglite',
    async open() {
      const db = await openDatabase({ dataDir: null, log });
      return { db, close: () => db.close() };
    },
  },
];

/** A unique tenant name per test, so tests never see each other's chains. */
export function uniqueTenant(prefix = 'acme'): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

let clock = Date.parse('2026-01-01T00:00:00Z');

/** A valid trace event; times increase by one second per call. */
export function event(tenant: string, runId: string, type: LedgerEventType, data: Record<string, unknown> = {}): LedgerEvent {
  clock += 1000;
  return {
    id: randomUUID(),
    type,
    tenant,
    runId,
    occurredAt: new Date(clock).toISOString(),
    source: 'gateway',
    principal: { subject: 'alice', tenant, groups: ['dev'] },
    sessionId: 'session-1',
    server: 'filesystem',
    data,
  };
}

/** The events of one tools/call: called then completed. */
export function toolRun(tenant: string, runId = `run-${randomUUID().slice(0, 8)}`, tool = 'read_file'): LedgerEvent[] {
  return [
    event(tenant, runId, 'tool.called', { name: tool, arguments: { path: '/tmp/x' } }),
    event(tenant, runId, 'tool.completed', { name: tool, isError: false }),
  ];
}

/** Polls `check` until it returns a value other than `undefined`, or fails after `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
