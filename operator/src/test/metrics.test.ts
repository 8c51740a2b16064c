// The operator's Prometheus metrics (docs/observability.md "Metrics") against a real kube-apiserver and a
// nats-server of the test's own: reconciles of an McpPolicy are counted and timed under kind McpPolicy, the
// leader gauge says 1 once the operator leads, the queue depth is exported, and the families are served on the
// listener every Punk process has (services/lib listenHealth: /metrics). Values are read as deltas from
// prom-client's own registry (several operators may run in one test process).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { listenHealth, type HealthServer } from '@punk/lib';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';
import { registryValue } from '../../../services/lib/dist/test/metricstest.js';

const availability = controlPlaneAvailability();

describe('operator metrics', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let ns: string;
  let http: HealthServer;

  before(async () => {
    fixture = await startOperatorFixture('metrics');
    ({ crs, ns } = fixture);
    http = await listenHealth('127.0.0.1', 0, async () => undefined);
  });
  after(async () => {
    await http?.close();
    await fixture?.stop();
  });

  it('counts and times the reconciles of an McpPolicy, and says this instance leads', async () => {
    const successes = () => registryValue('punk_operator_reconcile_total', { kind: 'McpPolicy', result: 'success' });
    const timed = () =>
      registryValue(
        'punk_operator_reconcile_duration_seconds',
        { kind: 'McpPolicy', error_type: '' },
        'punk_operator_reconcile_duration_seconds_count',
      );
    const before = { successes: await successes(), timed: await timed() };
    await crs.create('mcppolicies', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpPolicy',
      metadata: { name: 'metrics' },
      spec: { priority: 10, rules: [{ name: 'reads', sideEffectLevels: { max: 1 }, decision: 'allow' }] },
    });
    await until('Ready', async () => conditionOf(await crs.get('mcppolicies', ns, 'metrics'), 'Ready')?.status === 'True');
    // The reconcile that wrote Ready is counted once it returns, a moment after its status write.
    const counted = await until('the reconcile that made it Ready is counted', async () => {
      const n = (await successes()) - before.successes;
      return n >= 1 && n;
    });
    assert.ok((await timed()) - before.timed >= counted, 'each successful reconcile is timed');
    assert.equal(await registryValue('punk_operator_leader', {}), 1, 'the fixture operator leads');
    assert.ok((await registryValue('punk_operator_workqueue_depth', {})) >= 0);
  });

  it('serves the families on /metrics of the process listener, in the text exposition format', async () => {
    const res = await fetch(`${http.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const declared = new Set(
      (await res.text())
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ').slice(2).join(' ')),
    );
    for (const family of [
      'punk_operator_reconcile_total counter',
      'punk_operator_reconcile_errors_total counter',
      'punk_operator_reconcile_duration_seconds histogram',
      'punk_operator_workqueue_depth gauge',
      'punk_operator_leader gauge',
      'process_cpu_seconds_total counter',
    ]) {
      assert.ok(declared.has(family), `# TYPE ${family}`);
    }
  });
});
