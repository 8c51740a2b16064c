/**
 * Approvals, end to end over real NATS (a nats-server of this test's own), two front replicas, two gateway replicas,
 * governance on Postgres, @modelcontextprotocol/server-everything, and API keys: a level-4 tool (declared in the
 * manifest) runs only with an approval bound to its exact call, decided in conversation by an approver calling it
 * (an SDK Client of each era with an elicitation handler) or through the API by a second principal while the call
 * waits; an approval is used once, by the same caller and arguments; unattended calls fail closed; the ledger holds
 * every approval event and verifies.
 */
import { strict as assert } from 'node:assert';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { destinationPolicyOf, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { startLedger, type Ledger } from '@punk/ledger';
import {
  approvalViewSchema,
  createLogger,
  ledgerEventSchema,
  requestGateway,
  streams,
  subjects,
  type Approval,
  type ApprovalView,
  type LedgerEvent,
} from '@punk/lib';
import { everything, startReplicaSet, type ReplicaSet } from './replica-harness.js';
import { APPROVAL_NOTE } from '../auth/list-filter.js';

const log = createLogger('approvals-test', 'silent');
const PUBLIC = 'https://punk.example.test';
const BOOTSTRAP = randomBytes(24).toString('base64url');
const SCOPE = 'mcp';

/**
 * `echo` is level 4 (declared): the default rule would ask admins; this policy names approvers. `get-sum` is decided
 * by its caller in conversation (allowSelf), `echo` by the group `approvers` while the call waits up to 60 s,
 * `get-tiny-image` by them with no wait (the call fails closed at once).
 */
const policies = {
  approvals: {
    rules: [
      {
        name: 'sums-by-the-caller',
        tools: ['get-sum'],
        decision: 'approval_required' as const,
        approval: { approvers: { groups: ['approvers'] }, allowSelf: true, timeout: '10m', wait: '0s' },
      },
      {
        name: 'echo-by-approvers',
        tools: ['echo'],
        decision: 'approval_required' as const,
        approval: { approvers: { groups: ['approvers'] }, allowSelf: false, timeout: '10m', wait: '60s' },
      },
      {
        name: 'annotated-short-wait',
        tools: ['get-annotated-message'],
        decision: 'approval_required' as const,
        approval: { approvers: { groups: ['approvers'] }, allowSelf: false, timeout: '10m', wait: '7s' },
      },
      {
        name: 'image-no-wait',
        tools: ['get-tiny-image'],
        decision: 'approval_required' as const,
        approval: { approvers: { groups: ['approvers'] }, allowSelf: false, timeout: '10m', wait: '0s' },
      },
    ],
  },
};

function api(base: string, token: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${base}/api/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

async function createKey(base: string, name: string, groups: string[]): Promise<{ key: string; id: string }> {
  const response = await api(base, BOOTSTRAP, 'POST', '/api-keys', { name, scopes: [SCOPE], groups });
  assert.equal(response.status, 201, await response.clone().text());
  return (await response.json()) as { key: string; id: string };
}

type Answer = { action: 'accept'; content: { decision: 'approve' | 'deny'; reason?: string } } | { action: 'decline' | 'cancel' };

/** A connected client of `era` that declares elicitation and answers each one with `answer` (recording what it was asked). */
async function connect(
  url: string,
  token: string,
  era: '2025' | '2026',
  answer: () => Answer = () => ({ action: 'cancel' }),
): Promise<{ client: Client; asked: string[] }> {
  const client = new Client(
    { name: 'approvals-test', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} } }, ...(era === '2026' && { versionNegotiation: { mode: { pin: '2026-07-28' } } }) },
  );
  const asked: string[] = [];
  client.setRequestHandler('elicitation/create', (request) => {
    asked.push(String((request.params as { message?: unknown }).message));
    return Promise.resolve(answer());
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return { client, asked };
}

function textOf(result: unknown): string {
  const content = (result as { content?: Array<{ text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

async function poll<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('approvals over two fronts and two gateways', () => {
  let replicas: ReplicaSet;
  let second: Gateway;
  let ledger: Ledger;
  let restarted: GovernanceService | undefined;
  let alice: string;
  let bob: string;
  let carol: string;
  let aliceId: string;
  let url: (base: string) => string;

  before(async () => {
    replicas = await startReplicaSet(log, {
      prefix: 'approvals',
      servers: (tenant) => [
        {
          ...everything('everything', tenant),
          spec: {
            ...everything('everything', tenant).spec,
            tools: { overrides: [{ name: 'echo', sideEffectLevel: 4 }] },
          },
        },
      ],
      policies,
      frontOptions: () => ({ auth: { publicUrl: PUBLIC, bootstrapAdminKey: BOOTSTRAP, requiredScopes: [SCOPE] } }),
    });
    second = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus: replicas.core,
      log,
      db: replicas.database.db,
      servers: [
        {
          ...everything('everything', replicas.tenant),
          spec: { ...everything('everything', replicas.tenant).spec, tools: { overrides: [{ name: 'echo', sideEffectLevel: 4 }] } },
        },
      ],
      workDir: replicas.workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
    });
    await second.ready();
    ledger = await startLedger({ bus: replicas.core, db: replicas.database.db, log });
    // alice calls and is an approver (she decides her own sums in conversation, never her own echo); bob approves; carol only calls.
    const a = await createKey(replicas.a.base, 'alice', ['approvers']);
    alice = a.key;
    aliceId = `api-key:${a.id}`;
    bob = (await createKey(replicas.a.base, 'bob', ['approvers'])).key;
    carol = (await createKey(replicas.a.base, 'carol', [])).key;
    url = (base) => `${base}/servers/${replicas.tenant}/everything/mcp`;
  });

  after(async () => {
    await second?.stop();
    await ledger?.stop();
    await restarted?.stop();
    await replicas?.stop();
  });

  it('a tool needing approval stays listed and says so', async () => {
    const { client } = await connect(url(replicas.a.base), carol, '2025');
    try {
      const { tools } = await client.listTools();
      const echo = tools.find((tool) => tool.name === 'echo');
      assert.ok(echo, 'echo is listed');
      assert.ok(echo.description?.endsWith(APPROVAL_NOTE), echo.description);
      assert.ok(!tools.find((tool) => tool.name === 'get-env')?.description?.includes(APPROVAL_NOTE));
    } finally {
      await client.close();
    }
  });

  for (const era of ['2025', '2026'] as const) {
    it(`era ${era}: the caller approves in conversation and the call runs; a denial or no answer fails closed`, async () => {
      let answer: Answer = { action: 'accept', content: { decision: 'approve', reason: `fine (${era})` } };
      const { client, asked } = await connect(url(replicas.b.base), alice, era, () => answer);
      try {
        const a = era === '2025' ? 2 : 3;
        const approved = await client.callTool({ name: 'get-sum', arguments: { a, b: 40 } });
        assert.equal(approved.isError, undefined, textOf(approved));
        assert.match(textOf(approved), new RegExp(`${a + 40}`));
        assert.equal(asked.length, 1);
        assert.match(asked[0]!, /tool get-sum on server everything/);
        assert.match(asked[0]!, new RegExp(`"a":${a}`));

        answer = { action: 'accept', content: { decision: 'deny', reason: 'not today' } };
        const denied = await client.callTool({ name: 'get-sum', arguments: { a, b: 41 } });
        assert.equal(denied.isError, true);
        assert.match(textOf(denied), /was denied by api-key:[0-9a-f]{16}: not today/);

        answer = { action: 'cancel' };
        const cancelled = await client.callTool({ name: 'get-sum', arguments: { a, b: 42 } });
        assert.equal(cancelled.isError, true);
        const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(cancelled))?.[1];
        assert.ok(id, textOf(cancelled));
        assert.match(textOf(cancelled), new RegExp(`POST /api/v1/approvals/${id}/approve`));
      } finally {
        await client.close();
      }
    });
  }

  it('a second principal approves through the API while the call waits; the approval is used once, by the same call', async () => {
    const { client } = await connect(url(replicas.a.base), alice, '2025');
    try {
      const message = `wait ${randomUUID()}`;
      const call = client.callTool({ name: 'echo', arguments: { message } }, { timeout: 90_000 });
      const pending = await poll('the pending request', async () => {
        const response = await api(
          replicas.b.base,
          bob,
          'GET',
          `/approvals?state=pending&tool=echo&subject=${encodeURIComponent(aliceId)}`,
        );
        assert.equal(response.status, 200);
        const { approvals } = (await response.json()) as { approvals: ApprovalView[] };
        return approvals.find((approval) => approval.runId !== '') ? approvalViewSchema.parse(approvals[0]) : undefined;
      });
      // The answers say who may decide: bob (an approver) may; alice, who made the call, is told why not.
      assert.equal(pending.mayDecide, true);
      const asAlice = (await (await api(replicas.b.base, alice, 'GET', `/approvals/${pending.id}`)).json()) as { approval: ApprovalView };
      assert.equal(asAlice.approval.mayDecide, false);
      assert.match(asAlice.approval.decideRefusal ?? '', /may not approve it/);
      // alice may not approve her own echo (allowSelf false): 403 naming why.
      const self = await api(replicas.b.base, alice, 'POST', `/approvals/${pending.id}/approve`, {});
      assert.equal(self.status, 403);
      assert.match(((await self.json()) as { error: { message: string } }).error.message, /may not approve it/);
      // carol is no approver.
      const other = await api(replicas.b.base, carol, 'POST', `/approvals/${pending.id}/approve`, {});
      assert.equal(other.status, 403);
      const approved = await api(replicas.b.base, bob, 'POST', `/approvals/${pending.id}/approve`, { reason: 'checked' });
      assert.equal(approved.status, 200, await approved.clone().text());
      const result = await call;
      assert.equal(textOf(result), `Echo: ${message}`);
      const consumed = (await (await api(replicas.a.base, bob, 'GET', `/approvals/${pending.id}`)).json()) as { approval: Approval };
      assert.equal(consumed.approval.state, 'consumed');
      assert.equal(consumed.approval.decidedBy?.startsWith('api-key:'), true);
      const again = await api(replicas.a.base, bob, 'POST', `/approvals/${pending.id}/approve`, {});
      assert.equal(again.status, 409);
    } finally {
      await client.close();
    }
  });

  it("nobody decides: the call waits its rule's wait, with progress notifications, then fails closed naming the approval", async () => {
    const { client } = await connect(url(replicas.b.base), carol, '2026');
    try {
      const progress: unknown[] = [];
      const result = await client.callTool(
        { name: 'get-annotated-message', arguments: { messageType: 'success' } },
        { timeout: 60_000, onprogress: (p) => progress.push(p) },
      );
      assert.equal(result.isError, true);
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(result))?.[1];
      assert.ok(id, textOf(result));
      assert.ok(progress.length >= 1, 'the waiting call sent progress');
      assert.match(JSON.stringify(progress[0]), new RegExp(`waiting for approval ${id}`));
    } finally {
      await client.close();
    }
  });

  it('governance restarts while a call waits; an approval after the restart lets the call run', async () => {
    const { client } = await connect(url(replicas.a.base), carol, '2025');
    try {
      const message = `restart ${randomUUID()}`;
      const call = client.callTool({ name: 'echo', arguments: { message } }, { timeout: 90_000 });
      const pending = await poll('the pending request', async () => {
        const response = await api(replicas.b.base, bob, 'GET', '/approvals?state=pending&tool=echo');
        const { approvals } = (await response.json()) as { approvals: Approval[] };
        return approvals.find((approval) => approval.principal.subject !== aliceId);
      });
      await replicas.governance.stop();
      restarted = await startGovernance({ bus: replicas.core, log, db: replicas.database.db });
      const approved = await api(replicas.b.base, bob, 'POST', `/approvals/${pending.id}/approve`);
      assert.equal(approved.status, 200, await approved.clone().text());
      assert.equal(textOf(await call), `Echo: ${message}`);
    } finally {
      await client.close();
    }
  });

  it('no wait: the call fails closed naming the approval; after approval the same call runs once, other arguments or callers do not', async () => {
    const { client } = await connect(url(replicas.a.base), alice, '2026');
    const { client: carolClient } = await connect(url(replicas.b.base), carol, '2025');
    try {
      const first = await client.callTool({ name: 'get-tiny-image', arguments: {} });
      assert.equal(first.isError, true);
      const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(first))?.[1];
      assert.ok(id, textOf(first));
      const approved = await api(replicas.b.base, bob, 'POST', `/approvals/${id}/approve`);
      assert.equal(approved.status, 200, await approved.clone().text());
      // Another caller with the same arguments is refused (a request of its own is made).
      const byCarol = await carolClient.callTool({ name: 'get-tiny-image', arguments: {} });
      assert.equal(byCarol.isError, true);
      assert.doesNotMatch(textOf(byCarol), new RegExp(id));
      // Other arguments are another call.
      const otherArgs = await client.callTool({ name: 'get-tiny-image', arguments: { extra: 1 } });
      assert.equal(otherArgs.isError, true);
      assert.doesNotMatch(textOf(otherArgs), new RegExp(id));
      const retried = await client.callTool({ name: 'get-tiny-image', arguments: {} });
      assert.equal(retried.isError, undefined, textOf(retried));
      const twice = await client.callTool({ name: 'get-tiny-image', arguments: {} });
      assert.equal(twice.isError, true, 'an approval is used once');
    } finally {
      await client.close();
      await carolClient.close();
    }
  });

  it('an unattended call (no client channel) fails closed unless its exact call is approved; bad API input is named', async () => {
    const principal = { subject: 'robot', tenant: replicas.tenant, groups: [] };
    const call = () =>
      requestGateway(
        replicas.core,
        {
          method: 'tools/call',
          tenant: replicas.tenant,
          server: 'everything',
          principal,
          runId: randomUUID(),
          name: 'echo',
          arguments: { message: 'cron' },
        },
        30_000,
      ) as Promise<Record<string, unknown>>;
    const refused = await call();
    assert.equal(refused['isError'], true);
    const id = /approval ([0-9a-f-]{36}) is pending/.exec(textOf(refused))?.[1];
    assert.ok(id, textOf(refused));
    assert.equal((await api(replicas.a.base, bob, 'POST', `/approvals/${id}/approve`)).status, 200);
    assert.equal(textOf(await call()), 'Echo: cron');

    const unknown = await api(replicas.a.base, bob, 'GET', '/approvals?staet=pending');
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as { error: { message: string } }).error.message, /unknown query parameter "staet"/);
    // A route without parameters says so, instead of an empty list of accepted ones.
    const noParameters = await api(replicas.a.base, bob, 'GET', `/approvals/${id}?x=1`);
    assert.equal(noParameters.status, 400);
    assert.equal(
      ((await noParameters.json()) as { error: { message: string } }).error.message,
      `unknown query parameter "x" of /api/v1/approvals/${id}; it accepts no query parameters`,
    );
    const onDecision = await api(replicas.a.base, bob, 'POST', `/approvals/${id}/deny?force=1`);
    assert.equal(onDecision.status, 400);
    assert.match(((await onDecision.json()) as { error: { message: string } }).error.message, /unknown query parameter "force"/);
    const badState = await api(replicas.a.base, bob, 'GET', '/approvals?state=maybe');
    assert.equal(badState.status, 400);
    assert.equal(
      ((await badState.json()) as { error: { message: string } }).error.message,
      'query parameter state must be pending, approved, denied, expired, consumed or all, got "maybe"',
    );
    // state=all lists every state: the request just approved and consumed is there.
    const all = await api(replicas.a.base, bob, 'GET', '/approvals?state=all');
    assert.equal(all.status, 200);
    const listed = ((await all.json()) as { approvals: ApprovalView[] }).approvals;
    assert.equal(listed.find((approval) => approval.id === id)?.state, 'consumed');
    assert.equal((await fetch(`${replicas.a.base}/api/v1/approvals`)).status, 401);
  });

  it('the ledger holds every approval event, in the run of its call, and verifies', async () => {
    const events = await poll('the approval events', async () => {
      const all = await replicas.core.readStream(streams.ledger.name, { subject: subjects.ledgerEvents, afterSeq: 0, limit: 10_000 });
      const found = all.map((m) => ledgerEventSchema.parse(m.data)).filter((e: LedgerEvent) => e.tenant === replicas.tenant);
      const types = new Set(found.map((e) => e.type));
      return ['approval.requested', 'approval.granted', 'approval.denied', 'approval.consumed'].every((t) =>
        types.has(t as LedgerEvent['type']),
      )
        ? found
        : undefined;
    });
    const consumed = events.filter((e) => e.type === 'approval.consumed');
    for (const event of consumed) {
      const called = events.find((e) => e.type === 'tool.called' && e.runId === event.runId);
      assert.equal(called?.data['approvalId'], event.data['approvalId'], 'tool.called names the approval it used, in the same run');
    }
    const decided = events.filter((e) => e.type === 'approval.granted' || e.type === 'approval.denied');
    for (const event of decided) assert.match(String(event.data['decidedBy']), /^api-key:/);
    // Every event reaches the ledger's table, whose chain verifies.
    await poll('the ledger rows', async () => {
      const verified = await ledger.store.verify(replicas.tenant);
      return verified.ok && verified.events >= events.length ? verified : undefined;
    });
  });
});
