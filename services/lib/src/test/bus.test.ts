/**
 * One suite, both implementations: the in-process bus and the NATS bus (real
 * NATS with JetStream) must behave the same for every caller. Names are unique
 * per run so runs can overlap and leave nothing behind.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { appendFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test, type TestContext } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startPrivateNats } from './natstest.js';
import {
  MemoryBus,
  NatsBus,
  PunkError,
  createLogger,
  subjectMatches,
  type Bus,
  type KvChange,
  type KvStore,
  type StreamMessage,
} from '../index.js';

const natsUrl = process.env.PUNK_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('bus-test', 'silent');

const implementations: Array<[string, () => Promise<Bus>]> = [
  ['in-process', async () => new MemoryBus()],
  ['NATS', async () => NatsBus.connect({ url: natsUrl, name: 'punk-bus-test', log })],
];

/** Opens a bus that is closed when the test ends, whatever happens. */
async function opened(t: TestContext, open: () => Promise<Bus>): Promise<Bus> {
  const bus = await open();
  t.after(() => bus.close());
  return bus;
}

const created: string[] = [];

// Leave nothing behind on the shared NATS server: drop this run's streams and buckets.
after(async () => {
  const nc = await connect({ servers: natsUrl });
  const jsm = await jetstreamManager(nc);
  for (const name of created) await jsm.streams.delete(name).catch(() => undefined);
  await nc.close();
});

