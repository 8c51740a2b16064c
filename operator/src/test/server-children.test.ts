// What the operator makes of an McpServer: given a manifest, the children it applies (their sandbox, labels,
// owner references, probes, environment, network policies, egress proxy, resources), the McpServer the gateway
// serves, and the checksum that rolls pods out when a Secret changes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Container, V1Deployment, V1NetworkPolicy, V1Secret, V1Service } from '@kubernetes/client-node';
import { fileURLToPath } from 'node:url';
import { loadManifestDirectory, mcpServerSchema } from '@punk/lib';
import { buildServerChildren, referencedSecretNames, secretChecksum } from '../server-children.js';
import { child, childrenOptions, container, credentials, mcpServer } from './server-fixtures.js';
import { sharedServiceAccount } from '../shared-service-account.js';

const stdioImage = () =>
  mcpServer('files', {
    image: 'ghcr.io/acme/files-mcp:2.1.0',
    command: ['node', '/app/server.js'],
    args: ['--root', '$(DATA_DIR)'],
    env: [{ name: 'DATA_DIR', value: '/mnt/data' }],
    replicas: 2,
    sandbox: { runtimeClassName: 'gvisor', volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'files-data' } }] },
  });

function envOf(c: V1Container): Record<string, unknown> {
  return Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
}

