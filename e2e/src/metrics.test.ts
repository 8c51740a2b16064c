/**
 * Prometheus metrics of the distributed services (docs/observability.md "Metrics"): governance, ledger, gateway
 * and mcp-front as their own OS processes against a NATS of the test's own and Postgres; a real SDK client drives
 * traffic through mcp-front (initialize, tools/list, a call that succeeds, one that is a tool error, one that
 * policy holds for approval, one the upstream does not answer in time, one of an unknown tool); then each `/metrics` is scraped, parsed, and the families
 * are checked against what that traffic must have added (deltas from a scrape before it).
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, listAllTools } from './clients.js';
import { tallyWorld, type TallyWorld } from './distributed.js';
import { eventually } from './harness.js';
import { startService, type ServiceProcess } from './processes.js';
import { scrape, sumOf, valueOf, type Exposition } from './prometheus-text.js';

let world: TallyWorld;
let services: Record<'governance' | 'ledger' | 'gateway' | 'front', ServiceProcess>;

before(async () => {
  world = await tallyWorld();
  // `charge` at side-effect level 4: the default policy answers approval_required (a refusal the client sees as a tool
  // error); a 1 s deadline (spec.timeout) makes a slow read time out at the gateway.
  const manifest = join(world.setup.manifestDir, 'tally.yaml');
  const text = (await readFile(manifest, 'utf8')).replace('{ name: charge, sideEffectLevel: 3 }', '{ name: charge, sideEffectLevel: 4 }');
  await writeFile(manifest, text.replace('\n  sessionMode:', '\n  timeout: 1s\n  sessionMode:'));
  const { env } = world;
  services = {
    governance: await startService('governance', env),
    ledger: await startService('ledger', env),
    gateway: await startService('gateway', env),
    front: await startService('mcp-front', env),
  };
});

after(async () => {
  await Promise.all(Object.values(services ?? {}).map((s) => s.stop('SIGKILL')));
  await world?.stop();
});

/** Every service's exposition, by service. */
async function scrapeAll(): Promise<Record<keyof typeof services, Exposition>> {
  const entries = await Promise.all(Object.entries(services).map(async ([name, s]) => [name, await scrape(s.url)] as const));
  return Object.fromEntries(entries) as Record<keyof typeof services, Exposition>;
}

/** Asserts a family is declared with this type (and so exported by the process). */
function assertFamily(exposition: Exposition, name: string, type: string, where: string): void {
  assert.equal(exposition.get(name)?.type, type, `${where} exports ${name} as a ${type}`);
}

/** Asserts a histogram series is consistent: its `+Inf` bucket equals its `_count`, its sum is not negative. */
function assertHistogramSeries(exposition: Exposition, name: string, labels: Record<string, string>): void {
  const count = valueOf(exposition, `${name}_count`, labels);
  assert.equal(
    valueOf(exposition, `${name}_bucket`, { ...labels, le: '+Inf' }),
    count,
    `${name} ${JSON.stringify(labels)}: +Inf bucket equals _count`,
  );
  assert.ok(valueOf(exposition, `${name}_sum`, labels) >= 0, `${name} ${JSON.stringify(labels)}: sum is not negative`);
}

