/**
 * `punk up` serves the metrics of every component it runs on its one listener (docs/observability.md "Metrics"):
 * after a tool call through its endpoint, the front's, gateway's, governance's, ledger's and the bus's families
 * all moved in the one exposition, beside the process metrics.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectClient, listAllTools } from './clients.js';
import { punkOnTally, type TallySetup } from './distributed.js';
import { eventually, verifyLedger, type RunningPunk } from './harness.js';
import { scrape, valueOf, type Exposition } from './prometheus-text.js';

let setup: TallySetup;
let punk: RunningPunk;
let stop: (() => Promise<void>) | undefined;

before(async () => {
  ({ setup, punk, stop } = await punkOnTally());
});

after(async () => {
  await stop?.();
});

test('one tool call moves every component family of the one process', async () => {
  // The ledger counts an event at its commit, after the bus counted its append: a read of the ledger waits for every
  // earlier append, so both counts start from the same events.
  await verifyLedger(punk.baseUrl);
  const before = await scrape(punk.baseUrl);
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28');
  let countName: string;
  try {
    countName = (await listAllTools(client)).find((t) => t.name.endsWith('count'))!.name;
    const result = await client.callTool({ name: countName, arguments: {} });
    assert.notEqual(result.isError, true);
  } finally {
    await client.close();
  }
  const delta = (now: Exposition, name: string, labels: Record<string, string>) =>
    valueOf(now, name, labels) - valueOf(before, name, labels);
  const now = await eventually(async () => {
    const e = await scrape(punk.baseUrl);
    return delta(e, 'punk_ledger_events_appended_total', { type: 'tool.completed' }) >= 1 ? e : undefined;
  }, 15_000);
  assert.ok(now, 'the ledger committed the call');
  assert.equal(
    delta(now, 'mcp_server_operation_duration_seconds_count', {
      mcp_method_name: 'tools/call',
      gen_ai_tool_name: countName,
      error_type: '',
      mcp_protocol_version: '2026-07-28',
    }),
    1,
    'the front, with the 2026 revision the request carried',
  );
  assert.equal(
    delta(now, 'mcp_client_operation_duration_seconds_count', {
      mcp_method_name: 'tools/call',
      server: `${setup.tenant}/tally`,
      gen_ai_tool_name: 'count',
      error_type: '',
    }),
    1,
    'the gateway',
  );
  assert.equal(
    delta(now, 'punk_gateway_decisions_total', { decision: 'allow', kind: 'tool', decided_by: 'gateway' }),
    1,
    'the gateway decided',
  );
  assert.equal(delta(now, 'punk_ledger_events_appended_total', { type: 'tool.called' }), 1, 'the ledger');
  assert.equal(
    delta(now, 'punk_bus_append_duration_seconds_count', { subject: 'punk.ledger.events', error_type: '' }),
    // The tally server's state change (connected on first use) may land in the same window.
    2 + delta(now, 'punk_ledger_events_appended_total', { type: 'server.state_changed' }),
    'the in-process bus: tool.called (carrying the decision) and tool.completed appended',
  );
  assert.equal(now.get('process_resident_memory_bytes')?.type, 'gauge');
});
