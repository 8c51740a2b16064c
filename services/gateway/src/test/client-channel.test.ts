/**
 * The gateway's end of a call's channel on the in-process bus: an upstream's
 * request reaches the call's subject, the client's answer from the call's own
 * session resolves it, another session's answer is refused, and the bounds
 * on pending requests (count and time) turn into errors for the upstream; a cancellation aborts its call, even one
 * that came before the call did.
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/client';
import { createLogger, MemoryBus, PunkError, sendClientAnswer, subjects } from '@punk/lib';
import { busClientLink, CallCancellations, PendingRequests } from '../client-channel.js';

const log = createLogger('client-channel-test', 'silent');

/** A link for a fresh call of `sessionId`, and the messages published on the call's subject. */
async function linkOn(
  bus: MemoryBus,
  pending: PendingRequests,
  sessionId: string,
  clientCapabilities: Record<string, unknown> = { elicitation: {} },
) {
  const callId = randomUUID();
  const published: Record<string, unknown>[] = [];
  await bus.subscribe(
    subjects.callOut('front-test', callId),
    (data) => void published.push((data as { message: Record<string, unknown> }).message),
  );
  return { link: busClientLink({ bus, log, pending }, sessionId, { callId, front: 'front-test', clientCapabilities }), published };
}

async function until<T>(read: () => T | undefined): Promise<T> {
  for (let i = 0; i < 100; i++) {
    const value = read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('nothing arrived');
}

describe('a call channel to the client', () => {
  it('relays an elicitation and resolves with the answer of the same session; another session is refused', async () => {
    const bus = new MemoryBus(log);
    const pending = new PendingRequests({ maxPending: 10, timeoutMs: 5_000 });
    const { link, published } = await linkOn(bus, pending, 'session-a');
    assert.equal(link.supports('elicitation/create'), true);
    assert.equal(link.supports('sampling/createMessage'), false, 'the client declared elicitation only');
    const result = link.request('elicitation/create', { message: 'Name?', requestedSchema: { type: 'object', properties: {} } });
    const sent = await until(() => published[0]);
    assert.equal(sent['method'], 'elicitation/create');
    const id = String(sent['id']);
    await assert.rejects(
      sendClientAnswer(bus, id, { sessionId: 'session-b', response: { jsonrpc: '2.0', id, result: { action: 'cancel' } } }),
      (error: unknown) => {
        assert.ok(error instanceof PunkError && error.code === 'SessionMismatch');
        return true;
      },
    );
    await sendClientAnswer(bus, id, {
      sessionId: 'session-a',
      response: { jsonrpc: '2.0', id, result: { action: 'accept', content: { name: 'Ada' } } },
    });
    assert.deepEqual(await result, { action: 'accept', content: { name: 'Ada' } });
    assert.equal(pending.size, 0, 'the slot is given back');
    await assert.rejects(
      sendClientAnswer(bus, id, { sessionId: 'session-a', response: { jsonrpc: '2.0', id, result: {} } }),
      (error: unknown) => {
        assert.ok(error instanceof PunkError && error.code === 'BusNoResponders', 'nobody waits for an answered request');
        return true;
      },
    );
    await bus.close();
  });

  it('a client error reaches the upstream as that JSON-RPC error', async () => {
    const bus = new MemoryBus(log);
    const { link, published } = await linkOn(bus, new PendingRequests(), 'session-a');
    const result = link.request('elicitation/create', { message: 'Name?' });
    const id = String((await until(() => published[0]))['id']);
    await sendClientAnswer(bus, id, {
      sessionId: 'session-a',
      response: { jsonrpc: '2.0', id, error: { code: -32600, message: 'user closed the dialog' } },
    });
    await assert.rejects(
      result,
      (error: unknown) => error instanceof ProtocolError && error.code === -32600 && /user closed the dialog/.test(error.message),
    );
    await bus.close();
  });

  it('past the time bound the upstream gets an error, and past the count bound nothing is sent', async () => {
    const bus = new MemoryBus(log);
    const pending = new PendingRequests({ maxPending: 1, timeoutMs: 100 });
    const first = await linkOn(bus, pending, 'session-a');
    const waiting = first.link.request('elicitation/create', { message: 'Name?' });
    const second = await linkOn(bus, pending, 'session-b');
    await assert.rejects(second.link.request('elicitation/create', { message: 'Name?' }), /holds 1 requests waiting/);
    assert.equal(second.published.length, 0, 'the refused request never reached the client');
    await assert.rejects(waiting, /did not answer elicitation\/create within 100 ms/);
    assert.equal(pending.size, 0);
    await bus.close();
  });

  it('a cancellation aborts its call, also when it came before the call was watched; another call is untouched', async () => {
    const bus = new MemoryBus(log);
    const cancellations = await CallCancellations.start(bus, log);
    const [running, early, other] = [randomUUID(), randomUUID(), randomUUID()];
    const watched = cancellations.watch(running);
    await bus.publish(subjects.callCancel(running), { reason: 'the client sent notifications/cancelled' });
    await bus.publish(subjects.callCancel(early), { reason: 'overtook its call' });
    await until(() => (watched.signal.aborted ? true : undefined));
    assert.equal(watched.signal.reason, 'the client sent notifications/cancelled');
    // The call whose cancellation overtook it starts cancelled; one never cancelled does not.
    const late = cancellations.watch(early);
    assert.equal(late.signal.aborted, true);
    assert.equal(late.signal.reason, 'overtook its call');
    assert.equal(cancellations.watch(other).signal.aborted, false);
    // A cancellation is used once: the same call id watched again (a new call) is not cancelled.
    assert.equal(cancellations.watch(early).signal.aborted, false);
    await cancellations.stop();
    await bus.close();
  });
});