describe('a stdio server from an image', () => {
  const server = stdioImage();
  const { objects, endpoint, served } = buildServerChildren(server, childrenOptions());
  const deployment = child<V1Deployment>(objects, 'Deployment', 'files');
  const pod = deployment.spec!.template.spec!;

  it("is a Service, a Deployment and a NetworkPolicy, in that order; the pods run as the namespace's shared ServiceAccount", () => {
    assert.deepEqual(
      objects.map((o) => `${o.apiVersion} ${o.kind}/${o.metadata!.namespace}/${o.metadata!.name}`),
      ['v1 Service/team-a/files', 'apps/v1 Deployment/team-a/files', 'networking.k8s.io/v1 NetworkPolicy/team-a/files'],
    );
    assert.equal(pod.serviceAccountName, 'punk-mcp-server');
    assert.deepEqual(sharedServiceAccount('team-a'), {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: {
        name: 'punk-mcp-server',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/component': 'mcp-server', 'app.kubernetes.io/managed-by': 'punk-operator' },
      },
      automountServiceAccountToken: false,
    });
  });

  it('labels every child and its pods, and makes the McpServer their controlling owner', () => {
    const labels = {
      'app.kubernetes.io/name': 'files',
      'app.kubernetes.io/instance': 'files',
      'app.kubernetes.io/component': 'mcp-server',
      'app.kubernetes.io/managed-by': 'punk-operator',
      'mcp.punk.dev/server': 'files',
    };
    for (const object of objects) {
      assert.deepEqual(object.metadata!.labels, labels, `${object.kind} labels`);
      assert.deepEqual(object.metadata!.ownerReferences, [
        {
          apiVersion: 'mcp.punk.dev/v1alpha1',
          kind: 'McpServer',
          name: 'files',
          uid: 'uid-of-files',
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
    assert.deepEqual(deployment.spec!.template.metadata!.labels, labels);
    assert.deepEqual(deployment.spec!.selector.matchLabels, {
      'mcp.punk.dev/server': 'files',
      'app.kubernetes.io/component': 'mcp-server',
    });
  });

  it('runs every container in the sandbox: non-root 65532, read-only root, no escalation, no capabilities, RuntimeDefault seccomp', () => {
    assert.deepEqual(pod.securityContext, {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    assert.equal(pod.automountServiceAccountToken, false);
    assert.equal(pod.serviceAccountName, 'punk-mcp-server');
    assert.equal(pod.enableServiceLinks, false);
    assert.equal(pod.runtimeClassName, 'gvisor');
    for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
      assert.deepEqual(
        c.securityContext,
        {
          runAsNonRoot: true,
          runAsUser: 65532,
          runAsGroup: 65532,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          privileged: false,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        },
        `${c.name} securityContext`,
      );
      assert.ok(
        c.resources?.requests?.cpu && c.resources.requests.memory && c.resources.limits?.cpu && c.resources.limits.memory,
        `${c.name} has requests and limits`,
      );
    }
  });

  it('copies the bridge in with an init container and starts the server behind it', () => {
    assert.deepEqual(
      pod.initContainers!.map((c) => ({ name: c.name, image: c.image, command: c.command, mounts: c.volumeMounts })),
      [
        {
          name: 'install-bridge',
          image: 'ghcr.io/punk/bridge:0.1.0',
          command: ['cp', '/opt/punk/bin/punk-bridge', '/punk-bin/punk-bridge'],
          mounts: [{ name: 'punk-bin', mountPath: '/punk-bin' }],
        },
      ],
    );
    const server = container(deployment);
    assert.equal(server.image, 'ghcr.io/acme/files-mcp:2.1.0');
    assert.deepEqual(server.command, ['/punk-bin/punk-bridge', 'serve', '--port', '8080', '--path', '/mcp', '--max-sessions', '4', '--']);
    assert.deepEqual(server.args, ['node', '/app/server.js', '--root', '$(DATA_DIR)']);
    assert.deepEqual(server.ports, [{ name: 'mcp', containerPort: 8080, protocol: 'TCP' }]);
  });

  it('gives the server writable /tmp and HOME, the bridge read-only, and the sandbox volumes under /mnt', () => {
    assert.deepEqual(
      pod.volumes!.map((v) => v.name),
      ['tmp', 'home', 'punk-bin', 'data'],
    );
    assert.ok(pod.volumes!.find((v) => v.name === 'tmp')!.emptyDir);
    assert.ok(pod.volumes!.find((v) => v.name === 'home')!.emptyDir);
    assert.deepEqual(
      pod.volumes!.find((v) => v.name === 'data'),
      { name: 'data', persistentVolumeClaim: { claimName: 'files-data' } },
    );
    assert.deepEqual(container(deployment).volumeMounts, [
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'home', mountPath: '/home/punk' },
      { name: 'punk-bin', mountPath: '/punk-bin', readOnly: true },
      { name: 'data', mountPath: '/mnt/data' },
    ]);
    const env = envOf(container(deployment));
    assert.equal(env.HOME, '/home/punk');
    assert.equal(env.TMPDIR, '/tmp');
    assert.equal(env.npm_config_cache, '/home/punk/.npm');
    assert.equal(env.UV_CACHE_DIR, '/home/punk/.cache/uv');
    assert.equal(env.DATA_DIR, '/mnt/data', "the spec's own variable, $(VAR) left to Kubernetes");
  });

  it("probes the bridge's /healthz and /readyz", () => {
    const server = container(deployment);
    assert.deepEqual(server.readinessProbe?.httpGet, { path: '/readyz', port: 'mcp' });
    assert.deepEqual(server.livenessProbe?.httpGet, { path: '/healthz', port: 'mcp' });
    assert.deepEqual(server.startupProbe?.httpGet, { path: '/healthz', port: 'mcp' });
  });

  it('runs spec.replicas pods with the default resources and the secret checksum on the template', () => {
    assert.equal(deployment.spec!.replicas, 2);
    assert.deepEqual(container(deployment).resources, { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } });
    assert.equal(deployment.spec!.template.metadata!.annotations!['mcp.punk.dev/secret-checksum'], 'c0ffee');
  });

  it("serves on 8080 through a headless Service that only the gateway's pods may reach, with egress to DNS only", () => {
    const service = child<V1Service>(objects, 'Service', 'files');
    assert.equal(service.spec!.type, 'ClusterIP');
    assert.equal(service.spec!.clusterIP, 'None', 'headless: no cluster IP to allocate');
    assert.equal(service.metadata!.annotations!['mcp.punk.dev/cluster-ip'], 'false');
    const clusterIP = child<V1Service>(
      buildServerChildren({ ...server, spec: { ...server.spec, service: { clusterIP: true } } }, childrenOptions()).objects,
      'Service',
      'files',
    );
    assert.equal(clusterIP.spec!.clusterIP, undefined, 'spec.service.clusterIP: true leaves the cluster IP to the API server');
    assert.equal(clusterIP.metadata!.annotations!['mcp.punk.dev/cluster-ip'], 'true');
    assert.deepEqual(service.spec!.selector, deployment.spec!.selector.matchLabels);
    assert.deepEqual(service.spec!.ports, [{ name: 'mcp', port: 8080, targetPort: 'mcp', protocol: 'TCP', appProtocol: 'http' }]);
    const policy = child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'files').spec!;
    assert.deepEqual(policy.podSelector!.matchLabels, deployment.spec!.selector.matchLabels);
    assert.deepEqual(policy.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(policy.ingress, [
      {
        _from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'punk-system' } },
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'punk-gateway' } },
          },
        ],
        ports: [{ protocol: 'TCP', port: 8080 }],
      },
    ]);
    assert.deepEqual(policy.egress, [
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
            podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          },
        ],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
    ]);
  });

  it('is served by the gateway as a streamable-http url server at the Service, keeping tools, sessionMode and timeout', () => {
    assert.equal(endpoint, 'http://files.team-a.svc.cluster.local:8080/mcp');
    assert.deepEqual(mcpServerSchema.parse(served), served, 'a valid McpServer');
    assert.deepEqual(served.metadata, { name: 'files', namespace: 'team-a' });
    assert.equal(served.spec.url, endpoint);
    assert.equal(served.spec.transport, 'streamable-http');
    assert.deepEqual(served.spec.env, []);
    assert.equal(served.spec.headers, undefined);
    assert.equal(served.spec.image, undefined);
    assert.equal(served.spec.command, undefined);
  });
});