function names() {
  const id = randomBytes(4).toString('hex');
  created.push(`TEST_${id}`, `KV_test_${id}`);
  return {
    subject: (s: string) => `test${id}.${s}`,
    stream: { name: `TEST_${id}`, subjects: [`test${id}.events.>`], duplicateWindowMs: 60_000 },
    bucket: `test_${id}`,
    id,
  };
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/** Whether `key` left the bucket within `ms`: the NATS server drops aged-out entries on its own expiry scan, late. */
async function goneWithin(kv: KvStore, key: string, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if ((await kv.get(key)) === undefined) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

test('NATS-style subject patterns', () => {
  assert.ok(subjectMatches('a.*.c', 'a.b.c'));
  assert.ok(subjectMatches('a.>', 'a.b.c'));
  assert.ok(!subjectMatches('a.>', 'a'));
  assert.ok(!subjectMatches('a.*', 'a.b.c'));
});

for (const [kind, open] of implementations) {
  describe(`the ${kind} bus`, () => {
    test('a request reaches one member of the queue group and its reply comes back', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const seen: string[] = [];
      await bus.serve(n.subject('echo'), async (data) => (seen.push('a'), { data }), { queue: 'svc' });
      await bus.serve(n.subject('echo'), async (data) => (seen.push('b'), { data }), { queue: 'svc' });
      const replies = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => bus.request(n.subject('echo'), { i }, { timeoutMs: 2000 })));
      assert.deepEqual(
        replies.map((r) => (r as { data: { i: number } }).data.i),
        [1, 2, 3, 4, 5, 6],
      );
      assert.equal(seen.length, 6, 'each request answered once');
      await bus.close();
    });

    test('errors cross the bus with their code; timeouts and missing responders are typed', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.serve(n.subject('fail'), async () => {
        throw new PunkError('ToolNotFound', 'no tool x', { tool: 'x' });
      });
      await bus.serve(n.subject('crash'), async () => {
        throw new TypeError('boom');
      });
      await bus.serve(n.subject('slow'), () => new Promise((resolve) => setTimeout(resolve, 500)));
      await assert.rejects(
        bus.request(n.subject('fail'), {}, { timeoutMs: 2000 }),
        (e: PunkError) => e.code === 'ToolNotFound' && e.message === 'no tool x' && e.details?.tool === 'x',
      );
      await assert.rejects(
        bus.request(n.subject('crash'), {}, { timeoutMs: 2000 }),
        (e: PunkError) => e.code === 'BusHandlerFailed' && /boom/.test(e.message),
      );
      await assert.rejects(bus.request(n.subject('slow'), {}, { timeoutMs: 50 }), (e: PunkError) => e.code === 'BusTimeout');
      await assert.rejects(bus.request(n.subject('nobody'), {}, { timeoutMs: 500 }), (e: PunkError) => e.code === 'BusNoResponders');
      await bus.close();
    });

    test('headers travel with requests and broadcasts', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.serve(n.subject('h'), async (_d, info) => info.headers['traceparent']);
      assert.equal(await bus.request(n.subject('h'), {}, { timeoutMs: 2000, headers: { traceparent: '00-abc-def-01' } }), '00-abc-def-01');
      await bus.close();
    });

    test('broadcasts reach every matching subscriber', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const got: string[] = [];
      await bus.subscribe(n.subject('reg.>'), (_d, info) => void got.push(`wild:${info.subject}`));
      await bus.subscribe(n.subject('reg.changed'), (d) => void got.push(`exact:${(d as { x: number }).x}`));
      await bus.publish(n.subject('reg.changed'), { x: 1 });
      await until(() => got.length >= 2);
      assert.deepEqual(got.sort(), [`exact:1`, `wild:${n.subject('reg.changed')}`]);
      await bus.close();
    });

    test('a stream stores a msgId once; a durable consumer gets every message at least once, in order, after a failure', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.ensureStream(n.stream);
      await bus.ensureStream(n.stream);
      const first = await bus.append(`test${n.id}.events.a`, { i: 1 }, { msgId: 'm1' });
      const again = await bus.append(`test${n.id}.events.a`, { i: 1 }, { msgId: 'm1' });
      assert.equal(again.duplicate, true);
      assert.equal(again.seq, first.seq);
      await bus.append(`test${n.id}.events.b`, { i: 2 }, { msgId: 'm2' });
      await assert.rejects(bus.append(`nostream${n.id}.x`, {}, { msgId: 'x' }), (e: PunkError) => e.code === 'BusStreamNotFound');
      const delivered: StreamMessage[] = [];
      let failOnce = true;
      const consumer = await bus.consume(n.stream.name, 'writer', async (batch) => {
        delivered.push(...batch);
        if (failOnce) {
          failOnce = false;
          throw new Error('database down');
        }
      });
      await bus.append(`test${n.id}.events.c`, { i: 3 }, { msgId: 'm3' });
      await until(
        () => !failOnce && new Set(delivered.filter((m) => m.deliveryCount > 1 || m.msgId === 'm3').map((m) => m.msgId)).size === 3,
        10_000,
      );
      await consumer.stop();
      assert.ok(
        delivered.some((m) => m.msgId === 'm1' && m.deliveryCount >= 2),
        'redelivered after a failed batch',
      );
      assert.deepEqual([...new Set(delivered.map((m) => m.msgId))], ['m1', 'm2', 'm3']);
      assert.deepEqual(delivered.find((m) => m.msgId === 'm2')?.data, { i: 2 });
      await bus.close();
    });

    test('a consumer started later resumes from its acknowledged position', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.ensureStream(n.stream);
      await bus.append(`test${n.id}.events.a`, {}, { msgId: 'a' });
      const got: string[] = [];
      let consumer = await bus.consume(n.stream.name, 'w', async (batch) => void got.push(...batch.map((m) => m.msgId)));
      await until(() => got.length >= 1);
      await consumer.stop();
      await bus.append(`test${n.id}.events.a`, {}, { msgId: 'b' });
      consumer = await bus.consume(n.stream.name, 'w', async (batch) => void got.push(...batch.map((m) => m.msgId)));
      await until(() => got.length >= 2);
      await consumer.stop();
      assert.deepEqual(got, ['a', 'b']);
      await bus.close();
    });

    test('a stream read replays what follows a sequence, filtered by subject', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.ensureStream(n.stream);
      const seqs: number[] = [];
      for (const [i, s] of ['x', 'y', 'x', 'x'].entries())
        seqs.push((await bus.append(`test${n.id}.events.${s}`, { i }, { msgId: `r${i}` })).seq);
      const all = await bus.readStream(n.stream.name, { subject: `test${n.id}.events.x`, afterSeq: 0 });
      assert.deepEqual(
        all.map((m) => (m.data as { i: number }).i),
        [0, 2, 3],
      );
      const after = await bus.readStream(n.stream.name, { subject: `test${n.id}.events.x`, afterSeq: seqs[2]! });
      assert.deepEqual(
        after.map((m) => (m.data as { i: number }).i),
        [3],
      );
      assert.deepEqual(await bus.readStream(n.stream.name, { subject: `test${n.id}.events.x`, afterSeq: seqs[3]! }), []);
      await bus.close();
    });

    test('a key-value bucket supports get, put, create, compare-and-set and delete', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const kv = await bus.keyValue({ name: n.bucket, ttlMs: 60_000 });
      assert.equal(await kv.get('s1'), undefined);
      const r1 = await kv.create('s1', { principal: 'alice' });
      await assert.rejects(kv.create('s1', {}), (e: PunkError) => e.code === 'KvConflict');
      const entry = await kv.get('s1');
      assert.deepEqual(entry?.value, { principal: 'alice' });
      assert.equal(entry?.revision, r1);
      const r2 = await kv.update('s1', { principal: 'alice', level: 'info' }, r1);
      await assert.rejects(kv.update('s1', {}, r1), (e: PunkError) => e.code === 'KvConflict');
      assert.equal((await kv.get('s1'))?.revision, r2);
      const other = await bus.keyValue({ name: n.bucket, ttlMs: 60_000 });
      assert.deepEqual((await other.get('s1'))?.value, { principal: 'alice', level: 'info' });
      await kv.put('s2', { principal: 'bob' });
      assert.deepEqual((await kv.keys()).sort(), ['s1', 's2']);
      assert.equal(await kv.size(), 2, 'one per key, however often written');
      await kv.delete('s1');
      assert.equal(await kv.get('s1'), undefined);
      assert.deepEqual(await kv.keys(), ['s2']);
      assert.ok((await kv.size()) >= 1, 'a deleted key may count until its marker ages out');
      await bus.close();
    });

    test('key-value entries expire after the bucket TTL', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const kv = await bus.keyValue({ name: n.bucket, ttlMs: 1000 });
      await kv.put('short', 1);
      assert.ok(await kv.get('short'));
      await new Promise((r) => setTimeout(r, 1000));
      assert.ok(await goneWithin(kv, 'short'), 'the entry expired');
      await bus.close();
    });

    test('a bucket watch hands over the live entries first, then every put and delete in order, until unsubscribed', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const kv = await bus.keyValue({ name: n.bucket, ttlMs: 0 });
      await kv.put('a', { v: 1 });
      await kv.put('b', { v: 1 });
      await kv.put('gone', { v: 1 });
      await kv.delete('gone');
      const seen: KvChange[] = [];
      const watch = await kv.watch((change) => void seen.push(change));
      assert.deepEqual(
        seen.map((c) => [c.operation, c.key, c.operation === 'put' && c.value]),
        [
          ['put', 'a', { v: 1 }],
          ['put', 'b', { v: 1 }],
        ],
        'live entries are delivered before watch() resolves; a deleted key is not',
      );
      await kv.put('a', { v: 2 });
      await kv.delete('b');
      await kv.put('c', { v: 1 });
      await until(() => seen.length >= 5);
      assert.deepEqual(
        seen.slice(2).map((c) => [c.operation, c.key, c.operation === 'put' && c.value]),
        [
          ['put', 'a', { v: 2 }],
          ['delete', 'b', false],
          ['put', 'c', { v: 1 }],
        ],
      );
      const revisions = seen.map((c) => c.revision);
      assert.ok(
        revisions.every((r) => r !== undefined),
        'a put and a delete carry their revision',
      );
      assert.deepEqual(
        revisions,
        [...revisions].sort((x, y) => x! - y!),
        'revisions grow, deletes included',
      );
      await watch.unsubscribe();
      await kv.put('d', {});
      const other = await bus.keyValue({ name: n.bucket, ttlMs: 0 });
      const after: KvChange[] = [];
      await (await other.watch((change) => void after.push(change))).unsubscribe();
      assert.deepEqual(after.map((c) => c.key).sort(), ['a', 'c', 'd'], 'a second watch sees the bucket as it is');
      assert.equal(seen.length, 5, 'nothing after unsubscribe');
      await bus.close();
    });

    test('a bucket watch keeps going when its handler throws, and reports expiry as a delete', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      const kv = await bus.keyValue({ name: n.bucket, ttlMs: 1000 });
      const seen: string[] = [];
      await kv.watch((change) => {
        seen.push(`${change.operation}:${change.key}`);
        if (change.key === 'bad') throw new Error('handler failed');
      });
      await kv.put('bad', 1);
      await kv.put('short', 1);
      // Both expire within a millisecond or so of each other: their reports may come in either order.
      await until(() => seen.includes('delete:short') && seen.includes('delete:bad'), 15_000);
      assert.deepEqual(seen.slice(0, 2), ['put:bad', 'put:short']);
      assert.ok(seen.includes('delete:bad') && seen.includes('delete:short'), 'both entries expired and were reported');
      assert.ok(await goneWithin(kv, 'short'), 'the expired entry is gone from the bucket');
      await bus.close();
    });

    test('payloads are copied and a closed bus refuses work', async (t) => {
      const bus = await opened(t, open);
      const n = names();
      await bus.serve(n.subject('mutate'), async (data) => {
        (data as { x: number }).x = 99;
        return data;
      });
      const sent = { x: 1 };
      assert.equal(((await bus.request(n.subject('mutate'), sent, { timeoutMs: 2000 })) as { x: number }).x, 99);
      assert.equal(sent.x, 1);
      assert.equal(bus.isConnected(), true);
      await bus.close();
      assert.equal(bus.isConnected(), false);
      await assert.rejects(bus.request(n.subject('mutate'), {}, { timeoutMs: 100 }), (e: PunkError) => e.code === 'BusClosed');
    });
  });
}

