/**
 * How a front tells a lost gateway replica from a slow one (gateway-calls.ts), on the in-process bus with a stand-in
 * replica that speaks the contract (accepts calls on their channel, heartbeats, serves its own subject): a replica
 * whose heartbeats stop but which still answers its probe keeps its call, which completes; a replica whose
 * connection is gone (nothing serves its subject) has its write answered at once with `GatewayLost` naming it, and
 * its read sent again to the replica that is left.
 */
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  anonymousPrincipal,
  createLogger,
  MemoryBus,
  PunkError,
  queues,
  subjects,
  type BusSubscription,
  type GatewayHeartbeat,
  type GatewayRequest,
} from '@punk/lib';
import { CallChannels } from '../call-channel.js';
import { GatewayCalls } from '../gateway-calls.js';

const log = createLogger('gateway-calls-test', 'silent');
const tenant = 'calls-test';

/** A stand-in gateway replica: `hold` ms per call, heartbeats until `silence()`, gone for good after `die()`. */
async function replica(bus: MemoryBus, instance: string, hold: number) {
  const ran: string[] = [];
  const beat = (): Promise<void> => bus.publish(subjects.gatewayHeartbeat, { instance } satisfies GatewayHeartbeat);
  await beat();
  const timer = setInterval(() => void beat(), 100);
  const subscriptions: BusSubscription[] = [
    await bus.serve(
      subjects.gatewayCall,
      async (data) => {
        const request = data as { name: string; channel: { front: string; callId: string } };
        await bus.publish(subjects.callOut(request.channel.front, request.channel.callId), { accepted: instance });
        ran.push(request.name);
        await new Promise((resolve) => setTimeout(resolve, hold));
        return { content: [{ type: 'text', text: `${request.name} on ${instance}` }] };
      },
      { queue: queues.gateway },
    ),
    await bus.serve(subjects.gatewayInstanceCall(instance), async () => ({ servers: [] })),
  ];
  return {
    ran,
    silence: () => clearInterval(timer),
    die: async () => {
      clearInterval(timer);
      for (const s of subscriptions) await s.unsubscribe();
    },
  };
}

function toolCall(name: string): GatewayRequest {
  return { method: 'tools/call', tenant, server: 'srv', principal: anonymousPrincipal(tenant), runId: randomUUID(), name };
}

async function front(bus: MemoryBus) {
  const channels = await CallChannels.start(bus, log);
  const calls = await GatewayCalls.start(bus, log, channels, tenant);
  return { calls, stop: async () => (await calls.stop(), await channels.stop()) };
}

const options = (what: string, retrySafe: boolean) => ({ callId: randomUUID(), clientCapabilities: {}, waitMs: 30_000, retrySafe, what });

describe('calls whose gateway replica goes quiet', () => {
  it('a replica that stops beating but answers its probe keeps its call, which completes', async () => {
    const bus = new MemoryBus(log);
    const { calls, stop } = await front(bus);
    const slow = await replica(bus, 'gw-slow', 2_000);
    try {
      const call = calls.call(toolCall('charge'), options('tools/call charge', false));
      await new Promise((resolve) => setTimeout(resolve, 50));
      slow.silence();
      assert.deepEqual(await call, { content: [{ type: 'text', text: 'charge on gw-slow' }] });
      assert.deepEqual(slow.ran, ['charge']);
    } finally {
      await slow.die();
      await stop();
    }
  });

  it('a replica that is gone: its write is answered GatewayLost naming it, its read runs again on the other replica', async () => {
    const bus = new MemoryBus(log);
    const { calls, stop } = await front(bus);
    const doomed = await replica(bus, 'gw-doomed', 60_000);
    try {
      const write = calls.call(toolCall('charge'), options('tools/call charge', false));
      const read = calls.call(toolCall('read'), options('tools/call read', true));
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(doomed.ran.sort(), ['charge', 'read'], 'both calls reached the doomed replica');
      await doomed.die();
      const survivor = await replica(bus, 'gw-survivor', 10);
      try {
        await assert.rejects(write, (error: unknown) => {
          assert.ok(error instanceof PunkError && error.code === 'GatewayLost', String(error));
          assert.match(error.message, /gateway replica gw-doomed was lost .* tools\/call charge; the call may have reached the upstream/);
          return true;
        });
        assert.deepEqual(await read, { content: [{ type: 'text', text: 'read on gw-survivor' }] });
        assert.deepEqual(survivor.ran, ['read'], 'only the read ran again');
      } finally {
        await survivor.die();
      }
    } finally {
      await stop();
    }
  });
});
