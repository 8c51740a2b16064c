import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryBus, PunkError, subjectMatches, type StreamMessage } from '../index.js';

const stream = { name: 'TEST', subjects: ['test.events.>'], duplicateWindowMs: 60_000 };

test('a request reaches one member of the queue group and its reply comes back', async () => {
  const bus = new MemoryBus();
  const seen: string[] = [];
  await bus.serve('svc.echo', async data => (seen.push('a'), { from: 'a', data }), { queue: 'svc' });
  await bus.serve('svc.echo', async data => (seen.push('b'), { from: 'b', data }), { queue: 'svc' });
  const replies = await Promise.all([1, 2, 3, 4].map(n => bus.request('svc.echo', { n }, { timeoutMs: 1000 })));
  assert.deepEqual(replies.map(r => (r as { data: { n: number } }).data.n), [1, 2, 3, 4]);
  assert.deepEqual(seen.sort(), ['a', 'a', 'b', 'b']);
  await bus.close();
});

test('a responder error reaches the requester with its code; other errors become BusHandlerFailed', async () => {
  const bus = new MemoryBus();
  await bus.serve('svc.fail', async () => {
    throw new PunkError('ToolNotFound', 'no tool x');
  });
  await bus.serve('svc.crash', async () => {
    throw new TypeError('boom');
  });
  await assert.rejects(bus.request('svc.fail', {}, { timeoutMs: 1000 }), (e: PunkError) => e.code === 'ToolNotFound' && e.message === 'no tool x');
  await assert.rejects(bus.request('svc.crash', {}, { timeoutMs: 1000 }), (e: PunkError) => e.code === 'BusHandlerFailed' && /boom/.test(e.message));
  await bus.close();
});

test('a request times out with BusTimeout, and one nobody serves is BusNoResponders', async () => {
  const bus = new MemoryBus();
  await bus.serve('svc.slow', () => new Promise(resolve => setTimeout(resolve, 500)));
  await assert.rejects(bus.request('svc.slow', {}, { timeoutMs: 20 }), (e: PunkError) => e.code === 'BusTimeout');
  await assert.rejects(bus.request('svc.none', {}, { timeoutMs: 20 }), (e: PunkError) => e.code === 'BusNoResponders');
  await bus.close();
});

test('payloads are copied: a handler cannot change the sender\'s object', async () => {
  const bus = new MemoryBus();
  await bus.serve('svc.mutate', async data => {
    (data as { x: number }).x = 99;
    return data;
  });
  const sent = { x: 1 };
  const reply = (await bus.request('svc.mutate', sent, { timeoutMs: 1000 })) as { x: number };
  assert.equal(sent.x, 1);
  assert.equal(reply.x, 99);
  await bus.close();
});

test('broadcasts reach every matching subscriber, with NATS wildcards', async () => {
  assert.ok(subjectMatches('a.*.c', 'a.b.c'));
  assert.ok(subjectMatches('a.>', 'a.b.c'));
  assert.ok(!subjectMatches('a.>', 'a'));
  assert.ok(!subjectMatches('a.*', 'a.b.c'));
  const bus = new MemoryBus();
  const got: string[] = [];
  await bus.subscribe('reg.>', (_d, info) => void got.push(`one:${info.subject}`));
  await bus.subscribe('reg.changed', () => void got.push('two'));
  await bus.publish('reg.changed', { x: 1 });
  await new Promise(resolve => setTimeout(resolve, 10));
  assert.deepEqual(got.sort(), ['one:reg.changed', 'two']);
  await bus.close();
});

test('a stream stores a msgId once, and a durable consumer gets every message at least once, in order', async () => {
  const bus = new MemoryBus();
  await bus.ensureStream(stream);
  await bus.ensureStream(stream);
  const first = await bus.append('test.events.a', { n: 1 }, { msgId: 'm1' });
  const again = await bus.append('test.events.a', { n: 1 }, { msgId: 'm1' });
  assert.equal(again.duplicate, true);
  assert.equal(again.seq, first.seq);
  await bus.append('test.events.b', { n: 2 }, { msgId: 'm2' });
  await assert.rejects(bus.append('other.subject', {}, { msgId: 'x' }), (e: PunkError) => e.code === 'BusStreamNotFound');

  const delivered: StreamMessage[] = [];
  let failOnce = true;
  const consumer = await bus.consume('TEST', 'writer', async batch => {
    delivered.push(...batch);
    if (failOnce) {
      failOnce = false;
      throw new Error('database down');
    }
  });
  await bus.append('test.events.c', { n: 3 }, { msgId: 'm3' });
  for (let i = 0; i < 100 && !delivered.some(m => m.msgId === 'm3' && !failOnce); i++) await new Promise(r => setTimeout(r, 20));
  await consumer.stop();
  const ids = delivered.map(m => `${m.msgId}#${m.deliveryCount}`);
  assert.ok(ids.includes('m1#1') && ids.includes('m1#2'), `redelivered after a failed batch: ${ids}`);
  const lastDelivery = delivered.filter(m => m.deliveryCount === 2 || m.msgId === 'm3').map(m => m.msgId);
  assert.deepEqual(lastDelivery.filter((v, i, a) => a.indexOf(v) === i), ['m1', 'm2', 'm3']);
  await bus.close();
});

test('a consumer started later resumes from its acknowledged position', async () => {
  const bus = new MemoryBus();
  await bus.ensureStream(stream);
  await bus.append('test.events.a', { n: 1 }, { msgId: 'a' });
  const got: string[] = [];
  let consumer = await bus.consume('TEST', 'w', async batch => void got.push(...batch.map(m => m.msgId)));
  for (let i = 0; i < 50 && got.length < 1; i++) await new Promise(r => setTimeout(r, 10));
  await consumer.stop();
  await bus.append('test.events.a', { n: 2 }, { msgId: 'b' });
  consumer = await bus.consume('TEST', 'w', async batch => void got.push(...batch.map(m => m.msgId)));
  for (let i = 0; i < 50 && got.length < 2; i++) await new Promise(r => setTimeout(r, 10));
  await consumer.stop();
  assert.deepEqual(got, ['a', 'b']);
  await bus.close();
});

test('stopping an in-process consumer first delivers what the stream still holds', async () => {
  const bus = new MemoryBus();
  await bus.ensureStream(stream);
  const got: string[] = [];
  const consumer = await bus.consume('TEST', 'w', async batch => {
    await new Promise(r => setTimeout(r, 20));
    got.push(...batch.map(m => m.msgId));
  }, { maxBatch: 1 });
  for (const id of ['a', 'b', 'c']) await bus.append('test.events.a', {}, { msgId: id });
  await consumer.stop();
  assert.deepEqual(got, ['a', 'b', 'c']);
  await bus.close();
});
