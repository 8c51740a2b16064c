// What a resync costs an unchanged server, on a real kube-apiserver with the operator resyncing every 2 s: the
// API server's own request counter (apiserver_request_total on /metrics) shows no read or write of the children or
// the McpServers over several resyncs once every server settled, since the operator compares its informers' caches
// with what it applied last and sends only what differs; a child changed by hand is still put back (one apply). The
// servers exist before the operator starts, and its cold start reads no child either: the caches hold the metadata of
// every object of the children's kinds, listed after the servers were made, so a name they lack is free without a GET.
// Its writes are one apply per child of each server, one apply of the namespace's shared ServiceAccount (not one per
// server) and one status write per server: a reconcile that finds nothing new writes no status.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NetworkingV1Api } from '@kubernetes/client-node';
import { controlPlaneAvailability, requestApi } from './control-plane.js';
import { CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const RESYNC_MS = 2_000;
const RESOURCES = new Set(['deployments', 'services', 'serviceaccounts', 'networkpolicies', 'mcpservers']);

describe('a resync of unchanged McpServers', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('resync', { operator: false });
    ({ crs, ns } = fixture);
  });
  after(() => fixture?.stop());

  /** Requests the API server answered for the servers' kinds, by `VERB resource`, watches left out. */
  async function requestCounts(): Promise<Map<string, number>> {
    const { status, text } = await requestApi(fixture.plane.kubeConfig, 'GET', '/metrics');
    assert.equal(status, 200);
    const counts = new Map<string, number>();
    for (const line of text.split('\n')) {
      if (!line.startsWith('apiserver_request_total{')) continue;
      const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      if (!RESOURCES.has(labels.resource!) || labels.verb === 'WATCH') continue;
      const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
      counts.set(key, (counts.get(key) ?? 0) + Number(line.split(' ').at(-1)));
    }
    return counts;
  }

  const delta = (before: Map<string, number>, after: Map<string, number>) =>
    Object.fromEntries([...after].filter(([key, n]) => n !== (before.get(key) ?? 0)).map(([key, n]) => [key, n - (before.get(key) ?? 0)]));

  it('costs no API request, and a hand edit is still repaired', async () => {
    for (let i = 0; i < 5; i++)
      await crs.create('mcpservers', ns, {
        apiVersion: 'mcp.punk.dev/v1alpha1',
        kind: 'McpServer',
        metadata: { name: `quiet-${i}` },
        spec: {
          image: 'ghcr.io/example/s:1',
          command: ['s'],
          ...(i % 2 === 0 && { sandbox: { egress: [{ host: 'api.example.com', ports: [443] }] } }),
        },
      });
    const start = await requestCounts();
    await fixture.startOperator({ resyncMs: RESYNC_MS });
    await until('every server settled', async () => {
      const list = (await crs.api.listNamespacedCustomObject({
        group: 'mcp.punk.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'mcpservers',
      })) as {
        items: { metadata: { generation: number }; status?: { observedGeneration?: number } }[];
      };
      return list.items.length === 5 && list.items.every((o) => o.status?.observedGeneration === o.metadata.generation);
    });
    // Two resyncs for the reconciles the servers' own child events queued to finish.
    await new Promise((resolve) => setTimeout(resolve, 2 * RESYNC_MS));
    const before = await requestCounts();
    const reads = Object.keys(delta(start, before)).filter((key) => key.startsWith('GET ') && !key.endsWith(' mcpservers'));
    assert.deepEqual(reads, [], 'the cold start read no child (the caches tell which names are taken)');
    const writes = Object.fromEntries(Object.entries(delta(start, before)).filter(([key]) => !/^(GET|LIST) /.test(key)));
    // Five servers, three of them (0, 2, 4) with an egress proxy: its Deployment, Service and NetworkPolicy.
    assert.deepEqual(
      writes,
      {
        'APPLY deployments': 8,
        'APPLY services': 8,
        'APPLY networkpolicies': 8,
        'APPLY serviceaccounts': 1,
        'APPLY mcpservers/status': 5,
      },
      "the cold start's writes: each child once, one ServiceAccount for the namespace, one status per server",
    );
    const applies = [...before].filter(([key]) => / deployments$/.test(key) && !key.startsWith('GET ') && !key.startsWith('LIST '));
    assert.ok(
      applies.reduce((n, [, count]) => n + count, 0) >= 5,
      `the counter sees the operator's applies: ${JSON.stringify([...before])}`,
    );
    await new Promise((resolve) => setTimeout(resolve, 3 * RESYNC_MS + 500)); // three resyncs
    assert.deepEqual(delta(before, await requestCounts()), {}, 'no request for unchanged servers');

    const net = fixture.plane.kubeConfig.makeApiClient(NetworkingV1Api);
    await net.deleteNamespacedNetworkPolicy({ name: 'quiet-0', namespace: ns });
    await until('the NetworkPolicy put back', () => net.readNamespacedNetworkPolicy({ name: 'quiet-0', namespace: ns }));
  });
});