describe('HTTP image servers', () => {
  it('keep spec.auth.tokenExchange when served by the gateway at their Service', () => {
    const tokenExchange = { audience: 'https://hr.example.test', scopes: ['hr:read'] };
    const server = mcpServer('hr', { image: 'ghcr.io/org/hr:1.0', transport: 'streamable-http', auth: { tokenExchange } });
    const { served } = buildServerChildren(server, childrenOptions());
    assert.deepEqual(served.spec.auth, { tokenExchange });
    assert.deepEqual(mcpServerSchema.parse(served), served, 'a valid McpServer');
  });
});

describe('package servers', () => {
  it("run an npm package with npx in the npm runner, behind the runner's own bridge", () => {
    const server = mcpServer('memory', {
      package: { name: '@modelcontextprotocol/server-memory', version: '2026.8.31' },
      args: ['--verbose'],
      path: '/rpc',
    });
    const { objects, endpoint } = buildServerChildren(server, childrenOptions());
    const deployment = child<V1Deployment>(objects, 'Deployment', 'memory');
    assert.equal(deployment.spec!.template.spec!.initContainers, undefined, 'no init container: the runner holds the bridge');
    const c = container(deployment);
    assert.equal(c.image, 'ghcr.io/punk/runner-npm:0.1.0');
    assert.deepEqual(c.command, ['/opt/punk/bin/punk-bridge', 'serve', '--port', '8080', '--path', '/rpc', '--max-sessions', '4', '--']);
    assert.deepEqual(c.args, ['npx', '-y', '@modelcontextprotocol/server-memory@2026.8.31', '--verbose']);
    assert.equal(endpoint, 'http://memory.team-a.svc.cluster.local:8080/rpc');
  });

  it('run a PyPI package with uvx in the pypi runner, the newest version when none is given', () => {
    const pinned = buildServerChildren(
      mcpServer('fetch', { package: { registry: 'pypi', name: 'mcp-server-fetch', version: '2025.4.7' } }),
      childrenOptions(),
    );
    const c = container(child<V1Deployment>(pinned.objects, 'Deployment', 'fetch'));
    assert.equal(c.image, 'ghcr.io/punk/runner-pypi:0.1.0');
    assert.deepEqual(c.args, ['uvx', 'mcp-server-fetch==2025.4.7']);
    const newest = buildServerChildren(mcpServer('fetch', { package: { registry: 'pypi', name: 'mcp-server-fetch' } }), childrenOptions());
    assert.deepEqual(container(child<V1Deployment>(newest.objects, 'Deployment', 'fetch')).args, ['uvx', 'mcp-server-fetch']);
    const npm = buildServerChildren(
      mcpServer('everything', { package: { name: '@modelcontextprotocol/server-everything' } }),
      childrenOptions(),
    );
    assert.deepEqual(container(child<V1Deployment>(npm.objects, 'Deployment', 'everything')).args, [
      'npx',
      '-y',
      '@modelcontextprotocol/server-everything',
    ]);
  });

  it('that serve HTTP themselves run in the runner on spec.port without a bridge, as punk up runs them', () => {
    const server = mcpServer('everything-http', {
      package: { registry: 'npm', name: '@modelcontextprotocol/server-everything', version: '2026.8.31' },
      args: ['streamableHttp'],
      transport: 'streamable-http',
      port: 4101,
      env: [{ name: 'PORT', value: '4101' }],
    });
    const { objects, endpoint, served } = buildServerChildren(server, childrenOptions());
    const c = container(child<V1Deployment>(objects, 'Deployment', 'everything-http'));
    assert.equal(c.image, 'ghcr.io/punk/runner-npm:0.1.0');
    assert.deepEqual(c.command, ['npx', '-y', '@modelcontextprotocol/server-everything@2026.8.31']);
    assert.deepEqual(c.args, ['streamableHttp']);
    assert.deepEqual(c.ports, [{ name: 'mcp', containerPort: 4101, protocol: 'TCP' }]);
    assert.deepEqual(c.readinessProbe?.tcpSocket, { port: 'mcp' });
    assert.equal(endpoint, 'http://everything-http.team-a.svc.cluster.local:4101/mcp');
    assert.equal(served.spec.transport, 'streamable-http');
  });

  it('that declare no port listen on 8080 in their pod, and $(PORT) in args and env expands to it', () => {
    const server = mcpServer('everything-http', {
      package: { registry: 'npm', name: '@modelcontextprotocol/server-everything', version: '2026.8.31' },
      args: ['streamableHttp', '--port=$(PORT)', '$$(PORT)'],
      transport: 'streamable-http',
      env: [
        { name: 'PORT', value: '$(PORT)' },
        { name: 'OTHER', value: '$(HOME)' },
      ],
    });
    const { objects, endpoint } = buildServerChildren(server, childrenOptions());
    const c = container(child<V1Deployment>(objects, 'Deployment', 'everything-http'));
    assert.deepEqual(c.args, ['streamableHttp', '--port=8080', '$$(PORT)'], 'an escaped reference stays for Kubernetes');
    assert.deepEqual(c.ports, [{ name: 'mcp', containerPort: 8080, protocol: 'TCP' }]);
    assert.equal(c.env?.find((e) => e.name === 'PORT')?.value, '8080');
    assert.equal(c.env?.find((e) => e.name === 'OTHER')?.value, '$(HOME)', 'other references are for Kubernetes to expand');
    assert.equal(endpoint, 'http://everything-http.team-a.svc.cluster.local:8080/mcp');
  });

  it('run spec.command instead of the package command when it is set', () => {
    const { objects } = buildServerChildren(
      mcpServer('custom', { package: { name: 'some-mcp' }, command: ['node', '/opt/x.js'], args: ['a'] }),
      childrenOptions(),
    );
    assert.deepEqual(container(child<V1Deployment>(objects, 'Deployment', 'custom')).args, ['node', '/opt/x.js', 'a']);
  });
});

