/**
 * Payloads of any size up to the bus's limit cross it intact, on both implementations: requests, replies,
 * broadcasts and appends larger than the NATS server's `max_payload` travel in parts, on the shared server (1 MiB)
 * and on a private one started with `max_payload: 65536` (the part size is read from the server, not assumed); a
 * payload of the limit's size in an envelope (a reply around a result at the limit) crosses too; past
 * `maxPayloadBytes` and the envelope allowance the sender, or for a reply the requester, gets `PayloadTooLarge` at
 * once, naming the limit.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startPrivateNats, type PrivateNats } from './natstest.js';
import { ENVELOPE_ALLOWANCE_BYTES } from '../bus/bus.js';
import { MemoryBus, NatsBus, PunkError, createLogger, type Bus, type StreamMessage } from '../index.js';

const sharedNats = process.env.PUNK_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
const log = createLogger('bus-large-test', 'silent');
const LIMIT = 8 * 1024 * 1024;

let small: PrivateNats;
let configDir: string;
const created: Array<{ url: string; stream: string }> = [];

before(async () => {
  configDir = await mkdtemp(join(tmpdir(), 'punk-nats-conf-'));
  await writeFile(join(configDir, 'small.conf'), 'max_payload: 65536\n');
  small = await startPrivateNats(['-c', join(configDir, 'small.conf')]);
});

after(async () => {
  const nc = await connect({ servers: sharedNats });
  const jsm = await jetstreamManager(nc);
  for (const { url, stream } of created) if (url === sharedNats) await jsm.streams.delete(stream).catch(() => undefined);
  await nc.close();
  await small?.stop();
  await rm(configDir, { recursive: true, force: true });
});

/** A JSON value of about `bytes` UTF-8 bytes, with multi-byte characters that parts may cut in two. */
function payloadOf(bytes: number): { text: string; tail: number[] } {
  const unit = 'abcdefghé€';
  return { text: unit.repeat(Math.ceil(bytes / Buffer.byteLength(unit))), tail: [1, 2, 3] };
}

const implementations: Array<[string, () => { open: () => Promise<Bus>; url: string; big: number }]> = [
  ['in-process', () => ({ open: async () => new MemoryBus(log, { maxPayloadBytes: LIMIT }), url: '', big: 3 * 1024 * 1024 })],
  [
    'NATS (max_payload 1 MiB)',
    () => ({
      open: () => NatsBus.connect({ url: sharedNats, name: 'punk-bus-large-test', log, maxPayloadBytes: LIMIT }),
      url: sharedNats,
      big: 3 * 1024 * 1024,
    }),
  ],
  [
    'NATS (max_payload 64 KiB)',
    () => ({
      open: () => NatsBus.connect({ url: small.url, name: 'punk-bus-large-test', log, maxPayloadBytes: LIMIT }),
      url: small.url,
      big: 300 * 1024,
    }),
  ],
];

async function opened(t: TestContext, open: () => Promise<Bus>): Promise<Bus> {
  const bus = await open();
  t.after(() => bus.close());
  return bus;
}

