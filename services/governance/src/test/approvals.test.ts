/**
 * Approval requests in Postgres, through two governance replicas on one database and one NATS (this test's own
 * nats-server): concurrent claims of one approved request consume it exactly once; a request past its expiry is
 * `expired` (on the ledger, its request holding the call's arguments) and cannot be decided; who may decide follows the rule's approvers and allowSelf.
 * A change is on the ledger before it commits: with the ledger's stream gone, an approved request stays approved
 * (never consumed without its event); a consumed one given back by the call that used it is approved again.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import {
  approvalClaimReplySchema,
  createLogger,
  ledgerEventSchema,
  NatsBus,
  PunkError,
  requestApproval,
  streams,
  subjects,
  type ApprovalRequest,
  type ApprovalView,
  WORKFLOW_ENGINE_SUBJECT,
} from '@punk/lib';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';
import { startPrivateNats, type PrivateNats } from '../../../lib/dist/test/natstest.js';
import { startGovernance, type GovernanceService } from '../index.js';

const log = createLogger('approvals-store-test', 'silent');
const tenant = `approvals-${randomUUID().slice(0, 8)}`;
const principal = { subject: 'alice', tenant, groups: ['dev'] };
const approvers = { subjects: ['bob'], groups: ['oncall'] };

function claimOf(overrides: Partial<Extract<ApprovalRequest, { op: 'claim' }>> = {}): Extract<ApprovalRequest, { op: 'claim' }> {
  return {
    op: 'claim',
    tenant,
    principal,
    server: 'memory',
    tool: 'delete_entities',
    argumentsDigest: 'a'.repeat(64),
    rule: 'test/deletions',
    generation: 3,
    approval: { approvers, allowSelf: false, timeoutMs: 60_000, waitMs: 0 },
    runId: randomUUID(),
    ...overrides,
  };
}

describe('approval requests on two governance replicas', () => {
  let nats: PrivateNats;
  let database: ScratchDb;
  let buses: NatsBus[];
  let replicas: GovernanceService[];

  before(async () => {
    nats = await startPrivateNats();
    database = await openScratchDb(log);
    buses = await Promise.all([0, 1].map((i) => NatsBus.connect({ url: nats.url, name: `governance-${i}`, log })));
    await buses[0]!.ensureStream(streams.ledger);
    replicas = [];
    for (const bus of buses) replicas.push(await startGovernance({ bus, log, db: database.db }));
  });

  after(async () => {
    for (const replica of replicas ?? []) await replica.stop();
    for (const bus of buses ?? []) await bus.close();
    await database?.close();
    await nats?.stop();
  });

  const claim = async (request: Extract<ApprovalRequest, { op: 'claim' }>) =>
    approvalClaimReplySchema.parse(await requestApproval(buses[0]!, request));
  const decide = (subject: string, groups: string[], id: string, verdict: 'approve' | 'deny') =>
    requestApproval(buses[1]!, {
      op: 'decide',
      tenant,
      caller: { principal: { subject, tenant, groups }, admin: false, authOff: false },
      id,
      verdict,
    }) as Promise<{ approval: ApprovalView }>;

  it('who may decide: the named approvers, never the caller itself without allowSelf', async () => {
    const pending = await claim(claimOf());
    assert.equal(pending.approval.state, 'pending');
    assert.equal(pending.callerMayDecide, false, 'alice is not an approver');
    const again = await claim(claimOf());
    assert.equal(again.approval.id, pending.approval.id, 'the same call finds its pending request');
    // The API's answers say whether the caller may decide, by the same rule as decide.
    const callerOf = (subject: string, groups: string[]) => ({ principal: { subject, tenant, groups }, admin: false, authOff: false });
    const { approvals: seenByAlice } = (await requestApproval(buses[1]!, {
      op: 'list',
      tenant,
      caller: callerOf('alice', ['oncall']),
      filter: { state: 'pending' },
    })) as { approvals: ApprovalView[] };
    const own = seenByAlice.find((approval) => approval.id === pending.approval.id);
    assert.equal(own?.mayDecide, false);
    assert.match(own.decideRefusal ?? '', /alice made the call of approval .* and may not approve it/);
    const seenByDave = (await requestApproval(buses[0]!, {
      op: 'get',
      tenant,
      caller: callerOf('dave', ['oncall']),
      id: pending.approval.id,
    })) as { approval: ApprovalView };
    assert.equal(seenByDave.approval.mayDecide, true);
    assert.equal(seenByDave.approval.decideRefusal, undefined);
    for (const [subject, groups] of [
      ['alice', ['oncall']],
      ['carol', ['dev']],
    ] as const) {
      await assert.rejects(decide(subject, [...groups], pending.approval.id, 'approve'), (error: unknown) => {
        assert.ok(error instanceof PunkError);
        assert.equal(error.code, 'ApprovalForbidden');
        return true;
      });
    }
    const byGroup = await decide('dave', ['oncall'], pending.approval.id, 'deny');
    assert.equal(byGroup.approval.state, 'denied');
    assert.equal(byGroup.approval.mayDecide, false, 'a decided request is no one to decide');
    assert.equal(byGroup.approval.decidedBy, 'dave');
    await assert.rejects(decide('bob', [], pending.approval.id, 'approve'), /is denied, not pending/);
  });

  it('concurrent claims on two replicas consume one approval exactly once', async () => {
    const digest = 'b'.repeat(64);
    const pending = await claim(claimOf({ argumentsDigest: digest }));
    await decide('bob', [], pending.approval.id, 'approve');
    const replies = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        requestApproval(buses[i % 2]!, claimOf({ argumentsDigest: digest })).then((r) => approvalClaimReplySchema.parse(r)),
      ),
    );
    const consumed = replies.filter((r) => r.approval.state === 'consumed');
    assert.equal(consumed.length, 1, 'one call used the approval');
    assert.equal(consumed[0]!.approval.id, pending.approval.id);
    assert.ok(replies.filter((r) => r.approval.state === 'pending').every((r) => r.approval.id !== pending.approval.id));
  });

  it('the request of a workflow run is bound to the caller it acts for: a run of another caller does not use it', async () => {
    const forCaller = (subject: string) => ({
      subject: WORKFLOW_ENGINE_SUBJECT,
      tenant,
      groups: [],
      actingFor: { subject, groups: ['dev'] },
    });
    const digest = 'd'.repeat(64);
    // Given alice's run held on an approval that bob approves,
    const alices = await claim(claimOf({ argumentsDigest: digest, principal: forCaller('alice') }));
    assert.equal(alices.approval.principal.subject, `${WORKFLOW_ENGINE_SUBJECT} for alice`);
    await assert.rejects(decide('alice', ['oncall'], alices.approval.id, 'approve'), /alice made the call of approval/);
    await decide('bob', [], alices.approval.id, 'approve');
    // then carol's run with the same arguments gets a request of its own,
    const carols = await claim(claimOf({ argumentsDigest: digest, principal: forCaller('carol') }));
    assert.equal(carols.approval.state, 'pending');
    assert.notEqual(carols.approval.id, alices.approval.id);
    // and alice's next run uses hers.
    const again = await claim(claimOf({ argumentsDigest: digest, principal: forCaller('alice') }));
    assert.equal(again.approval.state, 'consumed');
    assert.equal(again.approval.id, alices.approval.id);
  });

  it('a request past its expiry is expired, on the ledger, and can no longer be decided', async () => {
    const pending = await claim(
      claimOf({
        argumentsDigest: 'c'.repeat(64),
        arguments: { entityNames: ['old'] },
        approval: { approvers, allowSelf: false, timeoutMs: 1, waitMs: 0 },
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    await assert.rejects(decide('bob', [], pending.approval.id, 'approve'), /is expired, not pending/);
    const events = (await buses[0]!.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 })).map(
      (m) => ledgerEventSchema.parse(m.data),
    );
    const mine = events.filter((e) => e.data['approvalId'] === pending.approval.id).map((e) => e.type);
    assert.deepEqual(mine, ['approval.requested', 'approval.expired']);
    const requested = events.find((e) => e.data['approvalId'] === pending.approval.id && e.type === 'approval.requested');
    assert.deepEqual(requested?.data['arguments'], { entityNames: ['old'] }, 'approvers see the arguments they decide on');
    assert.ok(events.every((e) => e.source === 'governance' || e.tenant !== tenant));
  });

  /** The governance events of approval `id` on the ledger's stream, as `[type, runId]`. */
  const eventsOf = async (id: string) =>
    (await buses[0]!.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 }))
      .map((m) => ledgerEventSchema.parse(m.data))
      .filter((e) => e.data['approvalId'] === id)
      .map((e) => [e.type, e.runId]);
  const stateOf = async (id: string) =>
    (await database.db.query('SELECT state, consumed_run_id FROM governance.approvals WHERE id = $1', [id])).rows[0];

  it('an approval is consumed together with its ledger event: when the append fails, it stays approved', async () => {
    const digest = 'e'.repeat(64);
    const pending = await claim(claimOf({ argumentsDigest: digest }));
    await decide('bob', [], pending.approval.id, 'approve');
    // Given the ledger's stream gone (no JetStream stream captures punk.ledger.events any more),
    const nc = await connect({ servers: nats.url });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(streams.ledger.name);
    try {
      // when the approved call claims its approval, the claim fails on the append,
      await assert.rejects(claim(claimOf({ argumentsDigest: digest })), (error: unknown) => {
        assert.ok(error instanceof PunkError, String(error));
        assert.equal(error.code, 'BusStreamNotFound');
        return true;
      });
      // and the approval is not consumed: its state commits only with its event.
      assert.deepEqual(await stateOf(pending.approval.id), { state: 'approved', consumed_run_id: null });
    } finally {
      await buses[0]!.ensureStream(streams.ledger);
      await nc.close();
    }
    // Once the stream is back, the same call consumes it, and the ledger holds that.
    const runId = randomUUID();
    const used = await claim(claimOf({ argumentsDigest: digest, runId }));
    assert.equal(used.approval.state, 'consumed');
    assert.deepEqual(await stateOf(pending.approval.id), { state: 'consumed', consumed_run_id: runId });
    assert.deepEqual(await eventsOf(pending.approval.id), [['approval.consumed', runId]]);
  });

  it('a call that did not reach its upstream gives its approval back: approved again, on the ledger, for one next call', async () => {
    const digest = 'f'.repeat(64);
    const pending = await claim(claimOf({ argumentsDigest: digest }));
    await decide('bob', [], pending.approval.id, 'approve');
    const failed = randomUUID();
    assert.equal((await claim(claimOf({ argumentsDigest: digest, runId: failed }))).approval.state, 'consumed');
    const release = (runId: string) =>
      requestApproval(buses[1]!, { op: 'release', tenant, id: pending.approval.id, runId }) as Promise<{ approval: ApprovalView }>;
    // Only the run that consumed it gives it back.
    const stranger = randomUUID();
    await assert.rejects(release(stranger), (error: unknown) => {
      assert.ok(error instanceof PunkError, String(error));
      assert.equal(error.code, 'ApprovalNotConsumed');
      assert.equal(
        error.message,
        `approval ${pending.approval.id} is consumed (used by run ${failed}), not consumed by run ${stranger}: it cannot be released`,
      );
      return true;
    });
    const released = await release(failed);
    assert.equal(released.approval.state, 'approved');
    assert.equal(released.approval.consumedRunId, undefined);
    // The next call uses it, once.
    const next = randomUUID();
    assert.equal((await claim(claimOf({ argumentsDigest: digest, runId: next }))).approval.id, pending.approval.id);
    const another = await claim(claimOf({ argumentsDigest: digest }));
    assert.equal(another.approval.state, 'pending');
    assert.notEqual(another.approval.id, pending.approval.id);
    await assert.rejects(release(failed), /is consumed \(used by run .*\), not consumed by run/);
    const events = await eventsOf(pending.approval.id);
    assert.deepEqual(events.slice(2), [
      ['approval.consumed', failed],
      ['approval.released', failed],
      ['approval.consumed', next],
    ]);
  });
});
