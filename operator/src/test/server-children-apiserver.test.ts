// The children of McpServers as a real kube-apiserver takes them: every object of every kind of server applied
// with server-side apply in dry-run (validation, defaulting and admission run, nothing is stored), owned by a
// real McpServer; the served McpServer accepted by the CRD; the conditions accepted by the status subresource.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1Deployment,
  type V1NetworkPolicy,
  type V1Service,
} from '@kubernetes/client-node';
import { mcpServerSchema, type McpServer } from '@punk/lib';
import { buildServerChildren } from '../server-children.js';
import { serverConditions } from '../server-status.js';
import { controlPlaneAvailability, startControlPlane, type ControlPlane } from './control-plane.js';
import { childrenOptions } from './server-fixtures.js';

const availability = controlPlaneAvailability();
const FIELD_MANAGER = 'punk-operator-test';
/** `value` as plain JSON data (the client's answers are class instances). */
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value ?? null));
const group = { group: 'mcp.punk.dev', version: 'v1alpha1', plural: 'mcpservers' };

/** Specs of every kind of server the operator runs, with every optional part of the children. */
const SPECS: Record<string, Record<string, unknown>> = {
  'stdio-image': {
    image: 'ghcr.io/acme/files-mcp:2.1.0',
    command: ['node', '/app/server.js'],
    args: ['--root', '$(DATA_DIR)'],
    env: [
      { name: 'DATA_DIR', value: '/mnt/data' },
      { name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'api-keys', key: 'acme' } } },
      { name: 'GITHUB_TOKEN', valueFrom: { credentialRef: { name: 'github', key: 'token' } } },
    ],
    replicas: 2,
    resources: { requests: { cpu: '250m' }, limits: { memory: '1Gi' } },
    sandbox: {
      runtimeClassName: 'gvisor',
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: 'files-data' } },
        { name: 'config', configMap: { name: 'files-config' } },
      ],
      egress: [
        { host: 'api.github.com', ports: [443] },
        { host: '*.googleapis.com' },
        { cidr: '10.20.0.0/16', ports: [5432] },
        { cidr: '2001:db8::/32', ports: [443] },
      ],
    },
  },
  'npm-package': {
    package: { name: '@modelcontextprotocol/server-memory', version: '2026.8.31' },
    sandbox: { egress: [{ cidr: '192.0.2.7' }] },
  },
  'npm-package-http': {
    package: { name: '@modelcontextprotocol/server-everything' },
    args: ['streamableHttp'],
    transport: 'streamable-http',
    port: 4101,
    env: [{ name: 'PORT', value: '4101' }],
  },
  'pypi-package': {
    package: { registry: 'pypi', name: 'mcp-server-fetch' },
    sandbox: { egress: [{ host: 'example.com', ports: [80, 443] }] },
  },
  'http-image': { image: 'ghcr.io/acme/search:1', transport: 'streamable-http', port: 3000, path: '/api/mcp' },
  'sse-image': { image: 'ghcr.io/acme/legacy:1', command: ['legacy-mcp'], transport: 'sse', port: 9000, path: '/sse' },
};

/** A podTemplate with every kind of merge: labels, annotations, maps, a merged container, a sidecar, volumes. */
const POD_TEMPLATE = {
  metadata: { labels: { team: 'search' }, annotations: { 'prometheus.io/scrape': 'true' } },
  spec: {
    nodeSelector: { 'kubernetes.io/arch': 'arm64' },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'mcp', effect: 'NoSchedule' }],
    containers: [
      {
        name: 'server',
        env: [{ name: 'LOG', value: 'debug' }],
        volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
        resources: { limits: { cpu: '2' } },
      },
      {
        name: 'log-shipper',
        image: 'ghcr.io/acme/shipper:1',
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
      },
    ],
    volumes: [{ name: 'cache', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } }],
  },
};

