#!/usr/bin/env node
// What a tools/call pays for its policy decision, measured interleaved in one run: the decision made in process
// (`decide` from @punk/lib on the tenant's compiled policies, as the gateway makes it, plus the append of its
// `governance.decision` event, which the call awaits alongside the upstream call) next to the round trip to
// governance on `punk.governance.check` (its decision and its ledger append before the reply), which a call pays
// only when a McpPolicy rate limit covers it. Needs NATS (PUNK_NATS_URL, default nats://127.0.0.1:4222); the
// stream and bucket names are the project's, so point it at a NATS of its own. CALLS (default 2000) per path.
//   node bench/policy-decision.mjs
import { randomUUID } from 'node:crypto';
import { startGovernance } from '@punk/governance';
import {
  anonymousPrincipal,
  appendLedgerEvent,
  createLogger,
  decide,
  decisionEvent,
  NatsBus,
  requestDecision,
  streams,
  watchPolicies,
} from '@punk/lib';
import { fmt, pct } from './common.mjs';

const CALLS = Number(process.env.CALLS ?? 2000);
const WARMUP = 200;
const log = createLogger('bench', 'silent');
const url = process.env.PUNK_NATS_URL ?? 'nats://127.0.0.1:4222';
const bus = await NatsBus.connect({ url, name: 'bench-policy', log });
const gov = await NatsBus.connect({ url, name: 'bench-governance', log });
await bus.ensureStream(streams.ledger);
const governance = await startGovernance({ bus: gov, log });
const policies = await watchPolicies(bus, log);
const tenant = `bench-${randomUUID().slice(0, 8)}`;
const check = () => ({
  tenant,
  principal: anonymousPrincipal(tenant),
  server: 'everything',
  kind: 'tool',
  target: 'echo',
  runId: randomUUID(),
});

const paths = {
  /** The decision alone, in process (what the gateway adds before the upstream call goes out). */
  'decide in process': async () => void decide(check(), policies.of(tenant)),
  /** The decision and its audit append (the append runs alongside the upstream call; the answer waits for it). */
  'decide + append': async () => {
    const c = check();
    await appendLedgerEvent(bus, decisionEvent(c, decide(c, policies.of(tenant)), 'gateway'));
  },
  /** Before: a round trip to governance, which decides and appends before replying. */
  'governance round trip': async () => void (await requestDecision(bus, check())),
};
const samples = Object.fromEntries(Object.keys(paths).map((name) => [name, []]));
try {
  for (let i = 0; i < WARMUP + CALLS; i++) {
    const order = Object.entries(paths);
    if (i % 2 === 1) order.reverse();
    for (const [name, run] of order) {
      const t0 = process.hrtime.bigint();
      await run();
      if (i >= WARMUP) samples[name].push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  console.log(
    `policy decision of one tools/call, ${CALLS} per path after ${WARMUP} warm-up, interleaved, sequential (Node ${process.versions.node})`,
  );
  for (const [name, values] of Object.entries(samples)) {
    const sorted = values.sort((a, b) => a - b);
    console.log(`${name.padEnd(22)} p50 ${fmt(pct(sorted, 50)).padStart(10)}   p99 ${fmt(pct(sorted, 99)).padStart(10)}`);
  }
} finally {
  await policies.stop();
  await governance.stop();
  await gov.close();
  await bus.close();
}
