/**
 * The watched copy of `PUNK_SESSIONS` two front replicas keep (sessions.ts), on a nats-server of this test's own:
 * a session created on A is found on B at once (read from the bucket when B's copy does not hold it yet), an update
 * on A reaches B's copy, a delete on A ends the session on B, and a compare-and-set write from a stale copy never
 * overwrites the newer state.
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { anonymousPrincipal, createLogger, NatsBus, type SessionState } from '@punk/lib';
import { SessionStore } from '../sessions.js';
import { startNats } from './replica-harness.js';

const log = createLogger('mcp-front-sessions-test', 'silent');

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} never happened`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function state(): SessionState {
  const now = new Date().toISOString();
  return {
    tenant: 'sessions-test',
    scope: 'aggregate',
    principal: anonymousPrincipal('sessions-test'),
    protocolVersion: '2025-11-25',
    clientInfo: { name: 'sessions-test', version: '1' },
    capabilities: {},
    subscriptions: [],
    createdAt: now,
    renewedAt: now,
  };
}

describe('sessions held by two front replicas', () => {
  let nats: Awaited<ReturnType<typeof startNats>>;
  const buses: NatsBus[] = [];
  let a: SessionStore;
  let b: SessionStore;

  before(async () => {
    nats = await startNats(log);
    for (const name of ['front-a', 'front-b']) buses.push(await NatsBus.connect({ url: nats.url, name, log }));
    a = await SessionStore.open(buses[0]!, 60_000, log);
    b = await SessionStore.open(buses[1]!, 60_000, log);
  });

  after(async () => {
    await a.close();
    await b.close();
    for (const bus of buses) await bus.close();
    await nats.stop();
  });

  it('a session created on A is found on B at once, and is in the copy B lists once the watch brings it', async () => {
    const id = randomUUID();
    await a.create(id, state());
    assert.equal((await b.get(id))?.state.clientInfo.name, 'sessions-test');
    await until('B lists the session', async () => (await b.list()).some((s) => s.id === id));
  });

  it('an update on A reaches B; a delete on A ends the session on B', async () => {
    const id = randomUUID();
    await a.create(id, state());
    await b.get(id);
    await a.update(id, (s) => ({ ...s, logLevel: 'debug' }));
    await until('B sees the new log level', async () => (await b.get(id))?.state.logLevel === 'debug');
    await a.delete(id);
    assert.equal(await a.get(id), undefined, 'A ends its own session at once');
    await until('B ends the session', async () => (await b.get(id)) === undefined);
    assert.ok(!(await b.list()).some((s) => s.id === id));
  });

  it('an update on B starts from the bucket, so a change A made a moment before is kept', async () => {
    const id = randomUUID();
    await a.create(id, state());
    await b.get(id);
    await a.update(id, (s) => ({ ...s, subscriptions: ['file:///one'] }));
    // Whatever B's copy holds, its read-modify-write sees A's subscription.
    const next = await b.update(id, (s) => ({ ...s, logLevel: 'info' }));
    assert.deepEqual(next?.subscriptions, ['file:///one']);
    assert.equal(next?.logLevel, 'info');
    await until('A sees both changes', async () => {
      const held = await a.get(id);
      return held?.state.logLevel === 'info' && held.state.subscriptions.length === 1;
    });
  });
});
