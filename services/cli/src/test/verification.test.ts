/** The one line `punk verify`, `punk run` and the `punk` MCP tools say of a verification of a tenant's chain. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeVerification } from '../explain.js';

const base = { tenant: 'default', head: 'ab12', chainHead: { tenantSeq: 40, hash: 'ab12' }, sweep: { tenantSeq: 0, sweptAt: null } };

test('a whole chain: where it ends and how much this request checked itself', () => {
  assert.equal(
    describeVerification({ ...base, ok: true, events: 40, complete: true, checked: 40 }),
    "ok: the chain of tenant default's ledger verifies: events 1 to 40 end at its head record (all 40 checked by this request)",
  );
  assert.equal(
    describeVerification({ ...base, ok: true, events: 40, complete: true, checked: 3 }),
    "ok: the chain of tenant default's ledger verifies: events 1 to 40 end at its head record (3 checked by this request, the others by earlier ones)",
  );
});

test('a request that stopped before the head record says to call again', () => {
  assert.equal(
    describeVerification({ ...base, ok: true, events: 25, complete: false, checked: 25 }),
    "ok so far: the chain of tenant default's ledger verifies up to event 25 of 40 (all 25 checked by this request); run punk verify again to go on",
  );
});

test('an empty ledger, and a broken chain with where and why', () => {
  assert.equal(
    describeVerification({ ...base, ok: true, events: 0, complete: true, checked: 0, chainHead: null }),
    "ok: tenant default's ledger has no events yet",
  );
  assert.equal(
    describeVerification({
      ...base,
      ok: false,
      events: 41,
      complete: false,
      checked: 41,
      firstBroken: { tenantSeq: 41, reason: 'TruncatedTail', message: 'events 41 to 43 are missing' },
    }),
    "BROKEN: the chain of tenant default's ledger breaks at event 41 (TruncatedTail: events 41 to 43 are missing)",
  );
});