test('each service exports its metric families and process metrics; traffic through mcp-front moves them by what it did', async () => {
  const before = await scrapeAll();
  const tenantServer = `${world.setup.tenant}/tally`;
  const client: Client = await connectClient(`${services.front.url}/mcp`, '2025-11-25');
  try {
    const tools = await listAllTools(client);
    const countName = tools.find((t) => t.name.endsWith('count'))!.name;
    const chargeName = tools.find((t) => t.name.endsWith('charge'))!.name;
    const slowName = tools.find((t) => t.name.endsWith('read_slowly'))!.name;
    const ok = await client.callTool({ name: countName, arguments: { n: 1 } });
    assert.notEqual(ok.isError, true);
    const invalid = await client.callTool({ name: countName, arguments: { n: 'not a number' } });
    assert.equal(invalid.isError, true, 'arguments that break the inputSchema are a tool error (2025-11-25)');
    const held = await client.callTool({ name: chargeName, arguments: { ms: 1 } });
    assert.equal(held.isError, true, 'a level-4 tool needs an approval: a tool error');
    const late = await client.callTool({ name: slowName, arguments: { ms: 3000 } });
    assert.equal(late.isError, true, 'an upstream past its deadline is a tool error');
    await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }), /Unknown tool/);

    // The ledger writes just behind the stream: wait until it committed what this traffic appended.
    const appended = (e: Exposition, type: string) => valueOf(e, 'punk_ledger_events_appended_total', { type });
    await eventually(async () => {
      const ledger = await scrape(services.ledger.url);
      return appended(ledger, 'governance.decision') - appended(before.ledger, 'governance.decision') >= 1 &&
        appended(ledger, 'tool.completed') - appended(before.ledger, 'tool.completed') >= 2
        ? true
        : undefined;
    }, 15_000);
    const now = await scrapeAll();
    const delta = (service: keyof typeof services, name: string, labels: Record<string, string> = {}) =>
      valueOf(now[service], name, labels) - valueOf(before[service], name, labels);

    // mcp-front: one series per method, tool and outcome (OpenTelemetry mcp.server.operation.duration).
    const op = 'mcp_server_operation_duration_seconds';
    assertFamily(now.front, op, 'histogram', 'mcp-front');
    const version = { mcp_protocol_version: '2025-11-25' };
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'initialize', error_type: '', gen_ai_tool_name: '', ...version }),
      1,
      'one initialize',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/list', error_type: '', gen_ai_tool_name: '', ...version }),
      1,
      'one tools/list',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/call', gen_ai_tool_name: countName, error_type: '', ...version }),
      1,
      'one successful call',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/call', gen_ai_tool_name: countName, error_type: 'tool_error', ...version }),
      1,
      'one tool error',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/call', gen_ai_tool_name: chargeName, error_type: 'tool_error', ...version }),
      1,
      'one call held for approval',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/call', gen_ai_tool_name: slowName, error_type: 'tool_error', ...version }),
      1,
      'one call timed out upstream',
    );
    assert.equal(
      delta('front', `${op}_count`, { mcp_method_name: 'tools/call', gen_ai_tool_name: '_OTHER', error_type: '-32602', ...version }),
      1,
      'an unknown tool is _OTHER, never its name',
    );
    assert.equal(sumOf(now.front, `${op}_count`, { gen_ai_tool_name: 'no_such_tool' }), 0);
    assertHistogramSeries(now.front, op, { mcp_method_name: 'tools/call', gen_ai_tool_name: countName, error_type: '', ...version });
    assertFamily(now.front, 'punk_mcp_front_http_responses_total', 'counter', 'mcp-front');
    assert.ok(
      delta('front', 'punk_mcp_front_http_responses_total', { http_request_method: 'POST', status_class: '2xx' }) >= 6,
      'every POST answered 2xx is counted',
    );
    assertFamily(now.front, 'punk_mcp_front_sse_streams', 'gauge', 'mcp-front');
    assertFamily(now.front, 'punk_mcp_front_sessions', 'gauge', 'mcp-front');
    assert.ok(valueOf(now.front, 'punk_mcp_front_sessions', { tenant: world.setup.tenant }) >= 1, 'the client session is in the bucket');
    assert.ok(
      delta('front', 'punk_bus_request_duration_seconds_count', { subject: 'punk.gateway.call', error_type: '' }) >= 3,
      'the three forwarded calls went over the bus',
    );

    // gateway: the two calls that reached the upstream (the others ended at the front or at governance).
    const client_op = 'mcp_client_operation_duration_seconds';
    assertFamily(now.gateway, client_op, 'histogram', 'gateway');
    assert.equal(
      delta('gateway', `${client_op}_count`, {
        mcp_method_name: 'tools/call',
        server: tenantServer,
        gen_ai_tool_name: 'count',
        error_type: '',
      }),
      1,
    );
    assert.equal(
      delta('gateway', `${client_op}_count`, {
        mcp_method_name: 'tools/call',
        server: tenantServer,
        gen_ai_tool_name: 'read_slowly',
        error_type: 'timeout',
      }),
      1,
      'the upstream past its deadline',
    );
    assert.equal(
      sumOf(now.gateway, `${client_op}_count`, { gen_ai_tool_name: 'charge' }),
      0,
      'a call held for approval never reaches the upstream',
    );
    assertHistogramSeries(now.gateway, client_op, {
      mcp_method_name: 'tools/call',
      server: tenantServer,
      gen_ai_tool_name: 'count',
      error_type: '',
    });
    assertFamily(now.gateway, 'punk_gateway_upstreams', 'gauge', 'gateway');
    assert.equal(valueOf(now.gateway, 'punk_gateway_upstreams', { pool: 'shared', state: 'ready' }), 1, 'the tally server is connected');
    assert.equal(valueOf(now.gateway, 'punk_gateway_upstreams', { pool: 'per_client', state: 'ready' }), 0);
    assertFamily(now.gateway, 'punk_gateway_upstream_calls_in_flight', 'gauge', 'gateway');
    assert.equal(
      valueOf(now.gateway, 'punk_gateway_upstream_calls_in_flight', { server: tenantServer }),
      0,
      'nothing in flight after the calls',
    );
    // The gateway decided the three calls in process (no rate limit covers them): no governance check.
    assertFamily(now.gateway, 'punk_gateway_decisions_total', 'counter', 'gateway');
    const byGateway = (decision: string) => ({ decision, kind: 'tool', decided_by: 'gateway' });
    assert.equal(delta('gateway', 'punk_gateway_decisions_total', byGateway('allow')), 2);
    assert.equal(delta('gateway', 'punk_gateway_decisions_total', byGateway('approval_required')), 1);
    assert.equal(
      delta('gateway', 'punk_bus_request_duration_seconds_count', { subject: 'punk.governance.check', error_type: '' }),
      0,
      'no governance check',
    );
    assert.ok(
      delta('gateway', 'punk_bus_append_duration_seconds_count', { subject: 'punk.ledger.events', error_type: '' }) >= 4,
      'one governance.decision (the approval asked for), two tool.called carrying their decisions and two tool.completed appended',
    );

    // governance: its families, untouched by calls no rate limit covers (services/governance/src/test/metrics.test.ts counts them).
    assertFamily(now.governance, 'punk_governance_decisions_total', 'counter', 'governance');
    assert.equal(delta('governance', 'punk_governance_decisions_total', { decision: 'allow', kind: 'tool' }), 0);
    assertFamily(now.governance, 'punk_governance_rate_limited_total', 'counter', 'governance');
    assertFamily(now.governance, 'punk_governance_check_duration_seconds', 'histogram', 'governance');
    assert.ok(valueOf(now.governance, 'punk_bus_served_requests_in_flight') >= 0);

    // ledger: what was appended, and one lag observation per appended event.
    assertFamily(now.ledger, 'punk_ledger_events_appended_total', 'counter', 'ledger');
    assert.equal(delta('ledger', 'punk_ledger_events_appended_total', { type: 'tool.called' }), 2);
    assert.equal(
      delta('ledger', 'punk_ledger_events_appended_total', { type: 'tool.completed' }),
      2,
      'a call held for approval ends at its decision',
    );
    // The two allowed calls carry their decisions in tool.called; the call held for approval has one of its own.
    assert.equal(delta('ledger', 'punk_ledger_events_appended_total', { type: 'governance.decision' }), 1);
    const appendedAll = sumOf(now.ledger, 'punk_ledger_events_appended_total') - sumOf(before.ledger, 'punk_ledger_events_appended_total');
    assert.equal(delta('ledger', 'punk_ledger_append_lag_seconds_count'), appendedAll, 'one lag observation per appended event');
    assertHistogramSeries(now.ledger, 'punk_ledger_append_lag_seconds', {});
    assertFamily(now.ledger, 'punk_ledger_rejected_messages_total', 'counter', 'ledger');

    // Process metrics everywhere, without a prefix.
    for (const [name, exposition] of Object.entries(now)) {
      assertFamily(exposition, 'process_cpu_seconds_total', 'counter', name);
      assertFamily(exposition, 'nodejs_eventloop_lag_seconds', 'gauge', name);
      assertFamily(exposition, 'punk_bus_request_duration_seconds', 'histogram', name);
    }
  } finally {
    await client.close();
  }
});

test('a 2025 session holds a GET stream open: the front counts it while it is open', async () => {
  const client = await connectClient(`${services.front.url}/mcp`, '2025-11-25');
  try {
    const open = await eventually(async () => {
      const value = valueOf(await scrape(services.front.url), 'punk_mcp_front_sse_streams', { http_request_method: 'GET' });
      return value >= 1 ? value : undefined;
    }, 10_000);
    assert.ok(open !== undefined && open >= 1, 'the standalone GET stream is counted');
  } finally {
    await client.close();
  }
});

test('/metrics answers GET only: POST gets 405 naming the method, with Allow', async () => {
  const res = await fetch(`${services.governance.url}/metrics`, { method: 'POST', body: '{}' });
  assert.equal(res.status, 405);
  assert.equal(res.headers.get('allow'), 'GET, HEAD');
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'MethodNotAllowed');
  assert.match(body.error.message, /POST is not allowed on \/metrics/);
});
