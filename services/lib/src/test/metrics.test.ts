/**
 * The metrics every Punk process shares (metrics/): `/metrics` on the process listener (any Host, GET and HEAD
 * only), bus subjects folded into their bounded families, and a TrackedBus over a real nats-server timing
 * requests (success, a responder's error, no responders) and appends. Values are read as deltas from prom-client's
 * registry: other listeners may run in this process.
 */
import { strict as assert } from 'node:assert';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import {
  createLogger,
  jsonRpcErrorTypeOf,
  listenHealth,
  NatsBus,
  PunkError,
  subjectFamily,
  subjects,
  TrackedBus,
  type HealthServer,
} from '../index.js';
import { startPrivateNats, type PrivateNats } from './natstest.js';
import { registryValue } from './metricstest.js';

/** One request with an explicit Host header: status, headers and body. */
function send(
  url: string,
  method: string,
  host: string,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { method, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    })
      .on('error', reject)
      .end();
  });
}

describe('/metrics on the process listener', () => {
  let http: HealthServer;
  before(async () => {
    http = await listenHealth('127.0.0.1', 0, async () => undefined, undefined, { allowedHosts: ['punk.example'] });
  });
  after(() => http.close());

  it('answers GET from any Host (scrapers reach pods by IP) in the text exposition format, with process metrics', async () => {
    const res = await send(`${http.url}/metrics`, 'GET', '10.1.2.3:8080');
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4; charset=utf-8$/);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.match(res.body, /^# TYPE process_cpu_seconds_total counter$/m);
    assert.match(res.body, /^# TYPE punk_bus_request_duration_seconds histogram$/m);
    assert.equal((await send(`${http.url}/other`, 'GET', '10.1.2.3:8080')).status, 403, 'other paths still check the Host');
  });

  it('answers HEAD without a body, and any other method 405 naming it, with Allow', async () => {
    const head = await send(`${http.url}/metrics`, 'HEAD', 'punk.example');
    assert.equal(head.status, 200);
    assert.equal(head.body, '');
    for (const method of ['POST', 'PUT', 'DELETE']) {
      const res = await send(`${http.url}/metrics`, method, 'punk.example');
      assert.equal(res.status, 405, method);
      assert.equal(res.headers['allow'], 'GET, HEAD');
      const body = JSON.parse(res.body) as { error: { code: string; message: string } };
      assert.equal(body.error.code, 'MethodNotAllowed');
      assert.equal(body.error.message, `${method} is not allowed on /metrics: use GET`);
    }
  });
});

describe('bus subject families', () => {
  it('keep fixed subjects, fold ids into *, and name anything else _OTHER', () => {
    assert.equal(subjectFamily(subjects.gatewayCall), 'punk.gateway.call');
    assert.equal(subjectFamily(subjects.clientAnswer('4f1c2b7e-0000-4000-8000-000000000001')), 'punk.client-request.*.answer');
    assert.equal(subjectFamily(subjects.gatewayInstanceCall('gateway-7d9f.replica')), 'punk.gateway.instance.*.call');
    assert.equal(subjectFamily(subjects.sessionMessage('acme')), 'punk.tenant.*.session-message');
    assert.equal(subjectFamily(subjects.sseEvent('s1', 'st1')), 'punk.sse.*.*');
    assert.equal(subjectFamily('not.a.punk.subject'), '_OTHER');
  });
});

describe('JSON-RPC error codes as error_type', () => {
  it('keep the codes JSON-RPC defines or reserves and fold every other value into _OTHER', () => {
    for (const code of [-32700, -32600, -32601, -32602, -32603, -32000, -32002, -32042, -32099])
      assert.equal(jsonRpcErrorTypeOf(code), String(code));
    for (const code of [-32604, -32100, -31999, 0, 1, 42, 123456, -1.5, Number.NaN, '-32602', null])
      assert.equal(jsonRpcErrorTypeOf(code), '_OTHER', `code ${String(code)}`);
  });
});

describe('TrackedBus metrics over NATS', () => {
  let nats: PrivateNats;
  let bus: TrackedBus;
  before(async () => {
    nats = await startPrivateNats();
    bus = new TrackedBus(await NatsBus.connect({ url: nats.url, name: 'metrics-test', log: createLogger('test', 'silent') }));
  });
  after(async () => {
    await bus.close();
    await nats.stop();
  });

  it('times requests by subject family and error type, and appends', async () => {
    const family = 'punk.client-request.*.answer';
    const count = (errorType: string) =>
      registryValue(
        'punk_bus_request_duration_seconds',
        { subject: family, error_type: errorType },
        'punk_bus_request_duration_seconds_count',
      );
    const before = { ok: await count(''), refused: await count('CallerMismatch'), none: await count('BusNoResponders') };
    const served = await bus.serve(subjects.clientAnswer('r1'), async (data) => {
      if ((data as { refuse?: boolean }).refuse) throw new PunkError('CallerMismatch', 'not yours');
      return { ok: true };
    });
    assert.deepEqual(await bus.request(subjects.clientAnswer('r1'), {}, { timeoutMs: 5000 }), { ok: true });
    await assert.rejects(bus.request(subjects.clientAnswer('r1'), { refuse: true }, { timeoutMs: 5000 }), /not yours/);
    await served.unsubscribe();
    await assert.rejects(
      bus.request(subjects.clientAnswer('r2'), {}, { timeoutMs: 5000 }),
      (e: unknown) => e instanceof PunkError && e.code === 'BusNoResponders',
    );
    assert.equal((await count('')) - before.ok, 1, 'the answered request, under its family, not its id');
    assert.equal((await count('CallerMismatch')) - before.refused, 1, "the responder's error code");
    assert.equal((await count('BusNoResponders')) - before.none, 1);
    assert.equal(
      await registryValue(
        'punk_bus_request_duration_seconds',
        { subject: subjects.clientAnswer('r1') },
        'punk_bus_request_duration_seconds_count',
      ),
      0,
      'no series per id',
    );

    const stream = { name: 'METRICS_TEST', subjects: ['punk.sse.>'], duplicateWindowMs: 60_000 };
    await bus.ensureStream(stream);
    const appends = () =>
      registryValue(
        'punk_bus_append_duration_seconds',
        { subject: 'punk.sse.*.*', error_type: '' },
        'punk_bus_append_duration_seconds_count',
      );
    const appended = await appends();
    await bus.append(subjects.sseEvent('s1', 'st1'), { n: 1 }, { msgId: 'm1' });
    assert.equal((await appends()) - appended, 1);
  });
});