describe('HTTP servers from an image', () => {
  it('listen on spec.port themselves, without a bridge, probed over TCP', () => {
    const server = mcpServer('search', {
      image: 'ghcr.io/acme/search:1',
      transport: 'streamable-http',
      port: 3000,
      path: '/api/mcp',
      args: ['--http'],
    });
    const { objects, endpoint, served } = buildServerChildren(server, childrenOptions());
    const deployment = child<V1Deployment>(objects, 'Deployment', 'search');
    const c = container(deployment);
    assert.equal(deployment.spec!.template.spec!.initContainers, undefined);
    assert.equal(c.command, undefined, "the image's entrypoint is kept");
    assert.deepEqual(c.args, ['--http']);
    assert.deepEqual(c.ports, [{ name: 'mcp', containerPort: 3000, protocol: 'TCP' }]);
    assert.deepEqual(c.readinessProbe?.tcpSocket, { port: 'mcp' });
    assert.deepEqual(c.livenessProbe?.tcpSocket, { port: 'mcp' });
    assert.equal(c.readinessProbe?.httpGet, undefined);
    assert.equal(child<V1Service>(objects, 'Service', 'search').spec!.ports![0]!.port, 3000);
    assert.equal(child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'search').spec!.ingress![0]!.ports![0]!.port, 3000);
    assert.equal(endpoint, 'http://search.team-a.svc.cluster.local:3000/api/mcp');
    assert.equal(served.spec.transport, 'streamable-http');
  });

  it('keep their sse transport in the served McpServer, at the cluster domain given', () => {
    const server = mcpServer('legacy', {
      image: 'ghcr.io/acme/legacy:1',
      command: ['legacy-mcp'],
      transport: 'sse',
      port: 9000,
      path: '/sse',
    });
    const { endpoint, served } = buildServerChildren(server, childrenOptions({ clusterDomain: 'corp.internal' }));
    assert.equal(endpoint, 'http://legacy.team-a.svc.corp.internal:9000/sse');
    assert.equal(served.spec.transport, 'sse');
    assert.equal(served.spec.url, endpoint);
  });
});

describe('the example manifests', () => {
  it('each build their children as they run with punk up', async () => {
    const loaded = await loadManifestDirectory(fileURLToPath(new URL('../../../examples/', import.meta.url)), 'default');
    assert.deepEqual(loaded.errors, []);
    assert.ok(loaded.servers.length > 0);
    for (const { server, file } of loaded.servers) {
      const owned = { ...server, metadata: { ...server.metadata, uid: `uid-${server.metadata.name}` } };
      if (server.spec.openapi?.file !== undefined) {
        // A document beside its manifest is for punk up: the cluster takes it as openapi.url or openapi.content.
        assert.throws(() => buildServerChildren(owned, childrenOptions()), { field: 'spec.openapi.file' }, file);
        continue;
      }
      const { objects, served } = buildServerChildren(owned, childrenOptions());
      assert.equal(objects.length >= 3 || server.spec.url !== undefined, true, file);
      assert.deepEqual(mcpServerSchema.parse(served), served, `${file}: the served McpServer is valid`);
    }
  });
});

