/**
 * OpenTelemetry tracing end to end (docs/tracing.md): the four service processes against real NATS and
 * Postgres export over OTLP/HTTP (JSON) to an in-process receiver; a real SDK client calls tools of a real
 * stdio MCP server (fixtures/traced.mjs, which records the `_meta.traceparent` it receives) through mcp-front.
 * Also `punk up` (in-process bus) with tracing on and off, and bad `OTEL_*` settings.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { punkTracer, startTracing, tracingSettings } from '@punk/lib';
import type { Client } from '@modelcontextprotocol/client';
import { connectClient, textOf } from './clients.js';
import { tallyWorld, type TallyWorld } from './distributed.js';
import { eventually, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { SpanKinds, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
import { startService, type ServiceProcess } from './processes.js';

/** The `traced` McpServer manifest, recording into `file`. */
function tracedManifest(tenant: string, file: string): string {
  return `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: traced, namespace: ${tenant} }
spec:
  image: local/traced
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/fixtures/traced.mjs'))}]
  env: [{ name: TRACED_FILE, value: ${JSON.stringify(file)} }]
`;
}

/** A fresh W3C `traceparent` (version 00, sampled) and its trace and parent ids. */
function newTraceparent(): { traceparent: string; traceId: string; parentId: string } {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { traceparent: `00-${traceId}-${parentId}-01`, traceId, parentId };
}

/** What the traced server recorded, one entry per call. */
async function upstreamRecords(file: string): Promise<Array<{ tool: string; text: string | null; traceparent: string | null }>> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { tool: string; text: string | null; traceparent: string | null });
}

/** Waits until the receiver holds spans of `traceId` named as in `names` (each at least once); fails naming what is missing. */
async function traceWith(receiver: OtlpReceiver, traceId: string, names: string[]): Promise<ReceivedSpan[]> {
  const complete = await eventually(async () => {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    return names.every((name) => spans.some((s) => s.name === name)) ? spans : undefined;
  }, 20_000);
  const seen = receiver.spans.filter((s) => s.traceId === traceId).map((s) => `${s.service}: ${s.name}`);
  assert.ok(
    complete,
    `trace ${traceId} should hold ${names.join(', ')}; it holds ${seen.join(', ') || 'nothing'} (refused exports: ${receiver.refused.join('; ') || 'none'})`,
  );
  return complete;
}

/** The one span named `name` (by `service`, when given). */
function only(spans: ReceivedSpan[], name: string, service?: string): ReceivedSpan {
  const found = spans.filter((s) => s.name === name && (service === undefined || s.service === service));
  assert.equal(found.length, 1, `one span ${name}${service ? ` of ${service}` : ''} expected, got ${found.length}`);
  return found[0]!;
}

/** Asserts the spans form one tree whose only root is `root`, a child of the (unexported) span `externalParent` or a root itself. */
function assertTree(spans: ReceivedSpan[], root: ReceivedSpan, externalParent: string): void {
  const ids = new Set(spans.map((s) => s.spanId));
  assert.equal(ids.size, spans.length, 'span ids are unique');
  const roots = spans.filter((s) => !ids.has(s.parentSpanId));
  assert.deepEqual(
    roots.map((s) => s.name),
    [root.name],
    'every span but the front span has its parent in the trace',
  );
  assert.equal(root.parentSpanId, externalParent);
}

/** The ancestors of `span` up to the trace's root, nearest first. */
function ancestors(spans: ReceivedSpan[], span: ReceivedSpan): ReceivedSpan[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const chain: ReceivedSpan[] = [];
  for (let parent = byId.get(span.parentSpanId); parent; parent = byId.get(parent.parentSpanId)) chain.push(parent);
  return chain;
}

