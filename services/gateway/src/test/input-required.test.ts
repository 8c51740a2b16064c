/**
 * Upstream requests bridged to a 2026-07-28 client as input_required results,
 * on the in-process bus: the call's first outcome is the input_required, the
 * answer's reply is the call's next outcome, another caller is refused, and a
 * request the client never answers expires under the pending bounds.
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { createLogger, MemoryBus, PunkError, sendInputResponse, type Principal } from '@punk/lib';
import { PendingRequests, type ClientLink } from '../client-channel.js';
import { runWithInputRequired, type GatewayInputRequired } from '../input-required.js';

const log = createLogger('input-required-test', 'silent');
const caller: Principal = { tenant: 'acme', subject: 'ada', groups: [] };
const channel = () => ({ callId: randomUUID(), front: 'front-test', clientCapabilities: { elicitation: {} }, era: '2026' as const });

/** A call that asks the client for a name `rounds` times, then says hello to every answer. */
function asking(rounds: number, seen: unknown[]) {
  return async (link: ClientLink): Promise<Record<string, unknown>> => {
    const names: string[] = [];
    for (let i = 0; i < rounds; i++) {
      try {
        const answer = await link.request('elicitation/create', { message: `Name ${i}?` });
        names.push(String((answer['content'] as { name: string }).name));
      } catch (error) {
        seen.push(error);
        return { content: [{ type: 'text', text: `failed: ${(error as Error).message}` }], isError: true };
      }
    }
    return { content: [{ type: 'text', text: `Hello ${names.join(' and ')}` }] };
  };
}

const keyOf = (outcome: Record<string, unknown>) => Object.keys((outcome as unknown as GatewayInputRequired).inputRequests)[0]!;
const accept = (name: string) => ({ action: 'accept', content: { name } });

describe('input_required for a 2026-07-28 client', () => {
  it('answers input_required at once, and each answer with the next outcome, up to the final result', async () => {
    const bus = new MemoryBus(log);
    const pending = new PendingRequests({ maxPending: 10, timeoutMs: 5_000 });
    const first = await runWithInputRequired({ bus, log, pending }, channel(), caller, asking(2, []));
    assert.equal(first['resultType'], 'input_required');
    const id1 = keyOf(first);
    assert.deepEqual((first as unknown as GatewayInputRequired).inputRequests[id1], {
      method: 'elicitation/create',
      params: { message: 'Name 0?' },
    });
    await assert.rejects(
      sendInputResponse(
        bus,
        id1,
        { caller: { tenant: 'acme', subject: 'mallory' }, response: { jsonrpc: '2.0', id: id1, result: accept('Mallory') } },
        5_000,
      ),
      (error: unknown) => error instanceof PunkError && error.code === 'CallerMismatch',
    );
    const second = (await sendInputResponse(
      bus,
      id1,
      { caller: { tenant: 'acme', subject: 'ada' }, response: { jsonrpc: '2.0', id: id1, result: accept('Ada') } },
      5_000,
    )) as Record<string, unknown>;
    assert.equal(second['resultType'], 'input_required', 'the upstream asked again');
    const id2 = keyOf(second);
    assert.notEqual(id2, id1);
    const done = await sendInputResponse(
      bus,
      id2,
      { caller: { tenant: 'acme', subject: 'ada' }, response: { jsonrpc: '2.0', id: id2, result: accept('Grace') } },
      5_000,
    );
    assert.deepEqual(done, { content: [{ type: 'text', text: 'Hello Ada and Grace' }] });
    assert.equal(pending.size, 0);
    await assert.rejects(
      sendInputResponse(
        bus,
        id1,
        { caller: { tenant: 'acme', subject: 'ada' }, response: { jsonrpc: '2.0', id: id1, result: accept('Ada') } },
        5_000,
      ),
      (error: unknown) => error instanceof PunkError && error.code === 'BusNoResponders',
    );
    await bus.close();
  });

  it('a call that asks nothing answers with its result; one the client never retries gives the upstream an error at the time bound', async () => {
    const bus = new MemoryBus(log);
    const pending = new PendingRequests({ maxPending: 10, timeoutMs: 100 });
    assert.deepEqual(await runWithInputRequired({ bus, log, pending }, channel(), caller, asking(0, [])), {
      content: [{ type: 'text', text: 'Hello ' }],
    });
    const seen: unknown[] = [];
    const first = await runWithInputRequired({ bus, log, pending }, channel(), caller, asking(1, seen));
    assert.equal(first['resultType'], 'input_required');
    assert.equal(pending.size, 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.match(String((seen[0] as Error)?.message), /did not retry with an answer to elicitation\/create within 100 ms/);
    assert.equal(pending.size, 0, 'the slot is given back');
    await bus.close();
  });
});