describe('url servers', () => {
  it('have no children and are served as they are', () => {
    const server = mcpServer('remote', { url: 'https://mcp.example.com/mcp', headers: [{ name: 'Authorization', value: 'cred:token' }] });
    const result = buildServerChildren(server, childrenOptions());
    assert.deepEqual(result, { objects: [], endpoint: 'https://mcp.example.com/mcp', served: server });
  });
});

describe('environment', () => {
  const server = mcpServer('envs', {
    package: { name: 'envs-mcp' },
    env: [
      { name: 'LOG_LEVEL', value: 'debug' },
      { name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'api-keys', key: 'acme' } } },
      { name: 'GITHUB_TOKEN', valueFrom: { credentialRef: { name: 'github', key: 'token' } } },
      { name: 'SLACK_TOKEN', valueFrom: { credentialRef: { name: 'slack' } } },
      { name: 'PLAIN', valueFrom: { credentialRef: { name: 'plain' } } },
      { name: 'URL', value: 'https://$(LOG_LEVEL).example.com' },
      { name: 'HOME', value: '/home/punk/custom' },
    ],
  });
  const c = container(child<V1Deployment>(buildServerChildren(server, childrenOptions()).objects, 'Deployment', 'envs'));

  it('maps literals, Secret keys and McpCredential keys, leaving $(VAR) to Kubernetes', () => {
    const env = envOf(c);
    assert.equal(env.LOG_LEVEL, 'debug');
    assert.equal(env.URL, 'https://$(LOG_LEVEL).example.com');
    assert.deepEqual(env.API_KEY, { secretKeyRef: { name: 'api-keys', key: 'acme' } });
    assert.deepEqual(env.GITHUB_TOKEN, { secretKeyRef: { name: 'github-secret', key: 'token' } });
    assert.deepEqual(env.SLACK_TOKEN, { secretKeyRef: { name: 'slack-secret', key: 'bot-token' } }, 'the only key of the credential');
    assert.deepEqual(env.PLAIN, { secretKeyRef: { name: 'plain-secret', key: 'value' } }, 'the key `value` by default');
  });

  it("lets the spec replace a variable of Punk's in place, and keeps the spec's order", () => {
    const names = c.env!.map((e) => e.name);
    assert.equal(names.filter((n) => n === 'HOME').length, 1);
    assert.equal(names.indexOf('HOME'), 0);
    assert.equal(envOf(c).HOME, '/home/punk/custom');
    assert.deepEqual(names.slice(-6), ['LOG_LEVEL', 'API_KEY', 'GITHUB_TOKEN', 'SLACK_TOKEN', 'PLAIN', 'URL']);
  });

  it('lists the Secrets the pod reads, each once', () => {
    assert.deepEqual(
      referencedSecretNames(server, (name) => credentials[name]),
      ['api-keys', 'github-secret', 'plain-secret', 'slack-secret'],
    );
    assert.deepEqual(
      referencedSecretNames(server, () => undefined),
      ['api-keys'],
      'an unknown credential has no Secret yet',
    );
  });

  it('lists the Secrets of sandbox volumes and of the podTemplate too, except optional ones', () => {
    const withVolumes = mcpServer('vols', {
      image: 'ghcr.io/acme/x:1',
      command: ['x'],
      env: [{ name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'api-keys', key: 'acme' } } }],
      sandbox: { volumes: [{ name: 'certs', secret: { secretName: 'sandbox-certs' } }] },
      podTemplate: {
        spec: {
          volumes: [
            { name: 'tls', secret: { secretName: 'tls-secret' } },
            { name: 'maybe', secret: { secretName: 'optional-secret', optional: true } },
            { name: 'bundle', projected: { sources: [{ configMap: { name: 'c' } }, { secret: { name: 'projected-secret' } }] } },
          ],
          containers: [
            {
              name: 'server',
              env: [{ name: 'DB', valueFrom: { secretKeyRef: { name: 'db-secret', key: 'url' } } }],
              envFrom: [{ secretRef: { name: 'env-secret' } }, { configMapRef: { name: 'c' } }],
            },
            {
              name: 'side',
              image: 'y',
              envFrom: [{ secretRef: { name: 'api-keys' } }, { secretRef: { name: 'maybe-env', optional: true } }],
            },
          ],
          initContainers: [
            { name: 'init', image: 'y', env: [{ name: 'T', valueFrom: { secretKeyRef: { name: 'init-secret', key: 't' } } }] },
          ],
        },
      },
    });
    assert.deepEqual(
      referencedSecretNames(withVolumes, () => undefined),
      ['api-keys', 'db-secret', 'env-secret', 'init-secret', 'projected-secret', 'sandbox-certs', 'tls-secret'],
    );
  });
});