/** The JSON log lines of a process output. */
function logLines(output: string): Array<Record<string, unknown>> {
  return output.split('\n').flatMap((line) => {
    try {
      const value: unknown = JSON.parse(line);
      return typeof value === 'object' && value !== null ? [value as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

describe('tracing across the service processes (NATS, Postgres, OTLP/HTTP JSON)', () => {
  let receiver: OtlpReceiver;
  let world: TallyWorld;
  let recordFile: string;
  const running: ServiceProcess[] = [];
  let front: ServiceProcess;
  let gateway: ServiceProcess;
  let client: Client;

  before(async () => {
    receiver = await startOtlpReceiver();
    world = await tallyWorld();
    recordFile = join(world.setup.manifestDir, 'traced.jsonl');
    await writeFile(recordFile, '');
    await writeFile(join(world.setup.manifestDir, 'traced.yaml'), tracedManifest(world.setup.tenant, recordFile));
    const env = {
      ...world.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    gateway = await startService('gateway', { ...env, PUNK_LOG_LEVEL: 'debug' });
    running.push(await startService('governance', env), await startService('ledger', env), gateway);
    front = await startService('mcp-front', env);
    running.push(front);
    client = await connectClient(`${front.url}/mcp`, '2025-11-25');
  });

  after(async () => {
    await client?.close();
    await Promise.all(running.map((s) => s.stop('SIGTERM')));
    await world?.stop();
    await receiver?.close();
  });

  test('a tools/call is one trace: mcp-front, gateway (its policy decision included), the upstream request and the ledger', async () => {
    const incoming = newTraceparent();
    const result = await client.callTool({
      name: 'traced__echo',
      arguments: { text: 'one trace' },
      _meta: { traceparent: incoming.traceparent },
    });
    assert.equal(textOf(result), 'one trace');

    const spans = await traceWith(receiver, incoming.traceId, [
      'tools/call traced__echo',
      'route tools/call echo',
      'tools/call echo',
      'ledger persist tool.called',
      'ledger persist tool.completed',
    ]);
    // No governance span: no rate limit covers the call, so the gateway decides it in process.
    assert.deepEqual([...new Set(spans.map((s) => s.service))].sort(), ['punk-gateway', 'punk-ledger', 'punk-mcp-front']);

    // mcp-front: the MCP server span, child of the client's traceparent (params._meta).
    const server = only(spans, 'tools/call traced__echo', 'punk-mcp-front');
    assertTree(spans, server, incoming.parentId);
    assert.equal(server.kind, SpanKinds.server);
    assert.equal(server.attributes['mcp.method.name'], 'tools/call');
    assert.equal(server.attributes['gen_ai.tool.name'], 'traced__echo');
    assert.equal(server.attributes['gen_ai.operation.name'], 'execute_tool');
    assert.match(String(server.attributes['jsonrpc.request.id']), /^\d+$/);
    assert.match(String(server.attributes['mcp.session.id']), /.+/);
    assert.equal(server.attributes['mcp.protocol.version'], '2025-11-25');
    assert.equal(server.attributes['network.transport'], 'tcp');
    assert.equal(server.attributes['punk.tenant'], world.setup.tenant);
    assert.equal(server.attributes['error.type'], undefined);

    // gateway: the route span under the front's span, the upstream CLIENT span under it.
    const route = only(spans, 'route tools/call echo', 'punk-gateway');
    assert.equal(route.kind, SpanKinds.server);
    assert.equal(route.parentSpanId, server.spanId);
    assert.equal(route.attributes['punk.server'], 'traced');
    const upstream = only(spans, 'tools/call echo', 'punk-gateway');
    assert.equal(upstream.kind, SpanKinds.client);
    assert.equal(upstream.parentSpanId, route.spanId);
    assert.equal(upstream.attributes['mcp.method.name'], 'tools/call');
    assert.equal(upstream.attributes['gen_ai.tool.name'], 'echo');
    assert.equal(upstream.attributes['gen_ai.operation.name'], 'execute_tool');

    // ledger: each event persisted under the span that appended it (tool.called carrying the gateway's decision).
    for (const name of ['ledger persist tool.called', 'ledger persist tool.completed']) {
      const persisted = only(spans, name, 'punk-ledger');
      assert.equal(persisted.kind, SpanKinds.consumer);
      assert.ok(
        ancestors(spans, persisted).some((s) => s.spanId === route.spanId),
        `${name} descends from the route span`,
      );
    }

    // The upstream MCP server received the gateway's CLIENT span as its parent, in params._meta.
    const record = (await upstreamRecords(recordFile)).find((r) => r.text === 'one trace');
    assert.equal(record?.traceparent, `00-${incoming.traceId}-${upstream.spanId}-01`);
  });

  test('a tool result with isError is error.type=tool_error on the front and the upstream spans', async () => {
    const incoming = newTraceparent();
    const result = await client.callTool({ name: 'traced__fail', arguments: {}, _meta: { traceparent: incoming.traceparent } });
    assert.equal(result.isError, true);
    const spans = await traceWith(receiver, incoming.traceId, [
      'tools/call traced__fail',
      'tools/call fail',
      'ledger persist tool.completed',
    ]);
    for (const span of [only(spans, 'tools/call traced__fail', 'punk-mcp-front'), only(spans, 'tools/call fail', 'punk-gateway')]) {
      assert.equal(span.attributes['error.type'], 'tool_error', span.name);
      assert.equal(span.statusCode, 2, `${span.name} has status ERROR`);
    }
  });

  test('a JSON-RPC error is error.type=<code> on the front span', async () => {
    const incoming = newTraceparent();
    await assert.rejects(
      client.callTool({ name: 'traced__no_such_tool', arguments: {}, _meta: { traceparent: incoming.traceparent } }),
      /Unknown tool/,
    );
    const [span] = await traceWith(receiver, incoming.traceId, ['tools/call traced__no_such_tool']);
    assert.equal(span!.attributes['error.type'], '-32602');
    assert.equal(span!.attributes['rpc.response.status_code'], '-32602');
    assert.equal(span!.statusCode, 2);
  });

  test('the HTTP traceparent header is the parent when params._meta carries none', async () => {
    const incoming = newTraceparent();
    const headed = await connectClient(`${front.url}/mcp`, '2025-11-25', { traceparent: incoming.traceparent });
    try {
      await headed.callTool({ name: 'traced__echo', arguments: { text: 'header parent' } });
    } finally {
      await headed.close();
    }
    const spans = await traceWith(receiver, incoming.traceId, ['tools/call traced__echo', 'tools/call echo']);
    assert.equal(only(spans, 'tools/call traced__echo').parentSpanId, incoming.parentId);
  });

  test('a malformed traceparent (header and _meta) is ignored: the call works and starts a new trace', async () => {
    const garbled = await connectClient(`${front.url}/mcp`, '2025-11-25', { traceparent: '00-not-a-trace-01' });
    try {
      const result = await garbled.callTool({
        name: 'traced__echo',
        arguments: { text: 'malformed parent' },
        _meta: { traceparent: 'zz-0000-garbage', tracestate: 42 },
      });
      assert.equal(textOf(result), 'malformed parent');
    } finally {
      await garbled.close();
    }
    const record = (await upstreamRecords(recordFile)).find((r) => r.text === 'malformed parent');
    const [, traceId] = /^00-([0-9a-f]{32})-[0-9a-f]{16}-01$/.exec(record?.traceparent ?? '') ?? [];
    assert.ok(traceId, `the upstream got a well-formed traceparent, got ${record?.traceparent}`);
    const spans = await traceWith(receiver, traceId, ['tools/call traced__echo']);
    assert.equal(only(spans, 'tools/call traced__echo').parentSpanId, '', 'the front span is a root');
  });

  test('a log line written inside a request span carries its trace_id, span_id, runId and tenant', async () => {
    const incoming = newTraceparent();
    await client.callTool({ name: 'traced__echo', arguments: { text: 'logged' }, _meta: { traceparent: incoming.traceparent } });
    const spans = await traceWith(receiver, incoming.traceId, ['route tools/call echo']);
    const route = only(spans, 'route tools/call echo');
    const line = logLines(gateway.output()).find((l) => l['msg'] === 'policy decision' && l['trace_id'] === incoming.traceId);
    assert.ok(line, 'the gateway logged its decision with the trace id');
    assert.equal(line['span_id'], route.spanId);
    assert.equal(line['trace_flags'], '01');
    assert.equal(line['tenant'], world.setup.tenant);
    assert.match(String(line['runId']), /^[0-9a-f-]{36}$/);
  });
});

describe('tracing in punk up (the in-process bus)', () => {
  let receiver: OtlpReceiver;
  let dir: string;
  let punk: RunningPunk;
  let recordFile: string;

  before(async () => {
    receiver = await startOtlpReceiver();
    dir = await manifestDir('tracing-up', {});
    recordFile = join(dir, 'traced.jsonl');
    await writeFile(recordFile, '');
    await writeFile(join(dir, 'traced.yaml'), tracedManifest('default', recordFile));
    punk = await startPunk({
      manifestDir: dir,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' },
    });
  });

  after(async () => {
    await punk?.stop();
    await receiver?.close();
    await removeDir(dir);
  });

  test('a tools/call is one trace of punk-up spans, the ledger included', async () => {
    const client = await connectClient(`${punk.baseUrl}/mcp`, '2026-07-28');
    const incoming = newTraceparent();
    try {
      await client.callTool({ name: 'traced__echo', arguments: { text: 'in process' }, _meta: { traceparent: incoming.traceparent } });
    } finally {
      await client.close();
    }
    const spans = await traceWith(receiver, incoming.traceId, [
      'tools/call traced__echo',
      'route tools/call echo',
      'tools/call echo',
      'ledger persist tool.called',
      'ledger persist tool.completed',
    ]);
    assert.deepEqual([...new Set(spans.map((s) => s.service))], ['punk-up']);
    const server = only(spans, 'tools/call traced__echo');
    assertTree(spans, server, incoming.parentId);
    assert.equal(server.attributes['mcp.protocol.version'], '2026-07-28');
    const upstream = only(spans, 'tools/call echo');
    const record = (await upstreamRecords(recordFile)).find((r) => r.text === 'in process');
    assert.equal(record?.traceparent, `00-${incoming.traceId}-${upstream.spanId}-01`);
  });
});

describe('tracing off', () => {
  test('punk up without an OTLP endpoint: no trace ids in log lines, no traceparent added for the upstream', async () => {
    const dir = await manifestDir('tracing-off', {});
    const recordFile = join(dir, 'traced.jsonl');
    await writeFile(recordFile, '');
    await writeFile(join(dir, 'traced.yaml'), tracedManifest('default', recordFile));
    const env: Record<string, string> = {
      PUNK_LOG_LEVEL: 'debug',
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
    };
    const punk = await startPunk({ manifestDir: dir, env });
    try {
      const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
      try {
        await client.callTool({ name: 'traced__echo', arguments: { text: 'untraced' } });
      } finally {
        await client.close();
      }
      const decision = await eventually(async () => logLines(punk.output()).find((l) => l['msg'] === 'policy decision'));
      assert.ok(decision, 'the gateway logged its decision');
      assert.equal(decision['tenant'], 'default');
      const traced = logLines(punk.output()).filter((l) => 'trace_id' in l || 'span_id' in l);
      assert.deepEqual(traced, [], 'no log line carries trace ids');
      const record = (await upstreamRecords(recordFile)).find((r) => r.text === 'untraced');
      assert.equal(record?.traceparent, null);
    } finally {
      await punk.stop();
      await removeDir(dir);
    }
  });

  test('no endpoint means no provider: spans are no-ops and nothing is exported', async () => {
    const tracing = await startTracing('test', { OTEL_SERVICE_NAME: 'ignored', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    try {
      assert.equal(tracing.settings, undefined);
      const span = punkTracer().startSpan('nothing');
      assert.equal(span.isRecording(), false);
      span.end();
    } finally {
      await tracing.shutdown();
    }
    assert.equal(tracingSettings('test', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }), undefined);
    assert.equal(
      tracingSettings('test', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }),
      undefined,
    );
  });
});

describe('tracing settings', () => {
  test('the standard variables: endpoint, signal endpoint, protocol, service name, sampler, batch', () => {
    assert.deepEqual(tracingSettings('gateway', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), {
      serviceName: 'punk-gateway',
      tracesUrl: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
      batch: {},
    });
    const custom = tracingSettings('gateway', {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/otlp/traces',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'edge-gateway',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_SCHEDULE_DELAY: '500',
    });
    assert.equal(custom?.tracesUrl, 'https://collector.example/otlp/traces');
    assert.equal(custom?.protocol, 'http/json');
    assert.equal(custom?.serviceName, 'edge-gateway');
    assert.equal(custom?.sampler, 'parentbased_traceidratio');
    assert.equal(custom?.samplerRatio, 0.25);
    assert.deepEqual(custom?.batch, { scheduledDelayMillis: 500 });
  });

  test('a bad OTEL_ variable is refused naming it', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    assert.throws(
      () => tracingSettings('ledger', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }),
      /OTEL_EXPORTER_OTLP_ENDPOINT must be an http\(s\) URL/,
    );
    // Credentials in a bad endpoint never reach the message.
    assert.throws(
      () => tracingSettings('ledger', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://user:S3cretPw@collector:99999' }),
      (error: Error) =>
        /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http\(s\) URL \(got "http:\/\/<redacted>@collector:99999"\)/.test(error.message) &&
        !error.message.includes('S3cretPw'),
    );
    assert.throws(
      () => tracingSettings('ledger', { ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
      /OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json \(got "grpc"\)/,
    );
    assert.throws(() => tracingSettings('ledger', { ...endpoint, OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER must be one of/);
    assert.throws(
      () => tracingSettings('ledger', { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '2' }),
      /OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1/,
    );
    assert.throws(
      () => tracingSettings('ledger', { ...endpoint, OTEL_BSP_MAX_QUEUE_SIZE: '-5' }),
      /OTEL_BSP_MAX_QUEUE_SIZE must be a positive integer/,
    );
  });

  test('a service process with a bad OTEL_ variable exits at start naming it', async () => {
    const service = await startService(
      'mcp-front',
      { PUNK_NATS_URL: 'nats://127.0.0.1:4222', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      { waitReady: false },
    );
    assert.equal(await service.exited, 2);
    assert.match(
      service.output(),
      /punk mcp-front: invalid configuration: OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf or http\/json/,
    );
  });
});