test('stopping an in-process consumer first delivers what the stream still holds', async () => {
  const bus = new MemoryBus();
  const n = names();
  await bus.ensureStream(n.stream);
  const got: string[] = [];
  const consumer = await bus.consume(
    n.stream.name,
    'w',
    async (batch) => {
      await new Promise((r) => setTimeout(r, 20));
      got.push(...batch.map((m) => m.msgId));
    },
    { maxBatch: 1 },
  );
  for (const id of ['a', 'b', 'c']) await bus.append(`test${n.id}.events.a`, {}, { msgId: id });
  await consumer.stop();
  assert.deepEqual(got, ['a', 'b', 'c']);
  await bus.close();
});

test('an in-process append to a consumed stream resolves once the consumer acknowledged it, with at most maxPending waiting', async () => {
  const bus = new MemoryBus(log, { maxPending: 3 });
  const n = names();
  await bus.ensureStream(n.stream);
  const committed: string[] = [];
  const batches: number[] = [];
  let release: () => void = () => {};
  let gate = new Promise<void>((resolve) => (release = resolve));
  let received = 0;
  const consumer = await bus.consume(n.stream.name, 'w', async (batch) => {
    received += batch.length;
    await gate;
    batches.push(batch.length);
    committed.push(...batch.map((m) => m.msgId));
  });
  // Given the consumer holding its first batch, ten appends at once:
  const acked: string[] = [];
  const appends = Array.from({ length: 10 }, (_, i) =>
    bus.append(`test${n.id}.events.a`, { i }, { msgId: `m${i}` }).then((ack) => {
      // each resolves only after its message was handled,
      assert.ok(committed.includes(`m${i}`), `m${i} acknowledged before it was handled`);
      acked.push(`m${i}`);
      return ack;
    }),
  );
  await until(() => received > 0);
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(acked, [], 'nothing is acknowledged while the consumer holds its batch');
  assert.ok(received <= 3, `${received} messages pending`);
  // and the messages waiting meanwhile go to the consumer together, never more than three pending.
  for (let round = 0; round < 10 && acked.length < 10; round++) {
    release();
    gate = new Promise<void>((resolve) => (release = resolve));
    await until(() => acked.length >= Math.min(10, committed.length));
  }
  release();
  gate = Promise.resolve();
  const acks = await Promise.all(appends);
  assert.deepEqual(
    acks.map((a) => a.seq),
    Array.from({ length: 10 }, (_, i) => i + 1),
  );
  assert.ok(Math.max(...batches) <= 3 && batches.some((size) => size > 1), `batches ${JSON.stringify(batches)}`);
  // A duplicate of an acknowledged message resolves at once; a stream without a running consumer acknowledges at once.
  assert.deepEqual(await bus.append(`test${n.id}.events.a`, {}, { msgId: 'm0' }), { seq: 1, duplicate: true });
  await consumer.stop();
  assert.equal((await bus.append(`test${n.id}.events.a`, {}, { msgId: 'later' })).duplicate, false);
  await bus.close();
});