describe('egress', () => {
  it("allows declared CIDRs in the server's own policy, without a proxy when no host is named", () => {
    const server = mcpServer('db', {
      image: 'ghcr.io/acme/db-mcp:1',
      command: ['db-mcp'],
      sandbox: { egress: [{ cidr: '10.20.0.0/16', ports: [5432] }, { cidr: '192.0.2.7' }] },
    });
    const { objects } = buildServerChildren(server, childrenOptions());
    assert.equal(objects.length, 3);
    const egress = child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'db').spec!.egress!;
    assert.deepEqual(egress.slice(1), [
      { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
      { to: [{ ipBlock: { cidr: '192.0.2.7/32' } }] },
    ]);
    assert.equal(envOf(container(child<V1Deployment>(objects, 'Deployment', 'db'))).HTTPS_PROXY, undefined);
  });

  describe('with hosts, through an egress proxy', () => {
    const server = mcpServer('web', {
      image: 'ghcr.io/acme/web-mcp:1',
      command: ['web-mcp'],
      sandbox: {
        egress: [
          { host: 'API.GitHub.com', ports: [443] },
          { host: '*.googleapis.com', ports: [443, 8443, 443] },
          { cidr: '10.0.0.0/8', ports: [5432] },
        ],
      },
    });
    const { objects } = buildServerChildren(server, childrenOptions());
    const proxy = child<V1Deployment>(objects, 'Deployment', 'web-egress');

    it("adds the proxy's Deployment, Service and NetworkPolicy, labelled egress-proxy and owned by the McpServer", () => {
      assert.deepEqual(
        objects.map((o) => `${o.kind}/${o.metadata!.name}`),
        ['Service/web', 'Deployment/web', 'NetworkPolicy/web', 'Deployment/web-egress', 'Service/web-egress', 'NetworkPolicy/web-egress'],
      );
      for (const object of objects.slice(3)) {
        assert.equal(object.metadata!.labels!['app.kubernetes.io/component'], 'egress-proxy');
        assert.equal(object.metadata!.labels!['mcp.punk.dev/server'], 'web');
        assert.equal(object.metadata!.ownerReferences![0]!.uid, 'uid-of-web');
      }
    });

    it('runs punk-bridge egress-proxy from the bridge image with one --allow per entry, sandboxed', () => {
      const c = container(proxy, 'egress-proxy');
      assert.equal(c.image, 'ghcr.io/punk/bridge:0.1.0');
      assert.deepEqual(
        [...c.command!, ...c.args!],
        [
          '/opt/punk/bin/punk-bridge',
          'egress-proxy',
          '--port',
          '3128',
          '--allow',
          'api.github.com:443',
          '--allow',
          '*.googleapis.com:443,8443',
          '--allow',
          '10.0.0.0/8:5432',
        ],
      );
      assert.equal(c.securityContext!.readOnlyRootFilesystem, true);
      assert.deepEqual(c.securityContext!.capabilities, { drop: ['ALL'] });
      assert.equal(proxy.spec!.template.spec!.automountServiceAccountToken, false);
      assert.equal(proxy.spec!.template.spec!.securityContext!.runAsNonRoot, true);
      assert.deepEqual(child<V1Service>(objects, 'Service', 'web-egress').spec!.ports, [
        { name: 'proxy', port: 3128, targetPort: 'proxy', protocol: 'TCP' },
      ]);
    });

    it('points the server at the proxy for every name but loopback, in-cluster names too (the proxy checks them)', () => {
      const env = envOf(container(child<V1Deployment>(objects, 'Deployment', 'web')));
      for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'])
        assert.equal(env[name], 'http://web-egress.team-a.svc.cluster.local:3128');
      assert.equal(env.NO_PROXY, 'localhost,127.0.0.1,::1');
      assert.equal(env.no_proxy, env.NO_PROXY);
    });

    it('lets the server reach the proxy, and the proxy only DNS and the declared ports', () => {
      const serverEgress = child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'web').spec!.egress!;
      assert.deepEqual(serverEgress.at(-1), {
        to: [{ podSelector: { matchLabels: { 'mcp.punk.dev/server': 'web', 'app.kubernetes.io/component': 'egress-proxy' } } }],
        ports: [{ protocol: 'TCP', port: 3128 }],
      });
      const policy = child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'web-egress').spec!;
      assert.deepEqual(policy.podSelector!.matchLabels, { 'mcp.punk.dev/server': 'web', 'app.kubernetes.io/component': 'egress-proxy' });
      assert.deepEqual(policy.ingress, [
        {
          _from: [{ podSelector: { matchLabels: { 'mcp.punk.dev/server': 'web', 'app.kubernetes.io/component': 'mcp-server' } } }],
          ports: [{ protocol: 'TCP', port: 3128 }],
        },
      ]);
      assert.equal(policy.egress![0]!.ports![0]!.port, 53);
      assert.deepEqual(policy.egress![1], {
        to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16'] } }, { ipBlock: { cidr: '::/0', except: ['fe80::/10'] } }],
        ports: [
          { protocol: 'TCP', port: 443 },
          { protocol: 'TCP', port: 8443 },
        ],
      });
      assert.deepEqual(policy.egress![2], { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }], ports: [{ protocol: 'TCP', port: 5432 }] });
    });

    it('lets the proxy reach any port when a host names none', () => {
      const open = buildServerChildren(
        mcpServer('open', {
          image: 'ghcr.io/acme/x:1',
          command: ['x'],
          sandbox: { egress: [{ host: 'example.com' }, { host: 'example.org', ports: [443] }] },
        }),
        childrenOptions(),
      );
      const policy = child<V1NetworkPolicy>(open.objects, 'NetworkPolicy', 'open-egress').spec!;
      assert.equal(policy.egress![1]!.ports, undefined);
      assert.deepEqual(container(child<V1Deployment>(open.objects, 'Deployment', 'open-egress'), 'egress-proxy').args!.slice(3), [
        '--allow',
        'example.com',
        '--allow',
        'example.org:443',
      ]);
    });
  });
});