async function until<T>(probe: () => T | undefined, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const [name, setup] of implementations) {
  describe(`large payloads on the ${name} bus`, () => {
    test('a request and its reply larger than one message arrive intact', { timeout: 120_000 }, async (t) => {
      const { open, big } = setup();
      const bus = await opened(t, open);
      const subject = `test${randomBytes(4).toString('hex')}.large`;
      const sent = payloadOf(big);
      await bus.serve(subject, async (data) => ({ echoed: data, more: payloadOf(big) }));
      const reply = (await bus.request(subject, sent, { timeoutMs: 60_000 })) as { echoed: unknown; more: unknown };
      assert.deepEqual(reply.echoed, sent, 'the request reached the responder intact');
      assert.deepEqual(reply.more, payloadOf(big), 'the reply reached the requester intact');
    });

    test('a large broadcast reaches every subscriber intact', { timeout: 120_000 }, async (t) => {
      const { open, big } = setup();
      const bus = await opened(t, open);
      const subject = `test${randomBytes(4).toString('hex')}.wide`;
      const received: unknown[][] = [[], []];
      for (const inbox of received) await bus.subscribe(subject, (data) => void inbox.push(data));
      await bus.publish(subject, payloadOf(big));
      await until(() => (received.every((inbox) => inbox.length === 1) ? true : undefined));
      for (const inbox of received) assert.deepEqual(inbox[0], payloadOf(big));
    });

    test('a large append is stored once and read back intact, by a consumer and by a stream read', { timeout: 120_000 }, async (t) => {
      const { open, big, url } = setup();
      const bus = await opened(t, open);
      const id = randomBytes(4).toString('hex');
      const stream = { name: `TEST_LARGE_${id}`, subjects: [`test${id}.events.>`], duplicateWindowMs: 60_000 };
      created.push({ url, stream: stream.name });
      await bus.ensureStream(stream);
      const subject = `test${id}.events.one`;
      await bus.append(subject, { small: true }, { msgId: `${id}-1` });
      const ack = await bus.append(subject, payloadOf(big), { msgId: `${id}-2` });
      assert.equal((await bus.append(subject, payloadOf(big), { msgId: `${id}-2` })).duplicate, true, 'a repeated append is no copy');
      await bus.append(subject, { after: true }, { msgId: `${id}-3` });
      const read = await bus.readStream(stream.name, { subject, afterSeq: 0 });
      assert.deepEqual(
        read.map((m) => m.data),
        [{ small: true }, payloadOf(big), { after: true }],
      );
      assert.equal(read[1]!.seq, ack.seq, 'the stored message is at the sequence its append acknowledged');
      assert.deepEqual(
        (await bus.readStream(stream.name, { subject, afterSeq: ack.seq })).map((m) => m.data),
        [{ after: true }],
        'a read after its sequence starts past it',
      );
      const consumed: StreamMessage[] = [];
      const consumer = await bus.consume(stream.name, `large_${id}`, async (batch) => void consumed.push(...batch));
      t.after(() => consumer.stop());
      await until(() => (consumed.length >= 3 ? true : undefined));
      assert.deepEqual(
        consumed.map((m) => m.data),
        [{ small: true }, payloadOf(big), { after: true }],
      );
    });

    test('a reply holding a result of the limit in its envelope crosses intact', { timeout: 120_000 }, async (t) => {
      const { open } = setup();
      const bus = await opened(t, open);
      const subject = `test${randomBytes(4).toString('hex')}.enveloped`;
      // Past the limit as a whole, by what wraps a result of the limit's size; the gateway let that result through.
      const reply = { result: payloadOf(LIMIT - 64), meta: 'm'.repeat(4096) };
      assert.ok(Buffer.byteLength(JSON.stringify(reply)) > LIMIT);
      await bus.serve(subject, async () => reply);
      assert.deepEqual(await bus.request(subject, {}, { timeoutMs: 60_000 }), reply);
    });

    test('past the limit: the sender, and for a reply the requester, gets PayloadTooLarge at once', { timeout: 120_000 }, async (t) => {
      const { open } = setup();
      const bus = await opened(t, open);
      const subject = `test${randomBytes(4).toString('hex')}.huge`;
      const huge = payloadOf(LIMIT + ENVELOPE_ALLOWANCE_BYTES + 1024);
      const refusal = (error: unknown) => {
        assert.ok(error instanceof PunkError, String(error));
        assert.equal(error.code, 'PayloadTooLarge');
        assert.match(error.message, new RegExp(`past the limit of ${LIMIT} bytes \\(PUNK_MAX_RESULT_BYTES\\)`));
        return true;
      };
      await bus.serve(subject, async (data) => ((data as { big?: boolean }).big ? huge : { fine: true }));
      await assert.rejects(bus.request(subject, huge, { timeoutMs: 60_000 }), refusal);
      // A deadline far away: the error, not a timeout, ends the wait.
      await assert.rejects(bus.request(subject, { big: true }, { timeoutMs: 600_000 }), refusal);
      assert.deepEqual(await bus.request(subject, { big: false }, { timeoutMs: 60_000 }), { fine: true }, 'the responder still serves');
      await assert.rejects(bus.publish(subject, huge), refusal);
    });
  });
}