test('an in-process append fails with BusTimeout when its consumer does not acknowledge in time, and the message stays queued', async () => {
  const bus = new MemoryBus(log);
  const n = names();
  await bus.ensureStream(n.stream);
  let failing = true;
  const got: string[] = [];
  const consumer = await bus.consume(n.stream.name, 'w', async (batch) => {
    if (failing) throw new Error('database down');
    got.push(...batch.map((m) => m.msgId));
  });
  await assert.rejects(
    bus.append(`test${n.id}.events.a`, {}, { msgId: 'slow', timeoutMs: 300 }),
    (e: PunkError) => e.code === 'BusTimeout' && /not acknowledged in time.*stays queued/.test(e.message),
  );
  failing = false;
  await until(() => got.includes('slow'), 10_000);
  await consumer.stop();
  await bus.close();
});

test('an in-process stream remembers at most 10,000 message ids for duplicate detection', async () => {
  const bus = new MemoryBus();
  const n = names();
  await bus.ensureStream(n.stream);
  const subject = `test${n.id}.events.a`;
  for (let i = 0; i <= 10_000; i++) await bus.append(subject, {}, { msgId: `id-${i}` });
  assert.equal((await bus.append(subject, {}, { msgId: 'id-10000' })).duplicate, true, 'a recent id is still a duplicate');
  assert.equal((await bus.append(subject, {}, { msgId: 'id-1' })).duplicate, true, 'so is the oldest one kept');
  assert.equal((await bus.append(subject, {}, { msgId: 'id-0' })).duplicate, false, 'the first id has been let go');
  await bus.close();
});

