/**
 * An approval is spent by a call that reaches its upstream, on the real `punk up` (PGlite, in-process bus) and on
 * `punk cluster` (two gateways, governance and the ledgers as processes over a nats-server and a scratch Postgres
 * database of the test's own), authentication off, with the `tally` server, whose `charge` a rule makes
 * `approval_required`, and a bound of one call in flight per gateway whose queue gives up after 1 s. With SDK clients of
 * both eras: an approved `charge` that times out in the queue behind a slow call, or meets its server dead, did not
 * run, and its approval stays approved (`approval.released` on the ledger); the retry then runs exactly once, and the
 * next call needs a new approval. Six simultaneous retries of an approved call still run it once.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ProtocolError, type Client } from '@modelcontextprotocol/client';
import { connectClient, textOf, type Era } from './clients.js';
import { scratchDatabase, tallySetup, type TallySetup } from './distributed.js';
import { eventually, removeDir, startPunk, verifyLedger, type RunningPunk } from './harness.js';
import { startOwnNats, type OwnNats } from './nats-server.js';

let setup: TallySetup;
let punk: RunningPunk;

/** Starts `punk <command>` on the tally manifest and the rule making its `charge` `approval_required`. */
async function start(command: 'up' | 'cluster', env: Record<string, string>): Promise<void> {
  setup = await tallySetup();
  await writeFile(
    join(setup.manifestDir, 'charges.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpPolicy
metadata: { name: charges, namespace: ${setup.tenant} }
spec:
  rules:
    - name: a-person-confirms
      servers: [tally]
      tools: [charge]
      decision: approval_required
      reason: a person confirms each charge
`,
  );
  punk = await startPunk({
    manifestDir: setup.manifestDir,
    command,
    env: {
      PUNK_TENANT: setup.tenant,
      PUNK_UPSTREAM_MAX_CONCURRENT_CALLS: '1',
      PUNK_UPSTREAM_MAX_QUEUED_CALLS: '16',
      PUNK_UPSTREAM_QUEUE_TIMEOUT_MS: '1000',
      ...env,
    },
    timeoutMs: 180_000,
  });
}

async function stop(): Promise<void> {
  await punk?.stop();
  await setup?.killServers();
  if (setup) await removeDir(setup.manifestDir);
}

interface ApprovalState {
  state: string;
  consumedRunId?: string;
}

async function approvalOf(id: string): Promise<ApprovalState> {
  const response = await fetch(`${punk.baseUrl}/api/v1/approvals/${id}`);
  assert.equal(response.status, 200, await response.clone().text());
  return ((await response.json()) as { approval: ApprovalState }).approval;
}

/** The processes (pids) in which `tool` started in the tally server, one per start, in order. */
async function starts(tool: 'charge' | 'read_slowly'): Promise<string[]> {
  return (await setup.lines()).filter((line) => line.startsWith(`${tool} start `)).map((line) => line.split(' ')[2]!);
}
const charges = async () => (await starts('charge')).length;

/**
 * Holds the one slot of every gateway with slow reads (each gateway runs its own tally process): reads are sent until
 * `gateways` processes run one. A read sent to a gateway already held waits in its queue and is refused after 1 s.
 */
async function holdSlots(client: Client, gateways: number): Promise<Promise<unknown>[]> {
  const before = (await starts('read_slowly')).length;
  const held: Promise<unknown>[] = [];
  const running = async () => new Set((await starts('read_slowly')).slice(before)).size;
  while ((await running()) < gateways) {
    assert.ok(held.length < 40, 'the slow reads reached every gateway');
    held.push(client.callTool({ name: 'tally__read_slowly', arguments: { ms: 6_000 } }).catch((error: unknown) => error));
    // Sent to a free gateway, it starts within a second; else it waits in a held gateway's queue and another is sent.
    await eventually(async () => ((await running()) >= Math.min(held.length, gateways) ? true : undefined), 1_000);
  }
  return held;
}

/** Calls `charge` with `args`: refused naming a pending approval, which the API then approves; resolves with its id. */
async function approvedCharge(client: Client, args: { ms: number }): Promise<string> {
  const refused = await client.callTool({ name: 'tally__charge', arguments: args });
  assert.equal(refused.isError, true);
  const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
  assert.ok(id, textOf(refused));
  const approved = await fetch(`${punk.baseUrl}/api/v1/approvals/${id}/approve`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ reason: 'a test charge' }),
  });
  assert.equal(approved.status, 200, await approved.clone().text());
  return id;
}

/** The retry of an approved call that did not run: it runs once, with the approval, and the next call needs another. */
async function runsOnce(client: Client, args: { ms: number }, id: string, before: number): Promise<void> {
  const ran = await client.callTool({ name: 'tally__charge', arguments: args });
  assert.notEqual(ran.isError, true, textOf(ran));
  assert.match(textOf(ran), /charge took/);
  assert.equal(await charges(), before + 1, 'the approved call ran once');
  const used = await approvalOf(id);
  assert.equal(used.state, 'consumed');
  const again = await client.callTool({ name: 'tally__charge', arguments: args });
  assert.equal(again.isError, true, 'the approval was used once');
  assert.doesNotMatch(textOf(again), new RegExp(id));
  assert.equal(await charges(), before + 1);
  // The ledger holds the release in the run that did not reach the server, the use in the one that did (each run's
  // events may reach the ledger in any order across the cluster's ledgers: wait for all of them).
  const mine = (types: string[], events: RunEvent[] | undefined) =>
    types.every((type) => events?.some((e) => e.type === type && (!type.startsWith('approval.') || e.data['approvalId'] === id)));
  const released = await eventually(async () => {
    const url = `${punk.baseUrl}/api/v1/runs?tenant=${setup.tenant}&type=approval.released&limit=100`;
    const { runs } = (await (await fetch(url)).json()) as { runs: Array<{ runId: string }> };
    for (const { runId } of runs) {
      const events = await eventsOf(runId);
      if (mine(['approval.consumed', 'approval.released', 'tool.completed'], events)) return events;
    }
    return undefined;
  }, 30_000);
  assert.ok(released, 'a run holds the approval.consumed and approval.released of the call that did not run');
  const run = await eventually(async () => {
    const events = await eventsOf(used.consumedRunId!);
    return mine(['approval.consumed', 'tool.called', 'tool.completed'], events) ? events : undefined;
  }, 30_000);
  assert.ok(run, 'the run of the approved call is on the ledger, its approval consumed');
  assert.equal(run.find((e) => e.type === 'tool.called')?.data['approvalId'], id);
  assert.ok(!run.some((e) => e.type === 'approval.released'));
}

interface RunEvent {
  type: string;
  data: Record<string, unknown>;
}

/** The events of run `runId` on the ledger, or undefined while it has none. */
async function eventsOf(runId: string): Promise<RunEvent[] | undefined> {
  const response = await fetch(`${punk.baseUrl}/api/v1/runs/${runId}?tenant=${setup.tenant}`);
  if (response.status !== 200) return undefined;
  return ((await response.json()) as { events: RunEvent[] }).events;
}

const modes = {
  up: { gateways: 1, setUp: async () => start('up', {}), tearDown: stop },
  cluster: (() => {
    let nats: OwnNats | undefined;
    let db: { url: string; drop(): Promise<void> } | undefined;
    return {
      gateways: 2,
      setUp: async () => {
        nats = await startOwnNats();
        db = await scratchDatabase();
        await start('cluster', { PUNK_NATS_URL: nats.url, PUNK_DATABASE_URL: db.url });
      },
      tearDown: async () => {
        await stop();
        await nats?.stop();
        await db?.drop();
      },
    };
  })(),
};

for (const [mode, { gateways, setUp, tearDown }] of Object.entries(modes)) {
  describe(`punk ${mode}`, () => {
    before(setUp);
    after(tearDown);
    for (const era of ['2025-11-25', '2026-07-28'] as const satisfies readonly Era[]) {
      defineEra(era, gateways);
    }
    test('the ledger verifies', async () => {
      assert.equal((await verifyLedger(punk.baseUrl)).ok, true);
    });
  });
}

/** The tests of one era's clients. */
function defineEra(era: Era, gateways: number): void {
  describe(`an approved call that did not reach its server keeps its approval (${era})`, () => {
    const ms = era === '2025-11-25' ? 1 : 2;

    test('timed out in the queue behind a slow call: the approval stays approved, the retry runs once', async () => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era);
      try {
        const args = { ms };
        const id = await approvedCharge(client, args);
        const before = await charges();
        // Slow reads hold the one slot of each gateway; the approved charge waits behind one, past the queue's 1 s.
        const held = await holdSlots(client, gateways);
        await assert.rejects(client.callTool({ name: 'tally__charge', arguments: args }), (error: unknown) => {
          assert.ok(error instanceof ProtocolError, String(error));
          assert.equal(error.code, -32000);
          assert.match(error.message, /is busy on this gateway replica/);
          return true;
        });
        assert.equal(await charges(), before, 'the charge did not run');
        const kept = await approvalOf(id);
        assert.equal(kept.state, 'approved', 'the approval is still usable');
        assert.equal(kept.consumedRunId, undefined);
        await Promise.all(held);
        await runsOnce(client, args, id, before);
      } finally {
        await client.close();
      }
    });

    test('six simultaneous retries of an approved call run it once; the others ask for approvals of their own', async () => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era);
      try {
        const args = { ms: ms + 20 };
        const id = await approvedCharge(client, args);
        const before = await charges();
        const results = await Promise.all(Array.from({ length: 6 }, () => client.callTool({ name: 'tally__charge', arguments: args })));
        const ran = results.filter((result) => result.isError !== true);
        assert.equal(ran.length, 1, results.map((result) => textOf(result)).join('\n'));
        assert.equal(await charges(), before + 1, 'the approved call ran once');
        for (const refused of results.filter((result) => result.isError === true)) {
          assert.match(textOf(refused), /approval [0-9a-f-]{36} is pending/);
          assert.doesNotMatch(textOf(refused), new RegExp(id));
        }
        assert.equal((await approvalOf(id)).state, 'consumed');
      } finally {
        await client.close();
      }
    });

    test('its server dead: the approval stays approved, and the call runs once the server is back', async () => {
      const client = await connectClient(`${punk.baseUrl}/mcp`, era);
      try {
        const args = { ms: ms + 10 };
        const id = await approvedCharge(client, args);
        const before = await charges();
        // The tally process is killed; the call lands before the gateway's restart (1 s after the exit).
        await setup.killServers();
        const server = async () =>
          ((await (await fetch(`${punk.baseUrl}/api/v1/mcp/servers/tally`)).json()) as { server?: { state?: string } }).server?.state;
        assert.ok(await eventually(async () => ((await server()) !== 'ready' ? true : undefined), 10_000), 'the server is down');
        const failed = await client.callTool({ name: 'tally__charge', arguments: args }).catch((error: unknown) => error);
        assert.ok(
          failed instanceof ProtocolError || (failed as { isError?: boolean }).isError === true,
          `the call to a dead server failed: ${JSON.stringify(failed)}`,
        );
        assert.equal(await charges(), before, 'the charge did not run');
        assert.equal((await approvalOf(id)).state, 'approved');
        assert.ok(await eventually(async () => ((await server()) === 'ready' ? true : undefined), 30_000), 'the server is back');
        await runsOnce(client, args, id, before);
      } finally {
        await client.close();
      }
    });
  });
}
