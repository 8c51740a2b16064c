import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import {
  anonymousPrincipal,
  classify,
  createLogger,
  defaultPolicy,
  evaluatePolicy,
  heuristicToolLevel,
  MemoryBus,
  PunkError,
  requestDecision,
  splitWords,
  streams,
  subjects,
  type GovernanceCheck,
  type LedgerEvent,
  type StreamMessage,
} from '@punk/lib';
import { startGovernance } from '../index.js';

test('tool names split into words across naming styles', () => {
  assert.deepEqual(splitWords('deleteFile'), ['delete', 'file']);
  assert.deepEqual(splitWords('get_HTTPStatus'), ['get', 'http', 'status']);
  assert.deepEqual(splitWords('repo.issues-list'), ['repo', 'issues', 'list']);
});

test('tool names are classified by their most severe verb', () => {
  const table: [string, number][] = [
    ['delete_file', 4],
    ['removeUser', 4],
    ['drop-table', 4],
    ['purge.cache', 4],
    ['pay_invoice', 4],
    ['refundOrder', 4],
    ['transfer_funds', 4],
    ['get_and_delete', 4],
    ['send_email', 3],
    ['createIssue', 3],
    ['write_file', 3],
    ['update-record', 3],
    ['move_file', 3],
    ['run_query', 3],
    ['get_weather', 1],
    ['list_files', 1],
    ['read_text_file', 1],
    ['open_pull_request', 3],
    ['search', 1],
    ['echo', 1],
    ['lookupUser', 1],
    ['status', 1],
    ['frobnicate', 3],
    ['get-sum', 1],
    // Found by a fresh-user trial served without an approval: destroy verbs, and write verbs with what they act on.
    ['format_disk', 4],
    ['rm_rf', 4],
    ['overwrite_file', 4],
    ['revoke_token', 4],
    ['send_money', 4],
    ['run_shell', 4],
    ['execute_sql', 4],
    ['resetPassword', 4],
    ['send_message', 3],
    ['run_tests', 3],
    ['set_title', 3],
    ['format_date', 3],
  ];
  for (const [name, level] of table) assert.equal(heuristicToolLevel(name), level, name);
});

test('declared levels win; resources are reads and prompts level 0', () => {
  assert.deepEqual(classify({ kind: 'tool', server: 'fs', target: 'delete_file', declaredLevel: 1 }), {
    level: 1,
    levelSource: 'declared',
    action: 'read:fs/delete_file',
  });
  assert.deepEqual(classify({ kind: 'tool', server: 'fs', target: 'write_file' }), {
    level: 3,
    levelSource: 'heuristic',
    action: 'write:fs/write_file',
  });
  assert.deepEqual(classify({ kind: 'tool', server: 'bank', target: 'pay' }), {
    level: 4,
    levelSource: 'heuristic',
    action: 'destroy:bank/pay',
  });
  assert.deepEqual(classify({ kind: 'resource', server: 'fs', target: 'file:///a' }), {
    level: 1,
    levelSource: 'kind',
    action: 'read:fs/file:///a',
  });
  assert.deepEqual(classify({ kind: 'prompt', server: 'fs', target: 'greet' }), { level: 0, levelSource: 'kind', action: 'read:fs/greet' });
});

test('the default policy allows levels 0-3 and requires approval at level 4', () => {
  for (const level of [0, 1, 2, 3]) {
    assert.deepEqual(evaluatePolicy(defaultPolicy, { kind: 'tool', server: 's', target: 't', subject: 'u', level }).decision, 'allow');
  }
  const outcome = evaluatePolicy(defaultPolicy, { kind: 'tool', server: 's', target: 't', subject: 'u', level: 4 });
  assert.equal(outcome.decision, 'approval_required');
  assert.equal(outcome.rule, 'default/approval-for-level-4');
  assert.equal(evaluatePolicy([], { kind: 'tool', server: 's', target: 't', subject: 'u', level: 0 }).decision, 'deny');
});

test('governance answers checks over the bus and records each decision on the ledger first', async (t) => {
  const bus = new MemoryBus();
  await bus.ensureStream(streams.ledger);
  const log = createLogger('governance-test', 'silent');
  const governance = await startGovernance({ bus, log });
  const events: LedgerEvent[] = [];
  const consumer = await bus.consume(streams.ledger.name, `test-${randomUUID()}`, async (batch: StreamMessage[]) => {
    for (const m of batch) events.push(m.data as LedgerEvent);
  });
  t.after(async () => {
    await consumer.stop();
    await governance.stop();
    await bus.close();
  });
  const tenant = `t-${randomUUID().slice(0, 8)}`;
  const base: GovernanceCheck = {
    tenant,
    principal: anonymousPrincipal(tenant),
    server: 'fs',
    kind: 'tool',
    target: 'read_file',
    runId: 'run-1',
  };

  // Given a read-shaped tool, when the gateway asks, then it is allowed.
  const allowed = await requestDecision(bus, base);
  assert.equal(allowed.decision, 'allow');
  assert.equal(allowed.rule, 'default/allow-up-to-level-3');
  assert.equal(allowed.action, 'read:fs/read_file');

  // A delete-shaped tool needs approval, naming the rule.
  const destroy = await requestDecision(bus, { ...base, target: 'delete_file' });
  assert.equal(destroy.decision, 'approval_required');
  assert.equal(destroy.rule, 'default/approval-for-level-4');
  assert.equal(destroy.sideEffectLevel, 4);

  // A level declared in the manifest wins over the name.
  const declared = await requestDecision(bus, { ...base, target: 'delete_file', declaredLevel: 2 });
  assert.equal(declared.decision, 'allow');
  assert.equal(declared.levelSource, 'declared');
  assert.equal(declared.action, 'write:fs/delete_file');

  // A malformed check gets an error reply, and the service keeps answering.
  await assert.rejects(bus.request(subjects.governanceCheck, { tenant }, { timeoutMs: 2000 }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'InvalidMessage');
    assert.match(error.message, /principal/);
    return true;
  });
  const after = await requestDecision(bus, { ...base, kind: 'prompt', target: 'greet' });
  assert.equal(after.decision, 'allow');
  assert.equal(after.sideEffectLevel, 0);

  // The ledger holds one governance.decision per answered check, with the decision's id.
  await waitFor(() => events.length >= 4);
  assert.deepEqual(
    events.map((e) => e.id),
    [allowed.decisionId, destroy.decisionId, declared.decisionId, after.decisionId],
  );
  const recorded = events[1]!;
  assert.equal(recorded.type, 'governance.decision');
  assert.equal(recorded.source, 'governance');
  assert.equal(recorded.tenant, tenant);
  assert.deepEqual(recorded.data, {
    decision: 'approval_required',
    level: 4,
    levelSource: 'heuristic',
    action: 'destroy:fs/delete_file',
    rule: 'default/approval-for-level-4',
    reason: destroy.reason,
    kind: 'tool',
    target: 'delete_file',
    generation: 0,
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