describe('package servers reach their registry', () => {
  const allowOf = (objects: readonly { kind?: string; metadata?: { name?: string } }[], name: string) =>
    container(child<V1Deployment>(objects as never, 'Deployment', `${name}-egress`), 'egress-proxy')
      .args!.slice(3)
      .filter((_, i) => i % 2 === 1);

  it('through an egress proxy allowing registry.npmjs.org:443 for npm, with the proxy environment set', () => {
    const { objects } = buildServerChildren(
      mcpServer('memory', { package: { name: '@modelcontextprotocol/server-memory' } }),
      childrenOptions(),
    );
    assert.deepEqual(allowOf(objects, 'memory'), ['registry.npmjs.org:443']);
    assert.equal(
      envOf(container(child<V1Deployment>(objects, 'Deployment', 'memory'))).HTTPS_PROXY,
      'http://memory-egress.team-a.svc.cluster.local:3128',
    );
    const policy = child<V1NetworkPolicy>(objects, 'NetworkPolicy', 'memory-egress').spec!;
    assert.deepEqual(policy.egress![1]!.ports, [{ protocol: 'TCP', port: 443 }]);
  });

  it("allowing pypi.org and files.pythonhosted.org for PyPI, after the spec's own entries, each once", () => {
    const { objects } = buildServerChildren(
      mcpServer('fetch', {
        package: { registry: 'pypi', name: 'mcp-server-fetch' },
        sandbox: {
          egress: [
            { host: 'example.com', ports: [443] },
            { host: 'pypi.org', ports: [443] },
          ],
        },
      }),
      childrenOptions(),
    );
    assert.deepEqual(allowOf(objects, 'fetch'), ['example.com:443', 'pypi.org:443', 'files.pythonhosted.org:443']);
  });

  it('at the registries the operator is configured with (host or host:port)', () => {
    const packageRegistries = { npm: ['npm.mirror.internal', 'npm2.mirror.internal:8443'], pypi: ['pypi.mirror.internal:8080'] };
    const npm = buildServerChildren(mcpServer('memory', { package: { name: 'm' } }), childrenOptions({ packageRegistries }));
    assert.deepEqual(allowOf(npm.objects, 'memory'), ['npm.mirror.internal:443', 'npm2.mirror.internal:8443']);
    const pypi = buildServerChildren(
      mcpServer('fetch', { package: { registry: 'pypi', name: 'f' } }),
      childrenOptions({ packageRegistries }),
    );
    assert.deepEqual(allowOf(pypi.objects, 'fetch'), ['pypi.mirror.internal:8080']);
  });

  it('refuse a configured registry that is not a host name, naming the option', () => {
    const build = (npm: string[]) => () =>
      buildServerChildren(mcpServer('memory', { package: { name: 'm' } }), childrenOptions({ packageRegistries: { npm, pypi: [] } }));
    assert.throws(
      build(['https://registry.example/']),
      /^Error: packageRegistries\.npm\[0\]: "https:\/\/registry\.example\/" is not host or host:port/,
    );
    assert.throws(build(['ok.example', '10.0.0.1:443']), /packageRegistries\.npm\[1\]\.host: is an address/);
    assert.throws(build(['registry.example:0']), /packageRegistries\.npm\[0\]\.ports/);
  });

  it('while image servers get no registry and no proxy of their own', () => {
    const { objects } = buildServerChildren(stdioImage(), childrenOptions());
    assert.equal(objects.length, 3);
  });
});