test('a NATS bucket watch survives the server restarting and resumes where it was', async (t) => {
  const nats = await startPrivateNats();
  t.after(() => nats.stop());
  const bus = await NatsBus.connect({ url: nats.url, name: 'punk-bus-restart-test', log });
  t.after(() => bus.close());
  const kv = await bus.keyValue({ name: 'watched', ttlMs: 0 });
  await kv.put('before', 1);
  const seen: string[] = [];
  await kv.watch((change) => void seen.push(`${change.operation}:${change.key}`));
  assert.deepEqual(seen, ['put:before']);
  await nats.restart();
  await until(() => bus.isConnected(), 15_000);
  // JetStream may need a moment after the restart before it accepts writes.
  await retry(() => kv.put('after', 2));
  await retry(() => kv.delete('before'));
  await until(() => seen.length >= 3, 20_000);
  assert.deepEqual(seen, ['put:before', 'put:after', 'delete:before']);
});

async function retry<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (attempt > 50) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

test('with a journal directory, an in-process append resolves once journaled; what no consumer acknowledged is handed over at the next start', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-journal-'));
  try {
    const n = names();
    const subject = `test${n.id}.events.a`;
    const file = join(dir, `${n.stream.name}.journal`);
    // Given a consumer that fails every batch, three appends resolve anyway: they are in the journal.
    const first = new MemoryBus(log, { journalDir: dir });
    await first.ensureStream(n.stream);
    await first.consume(n.stream.name, 'w', () => Promise.reject(new Error('the database is away')));
    for (const i of [1, 2, 3]) await first.append(subject, { i }, { msgId: `m${i}` });
    assert.equal((await stat(file)).mode & 0o777, 0o600, 'owner-only');
    await first.close();
    // A crash cut a fourth line short: its append never resolved, and it is skipped.
    await appendFile(file, '{"subject":"cut');
    // When the next process starts on the directory, its consumer gets the three, in order, and once it
    // acknowledged them a clean stop leaves the journal empty.
    const second = new MemoryBus(log, { journalDir: dir });
    await second.ensureStream(n.stream);
    const got: string[] = [];
    const consumer = await second.consume(n.stream.name, 'w', async (batch) => {
      got.push(...batch.map((m) => `${m.msgId}:${JSON.stringify(m.data)}`));
    });
    await until(() => got.length >= 3);
    assert.deepEqual(got, ['m1:{"i":1}', 'm2:{"i":2}', 'm3:{"i":3}']);
    await consumer.stop();
    await second.close();
    assert.equal(statSync(file).size, 0, 'a clean stop with everything acknowledged empties the journal');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with a journal directory, acknowledged messages are forgotten once the journal holds 64 KiB; before that a crash hands them over again', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-journal-'));
  try {
    const n = names();
    const subject = `test${n.id}.events.a`;
    const file = join(dir, `${n.stream.name}.journal`);
    const acked: string[] = [];
    const first = new MemoryBus(log, { journalDir: dir, groupCommitMs: 0 });
    await first.ensureStream(n.stream);
    await first.consume(n.stream.name, 'w', async (batch) => {
      acked.push(...batch.map((m) => m.msgId));
    });
    // Given two small messages, both acknowledged: the journal still holds them (no truncation per acknowledgement)...
    for (const i of [1, 2]) await first.append(subject, { i }, { msgId: `small${i}` });
    await until(() => acked.length === 2);
    assert.deepEqual(acked, ['small1', 'small2']);
    const held = statSync(file).size;
    assert.ok(held > 0 && held < 64 * 1024, `the journal holds the two acknowledged messages (${held} bytes)`);
    // ...so a crash now (no close) hands them to the next process's consumer again, which the ledger stores once.
    const second = new MemoryBus(log, { journalDir: dir, groupCommitMs: 0 });
    await second.ensureStream(n.stream);
    const again: string[] = [];
    const replayed = await second.consume(n.stream.name, 'w', async (batch) => {
      again.push(...batch.map((m) => m.msgId));
    });
    await until(() => again.length === 2);
    assert.deepEqual(again, ['small1', 'small2']);
    // When the acknowledged messages pass 64 KiB, the journal is emptied: after five of 16 KiB it holds only what
    // came after its emptying (the fifth), not the 80 KiB written.
    const text = 'x'.repeat(16 * 1024);
    for (const i of [1, 2, 3, 4, 5]) {
      await second.append(subject, { text }, { msgId: `large${i}` });
      await until(() => again.length === 2 + i);
    }
    assert.equal(again.length, 7, 'the consumer acknowledged the five large messages');
    const left = statSync(file).size;
    assert.ok(left > 16 * 1024 && left < 2 * 16 * 1024, `emptied once past 64 KiB, then the fifth written (${left} bytes)`);
    await replayed.stop();
    await second.close();
    await first.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with a journal directory, an append made just before the bus closes is written before the file closes and handed over at the next start', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-journal-'));
  try {
    const n = names();
    const subject = `test${n.id}.events.a`;
    const first = new MemoryBus(log, { journalDir: dir });
    await first.ensureStream(n.stream);
    await first.consume(n.stream.name, 'w', () => Promise.reject(new Error('the database is away')));
    // Given an append whose journal write is still to come in this turn (a state change recorded as Punk stops)...
    const appended = first.append(subject, { last: true }, { msgId: 'last' });
    await first.close();
    // ...it resolves (no EBADF from a write after the file closed), and the next start hands it over.
    await appended;
    const second = new MemoryBus(log, { journalDir: dir });
    await second.ensureStream(n.stream);
    const got: string[] = [];
    const consumer = await second.consume(n.stream.name, 'w', async (batch) => {
      got.push(...batch.map((m) => m.msgId));
    });
    await until(() => got.length > 0);
    assert.deepEqual(got, ['last']);
    await consumer.stop();
    await second.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('with a journal directory, a consumer takes the appends of its group-commit window in one batch, and stop cuts the window short', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-journal-'));
  try {
    const n = names();
    const subject = `test${n.id}.events.a`;
    const batches: string[][] = [];
    const record = async (batch: StreamMessage[]) => {
      batches.push(batch.map((m) => m.msgId));
    };
    // Given three appends a few milliseconds apart in a 2 s window, each resolves at its journal write, before any batch...
    const bus = new MemoryBus(log, { journalDir: dir, groupCommitMs: 2_000 });
    await bus.ensureStream(n.stream);
    const consumer = await bus.consume(n.stream.name, 'w', record);
    for (const i of [1, 2, 3]) {
      await bus.append(subject, { i }, { msgId: `m${i}` });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.deepEqual(batches, [], 'no batch before the window closes');
    // ...then the consumer gets all three in one batch.
    await until(() => batches.length > 0, 10_000);
    assert.deepEqual(batches, [['m1', 'm2', 'm3']]);
    await consumer.stop();
    await bus.close();
    // When a consumer stops inside a window of 10 minutes, what is pending is handed over at once.
    const patient = new MemoryBus(log, { journalDir: dir, groupCommitMs: 600_000 });
    await patient.ensureStream(n.stream);
    const second = await patient.consume(n.stream.name, 'w', record);
    await patient.append(subject, { i: 4 }, { msgId: 'm4' });
    await second.stop();
    assert.deepEqual(batches, [['m1', 'm2', 'm3'], ['m4']]);
    await patient.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a NATS bucket that several services create at the same moment opens on each, with one stream', async (t) => {
  const buses = await Promise.all(
    Array.from({ length: 6 }, () => opened(t, () => NatsBus.connect({ url: natsUrl, name: 'punk-bus-test', log }))),
  );
  for (let round = 0; round < 5; round++) {
    const n = names();
    const stores = await Promise.all(buses.map((bus) => bus.keyValue({ name: n.bucket, ttlMs: 60_000 })));
    await stores[0]!.put('k', { round });
    for (const store of stores) assert.deepEqual((await store.get('k'))?.value, { round });
  }
});