describe('McpServer children on a real kube-apiserver', { skip: availability.available ? false : availability.reason }, () => {
  let plane: ControlPlane;
  let objects: KubernetesObjectApi;
  let custom: CustomObjectsApi;
  const namespace = `children-${randomBytes(4).toString('hex')}`;
  const created = new Map<string, McpServer>();

  before(async () => {
    plane = await startControlPlane();
    objects = KubernetesObjectApi.makeApiClient(plane.kubeConfig);
    custom = plane.kubeConfig.makeApiClient(CustomObjectsApi);
    await plane.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    // Real McpServers, so the owner references carry real uids.
    for (const [name, spec] of Object.entries(SPECS)) {
      const body = { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name }, spec };
      created.set(name, mcpServerSchema.parse(await custom.createNamespacedCustomObject({ ...group, namespace, body })));
    }
  });
  after(() => plane?.stop());

  /** Applies `object` with server-side apply in dry-run and returns what the API server would store. */
  const dryRunApply = <T extends KubernetesObject>(object: T): Promise<T> =>
    objects.patch(object, undefined, 'All', FIELD_MANAGER, true, PatchStrategy.ServerSideApply);

  for (const name of Object.keys(SPECS)) {
    it(`accepts every child of the ${name} server, as built, with its podTemplate`, async () => {
      const server = structuredClone(created.get(name)!);
      assert.ok(server.metadata.uid && server.metadata.generation === 1);
      server.spec.podTemplate = POD_TEMPLATE;
      const { objects: children } = buildServerChildren(server, childrenOptions());
      assert.ok(children.length >= 3);
      for (const child of children) {
        const stored = await dryRunApply(child);
        const what = `${child.kind}/${child.metadata!.name}`;
        assert.equal(stored.metadata!.name, child.metadata!.name, what);
        assert.equal(stored.metadata!.namespace, namespace, what);
        assert.deepEqual(plain(stored.metadata!.labels), plain(child.metadata!.labels), `${what} labels`);
        assert.equal(stored.metadata!.ownerReferences![0]!.uid, server.metadata.uid, `${what} owner`);
        assert.ok(
          stored.metadata!.managedFields?.some((f) => f.manager === FIELD_MANAGER),
          `${what} is managed by ${FIELD_MANAGER}`,
        );
        if (child.kind === 'Service' && child.metadata!.name === name)
          assert.equal((stored as V1Service).spec!.clusterIP, 'None', `${what} is headless`);
        if (child.kind === 'NetworkPolicy') {
          // The sources of an ingress rule survive serialization (a lost `from` would admit every pod).
          const sent = (child as V1NetworkPolicy).spec!.ingress!;
          assert.deepEqual(
            plain((stored as V1NetworkPolicy).spec!.ingress!.map((rule) => rule._from)),
            plain(sent.map((rule) => rule._from)),
            `${what} ingress sources`,
          );
          assert.deepEqual(
            (stored as V1NetworkPolicy).spec!.egress!.length,
            (child as V1NetworkPolicy).spec!.egress!.length,
            `${what} egress rules`,
          );
        }
        if (child.kind === 'Deployment') {
          const pod = (stored as V1Deployment).spec!.template.spec!;
          const built = (child as V1Deployment).spec!.template.spec!;
          assert.deepEqual(plain(pod.securityContext), plain(built.securityContext), `${what} pod securityContext`);
          assert.deepEqual(
            plain(pod.containers.map((c) => [c.name, c.securityContext, c.resources])),
            plain(built.containers.map((c) => [c.name, c.securityContext, c.resources])),
            `${what} containers`,
          );
          assert.deepEqual(
            pod.volumes!.map((v) => v.name),
            built.volumes!.map((v) => v.name),
            `${what} volumes`,
          );
          assert.equal(pod.automountServiceAccountToken, false);
        }
      }
    });
  }

  it('validates in dry-run: a Deployment whose pods do not match its selector is refused', async () => {
    const { objects: children } = buildServerChildren(created.get('http-image')!, childrenOptions());
    const deployment = structuredClone(children.find((c) => c.kind === 'Deployment')) as V1Deployment;
    deployment.spec!.template.metadata!.labels!['mcp.punk.dev/server'] = 'someone-else';
    await assert.rejects(dryRunApply(deployment), (error: Error & { code?: number; body?: string }) => {
      assert.equal(error.code, 422);
      assert.match(String(error.body), /selector/);
      return true;
    });
  });

  it('refuses McpServer names that would clash with or not fit an egress proxy, at metadata.name (not <nil>)', async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['files-egress', { image: 'ghcr.io/acme/x:1', command: ['x'] }, /must not end in -egress/],
      [`s${'a'.repeat(56)}`, { package: { name: 'p' } }, /at most 56 characters when the server needs an egress proxy/],
      [
        `s${'a'.repeat(56)}`,
        { image: 'ghcr.io/acme/x:1', command: ['x'], sandbox: { egress: [{ host: 'api.example.com' }] } },
        /at most 56 characters/,
      ],
      [`s${'a'.repeat(70)}`, { image: 'ghcr.io/acme/x:1', command: ['x'] }, /DNS-1035 label/],
    ];
    for (const [name, spec, message] of cases) {
      const body = { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name }, spec };
      await assert.rejects(
        custom.createNamespacedCustomObject({ ...group, namespace, body, dryRun: 'All' }),
        (error: Error & { code?: number; body?: string }) => {
          assert.equal(error.code, 422, name);
          const status = JSON.parse(String(error.body)) as { message: string; details: { causes: { field: string }[] } };
          assert.match(status.message, message);
          assert.doesNotMatch(status.message, /<nil>/);
          assert.deepEqual(
            status.details.causes.map((cause) => cause.field),
            ['metadata.name'],
            name,
          );
          return true;
        },
      );
    }
    const fits = {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name: `s${'a'.repeat(55)}` },
      spec: { package: { name: 'p' } },
    };
    await custom.createNamespacedCustomObject({ ...group, namespace, body: fits, dryRun: 'All' });
  });

  it('accepts the served McpServer of each kind of server as an McpServer', async () => {
    const servedNamespace = `${namespace}-served`;
    await plane.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: servedNamespace } } });
    for (const server of created.values()) {
      const { served } = buildServerChildren(server, childrenOptions());
      const body = { ...served, metadata: { ...served.metadata, namespace: servedNamespace } };
      const stored = (await custom.createNamespacedCustomObject({
        ...group,
        namespace: servedNamespace,
        body,
        dryRun: 'All',
      })) as McpServer;
      assert.equal(stored.spec.url, served.spec.url);
    }
  });

  it("accepts the conditions in the McpServer's status subresource", async () => {
    const server = created.get('http-image')!;
    const conditions = serverConditions(
      { generation: 1, hasPod: true, published: false, pods: [], problem: { reason: 'InvalidSpec', message: 'spec.port: x' } },
      [],
      new Date(),
    );
    const current = (await custom.getNamespacedCustomObject({ ...group, namespace, name: server.metadata.name })) as McpServer;
    const body = { ...current, status: { observedGeneration: 1, conditions } };
    const stored = (await custom.replaceNamespacedCustomObjectStatus({
      ...group,
      namespace,
      name: server.metadata.name,
      body,
    })) as McpServer;
    assert.deepEqual(plain((stored.status as { conditions: unknown }).conditions), plain(conditions));
  });
});