describe("the bridge's --max-sessions", () => {
  const maxSessions = (spec: Record<string, unknown>) => {
    const c = container(child<V1Deployment>(buildServerChildren(mcpServer('s', spec), childrenOptions()).objects, 'Deployment', 's'));
    const i = (c.command ?? []).indexOf('--max-sessions');
    return i === -1 ? undefined : Number(c.command![i + 1]);
  };
  const image = { image: 'ghcr.io/acme/x:1', command: ['x'] };

  it('fits the sessions (96Mi each) in the memory limit after the bridge: 4 at the default 512Mi', () => {
    assert.equal(maxSessions(image), 4);
    assert.equal(maxSessions({ ...image, resources: { limits: { memory: '1Gi' } } }), 9);
    assert.equal(maxSessions({ ...image, resources: { limits: { memory: '1G' } } }), 8);
    assert.equal(
      maxSessions({ package: { name: 'm' }, resources: { requests: { memory: '2Gi' } } }),
      20,
      'a request above the default limit raises it',
    );
  });

  it('is at least 1, and follows a memory limit the podTemplate sets on the server container', () => {
    assert.equal(maxSessions({ ...image, resources: { limits: { memory: '100Mi' } } }), 1);
    assert.equal(
      maxSessions({
        ...image,
        podTemplate: {
          spec: {
            containers: [
              { name: 'side', image: 'y' },
              { name: 'server', resources: { limits: { memory: '4Gi' } } },
            ],
          },
        },
      }),
      41,
    );
  });

  it('is not passed to a server that serves HTTP itself (no bridge)', () => {
    assert.equal(maxSessions({ image: 'ghcr.io/acme/x:1', transport: 'streamable-http', port: 3000 }), undefined);
  });
});

describe('resources', () => {
  const resourcesOf = (resources: unknown) =>
    container(
      child<V1Deployment>(
        buildServerChildren(mcpServer('r', { package: { name: 'x' }, resources }), childrenOptions()).objects,
        'Deployment',
        'r',
      ),
    ).resources;

  it('takes spec.resources over the defaults, key by key', () => {
    assert.deepEqual(resourcesOf({ limits: { memory: '1Gi' }, requests: { cpu: '200m' } }), {
      requests: { cpu: '200m', memory: '128Mi' },
      limits: { cpu: '1', memory: '1Gi' },
    });
  });

  it('keeps requests within limits when the spec sets one side only', () => {
    assert.deepEqual(resourcesOf({ requests: { cpu: '2', memory: '1Gi' } }), {
      requests: { cpu: '2', memory: '1Gi' },
      limits: { cpu: '2', memory: '1Gi' },
    });
    assert.deepEqual(resourcesOf({ limits: { cpu: '20m', memory: '64Mi' } }), {
      requests: { cpu: '20m', memory: '64Mi' },
      limits: { cpu: '20m', memory: '64Mi' },
    });
  });
});

describe('secretChecksum', () => {
  const secret = (name: string, uid: string, resourceVersion: string, data: Record<string, string> = { token: 'dG9rZW4=' }): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'team-a', uid, resourceVersion },
    data,
  });
  const a = secret('a', 'uid-a', '100');
  const b = secret('b', 'uid-b', '200');

  it('is a SHA-256 in hex, the same for the same Secrets in any order', () => {
    const sum = secretChecksum([a, b]);
    assert.match(sum, /^[0-9a-f]{64}$/);
    assert.equal(secretChecksum([b, a]), sum);
  });

  it("changes with an edit (resourceVersion), a recreated Secret (uid), a Secret's name, or a Secret more or less", () => {
    const sum = secretChecksum([a, b]);
    const others = [
      secretChecksum([secret('a', 'uid-a', '101'), b]),
      secretChecksum([secret('a', 'uid-a2', '100'), b]),
      secretChecksum([secret('c', 'uid-a', '100'), b]),
      secretChecksum([a]),
      secretChecksum([]),
      // the same characters split differently between uid and resourceVersion
      secretChecksum([secret('a', 'uid-a1', '00'), b]),
    ];
    assert.equal(new Set([sum, ...others]).size, others.length + 1);
  });

  it("does not depend on the Secrets' values, so it tells nothing about them", () => {
    const sum = secretChecksum([a, b]);
    assert.equal(secretChecksum([secret('a', 'uid-a', '100', { token: 'b3RoZXI=' }), b]), sum);
    assert.equal(secretChecksum([secret('a', 'uid-a', '100', {}), b]), sum);
  });
});
