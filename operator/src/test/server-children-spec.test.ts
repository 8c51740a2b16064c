// What spec.podTemplate does to a server's pods (merged last, by the documented rule), and every spec the API
// server accepts but the operator refuses, with the field the error names.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubernetesObject, V1Deployment } from '@kubernetes/client-node';
import { buildServerChildren, SpecError } from '../server-children.js';
import { child, childrenOptions, container, mcpServer } from './server-fixtures.js';

/** Runs `build` and returns the SpecError it throws, failing when it throws none or another error. */
function specError(build: () => unknown): SpecError {
  try {
    build();
  } catch (error) {
    assert.ok(error instanceof SpecError, `expected a SpecError, got ${String(error)}`);
    assert.ok(error.message.startsWith(`${error.field}: `), `the message names the field: ${error.message}`);
    return error;
  }
  assert.fail('no SpecError thrown');
}

describe('spec.podTemplate', () => {
  const server = mcpServer('tuned', {
    image: 'ghcr.io/acme/tuned:1',
    command: ['tuned-mcp'],
    env: [{ name: 'A', value: '1' }],
    podTemplate: {
      metadata: { labels: { team: 'search' }, annotations: { 'prometheus.io/scrape': 'true' } },
      spec: {
        nodeSelector: { 'kubernetes.io/arch': 'arm64' },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'mcp', effect: 'NoSchedule' }],
        securityContext: { seccompProfile: { type: 'Localhost', localhostProfile: 'mcp.json' } },
        containers: [
          {
            name: 'server',
            env: [
              { name: 'A', value: '2' },
              { name: 'B', value: '3' },
            ],
            resources: { limits: { memory: '2Gi' } },
            volumeMounts: [{ name: 'cache', mountPath: '/cache' }],
          },
          { name: 'log-shipper', image: 'ghcr.io/acme/shipper:1', securityContext: { runAsUser: 1000 } },
        ],
        volumes: [
          { name: 'cache', emptyDir: { medium: 'Memory' } },
          { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
        ],
      },
    },
  });
  const deployment = child<V1Deployment>(buildServerChildren(server, childrenOptions()).objects, 'Deployment', 'tuned');
  const template = deployment.spec!.template;

  it('merges maps key by key, replaces scalars and other lists', () => {
    assert.equal(template.metadata!.labels!.team, 'search');
    assert.equal(template.metadata!.labels!['mcp.punk.dev/server'], 'tuned');
    assert.deepEqual(template.metadata!.annotations, {
      'mcp.punk.dev/secret-checksum': 'c0ffee',
      'kubectl.kubernetes.io/default-container': 'server',
      'prometheus.io/scrape': 'true',
    });
    assert.deepEqual(template.spec!.nodeSelector, { 'kubernetes.io/arch': 'arm64' });
    assert.equal(template.spec!.tolerations!.length, 1);
    assert.deepEqual(template.spec!.securityContext, {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'Localhost', localhostProfile: 'mcp.json' },
    });
  });

  it('merges the server container by name: env by name in place, resources by key, mounts added', () => {
    const c = container(deployment);
    assert.equal(c.image, 'ghcr.io/acme/tuned:1');
    const env = c.env!.map((e) => `${e.name}=${e.value}`);
    assert.ok(env.includes('A=2') && !env.includes('A=1'));
    assert.equal(env.at(-1), 'B=3');
    assert.deepEqual(c.resources, { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '1', memory: '2Gi' } });
    assert.deepEqual(c.volumeMounts!.at(-1), { name: 'cache', mountPath: '/cache' });
    assert.equal(c.securityContext!.readOnlyRootFilesystem, true);
  });

  it("adds a new container on top of the sandbox's container security context", () => {
    const sidecar = container(deployment, 'log-shipper');
    assert.equal(sidecar.image, 'ghcr.io/acme/shipper:1');
    assert.equal(sidecar.securityContext!.runAsUser, 1000);
    assert.equal(sidecar.securityContext!.readOnlyRootFilesystem, true);
    assert.equal(sidecar.securityContext!.allowPrivilegeEscalation, false);
    assert.deepEqual(sidecar.securityContext!.capabilities, { drop: ['ALL'] });
  });

  it('replaces a volume of the same name whole and appends new ones', () => {
    assert.deepEqual(template.spec!.volumes, [
      { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
      { name: 'home', emptyDir: { sizeLimit: '1Gi' } },
      { name: 'punk-bin', emptyDir: { sizeLimit: '256Mi' } },
      { name: 'cache', emptyDir: { medium: 'Memory' } },
    ]);
  });
});

describe('spec errors name their field', () => {
  // The name is set after parsing: mcpServerSchema refuses the names the builder refuses too (a second line of defence).
  const build =
    (spec: Record<string, unknown>, name = 'bad') =>
    () => {
      const server = mcpServer('bad', spec);
      server.metadata.name = name;
      return buildServerChildren(server, childrenOptions());
    };
  const image = { image: 'ghcr.io/acme/x:1', command: ['x'] };
  const withTemplate = (podTemplate: Record<string, unknown>) => build({ ...image, podTemplate });
  const cases: [string, () => unknown, string, RegExp][] = [
    ["a port on a stdio server (the bridge's)", build({ ...image, port: 8080 }), 'spec.port', /bridge on port 8080/],
    ['a stdio image without command', build({ image: 'ghcr.io/acme/x:1' }), 'spec.command', /entrypoint/],
    [
      'only a command (a local script, run only under punk up)',
      build({ command: ['node', 'server.mjs'] }),
      'spec.image',
      /only spec\.command runs as a local process under punk up; in the cluster it runs in a pod, which needs the image that holds the command: set spec\.image/,
    ],
    [
      'a name too long for the egress proxy',
      build({ ...image, sandbox: { egress: [{ host: 'example.com' }] } }, `s${'a'.repeat(56)}`),
      'metadata.name',
      /has 57 characters, too many for the egress proxy this server needs for a host in spec\.sandbox\.egress: its children are named sa+-egress, which must fit 63 characters, so use a name of at most 56/,
    ],
    [
      "a package server's name too long for its registry's egress proxy",
      build({ package: { name: 'x' } }, `s${'a'.repeat(60)}`),
      'metadata.name',
      /has 61 characters, too many for the egress proxy this server needs for its package registry \(npm\)/,
    ],
    [
      "a name ending in -egress (the proxy's suffix)",
      build(image, 'files-egress'),
      'metadata.name',
      /ends in -egress, which Punk keeps for the egress proxy of McpServer files/,
    ],
    [
      'a Secret header on a url server (the gateway reads McpCredentials only)',
      build({
        url: 'https://mcp.example.com/mcp',
        headers: [
          { name: 'X-A', value: 'a' },
          { name: 'Authorization', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } },
        ],
      }),
      'spec.headers[1].valueFrom.secretKeyRef',
      /McpCredential .*credentialRef/,
    ],
    [
      'a podTemplate memory limit that is not a quantity',
      withTemplate({ spec: { containers: [{ name: 'server', resources: { limits: { memory: 'lots' } } }] } }),
      'spec.podTemplate.spec.containers[0].resources.limits.memory',
      /not a Kubernetes quantity/,
    ],
    [
      'an egress host that is not a name',
      build({ ...image, sandbox: { egress: [{ host: 'https://example.com/' }] } }),
      'spec.sandbox.egress[0].host',
      /not a DNS name/,
    ],
    [
      'an address as egress host',
      build({ ...image, sandbox: { egress: [{ host: '10.1.2.3' }] } }),
      'spec.sandbox.egress[0].host',
      /address goes in cidr/,
    ],
    [
      'an egress cidr that is not a range',
      build({ ...image, sandbox: { egress: [{ host: 'a.example' }, { cidr: '10.0.0.0/33' }] } }),
      'spec.sandbox.egress[1].cidr',
      /not a CIDR: an IPv4 or IPv6 range/,
    ],
    [
      'an egress host with a label the proxy refuses (over 63 characters)',
      build({ ...image, sandbox: { egress: [{ host: `${'a'.repeat(64)}.example.com` }] } }),
      'spec.sandbox.egress[0].host',
      /not a DNS name/,
    ],
    [
      'an egress cidr with a port in it',
      build({ ...image, sandbox: { egress: [{ cidr: '10.0.0.0/8:443' }] } }),
      'spec.sandbox.egress[0].cidr',
      /not a CIDR/,
    ],
    [
      'an empty egress port list',
      build({ ...image, sandbox: { egress: [{ host: 'a.example', ports: [] }] } }),
      'spec.sandbox.egress[0].ports',
      /lists no port/,
    ],
    [
      'a hostPath sandbox volume',
      build({ ...image, sandbox: { volumes: [{ name: 'root', hostPath: { path: '/' } }] } }),
      'spec.sandbox.volumes[0].hostPath',
      /not a volume type the sandbox allows/,
    ],
    [
      "a sandbox volume named like Punk's",
      build({ ...image, sandbox: { volumes: [{ name: 'home', emptyDir: {} }] } }),
      'spec.sandbox.volumes[0].name',
      /volume of Punk's/,
    ],
    [
      'a sandbox volume without a name',
      build({ ...image, sandbox: { volumes: [{ emptyDir: {} }] } }),
      'spec.sandbox.volumes[0].name',
      /required/,
    ],
    [
      'a quantity that is not one',
      build({ ...image, resources: { limits: { cpu: 'lots' } } }),
      'spec.resources.limits.cpu',
      /not a Kubernetes quantity/,
    ],
    [
      'a request above its limit',
      build({ ...image, resources: { requests: { memory: '2Gi' }, limits: { memory: '1Gi' } } }),
      'spec.resources.requests.memory',
      /above the limit/,
    ],
    [
      'a variable listed twice',
      build({
        ...image,
        env: [
          { name: 'A', value: '1' },
          { name: 'A', value: '2' },
        ],
      }),
      'spec.env[1].name',
      /already set by spec.env\[0\]/,
    ],
    [
      'an unknown credential',
      build({ ...image, env: [{ name: 'T', valueFrom: { credentialRef: { name: 'nope' } } }] }),
      'spec.env[0].valueFrom.credentialRef.name',
      /no McpCredential nope/,
    ],
    [
      'a credential key not listed',
      build({ ...image, env: [{ name: 'T', valueFrom: { credentialRef: { name: 'github', key: 'password' } } }] }),
      'spec.env[0].valueFrom.credentialRef.key',
      /lists token, user/,
    ],
    [
      'a privileged container',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: { privileged: true } }] } }),
      'spec.podTemplate.spec.containers[0].securityContext.privileged',
      /privileged/,
    ],
    [
      'runAsUser 0 in a sidecar',
      withTemplate({ spec: { containers: [{ name: 'server' }, { name: 'side', image: 'y', securityContext: { runAsUser: 0 } }] } }),
      'spec.podTemplate.spec.containers[1].securityContext.runAsUser',
      /root/,
    ],
    [
      'runAsUser 0 for the pod',
      withTemplate({ spec: { securityContext: { runAsUser: 0 } } }),
      'spec.podTemplate.spec.securityContext.runAsUser',
      /root/,
    ],
    [
      'runAsNonRoot false',
      withTemplate({ spec: { securityContext: { runAsNonRoot: false } } }),
      'spec.podTemplate.spec.securityContext.runAsNonRoot',
      /never runs as root/,
    ],
    [
      'fsGroup 0',
      withTemplate({ spec: { securityContext: { fsGroup: 0 } } }),
      'spec.podTemplate.spec.securityContext.fsGroup',
      /root's group/,
    ],
    [
      'sysctls',
      withTemplate({ spec: { securityContext: { sysctls: [{ name: 'net.core.somaxconn', value: '1024' }] } } }),
      'spec.podTemplate.spec.securityContext.sysctls',
      /kernel/,
    ],
    [
      'an Unconfined seccomp profile',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: { seccompProfile: { type: 'Unconfined' } } }] } }),
      'spec.podTemplate.spec.containers[0].securityContext.seccompProfile.type',
      /Unconfined/,
    ],
    [
      'an added capability',
      withTemplate({
        spec: { containers: [{ name: 'server', securityContext: { capabilities: { add: ['NET_BIND_SERVICE', 'SYS_ADMIN'] } } }] },
      }),
      'spec.podTemplate.spec.containers[0].securityContext.capabilities.add',
      /not SYS_ADMIN/,
    ],
    [
      'a drop list without ALL',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: { capabilities: { drop: ['NET_RAW'] } } }] } }),
      'spec.podTemplate.spec.containers[0].securityContext.capabilities.drop',
      /ALL/,
    ],
    [
      'a writable root filesystem',
      withTemplate({ spec: { initContainers: [{ name: 'install-bridge', securityContext: { readOnlyRootFilesystem: false } }] } }),
      'spec.podTemplate.spec.initContainers[0].securityContext.readOnlyRootFilesystem',
      /must stay true/,
    ],
    [
      'privilege escalation',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: { allowPrivilegeEscalation: true } }] } }),
      'spec.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation',
      /false/,
    ],
    [
      'an unmasked /proc',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: { procMount: 'Unmasked' } }] } }),
      'spec.podTemplate.spec.containers[0].securityContext.procMount',
      /Default/,
    ],
    [
      'an SELinux type outside the container types',
      withTemplate({ spec: { securityContext: { seLinuxOptions: { type: 'spc_t' } } } }),
      'spec.podTemplate.spec.securityContext.seLinuxOptions.type',
      /container_t/,
    ],
    ['the host network', withTemplate({ spec: { hostNetwork: true } }), 'spec.podTemplate.spec.hostNetwork', /node's namespace/],
    ['the host PID namespace', withTemplate({ spec: { hostPID: true } }), 'spec.podTemplate.spec.hostPID', /node's namespace/],
    [
      'a hostPath volume',
      withTemplate({ spec: { volumes: [{ name: 'docker', hostPath: { path: '/var/run/docker.sock' } }] } }),
      'spec.podTemplate.spec.volumes[0].hostPath',
      /not a volume type/,
    ],
    [
      'a hostPort',
      withTemplate({ spec: { containers: [{ name: 'server', ports: [{ containerPort: 8080, hostPort: 80 }] }] } }),
      'spec.podTemplate.spec.containers[0].ports[0].hostPort',
      /port on the node/,
    ],
    [
      'another ServiceAccount',
      withTemplate({ spec: { serviceAccountName: 'admin' } }),
      'spec.podTemplate.spec.serviceAccountName',
      /ServiceAccount Punk makes/,
    ],
    [
      'a mounted token',
      withTemplate({ spec: { automountServiceAccountToken: true } }),
      'spec.podTemplate.spec.automountServiceAccountToken',
      /no ServiceAccount token/,
    ],
    [
      'a changed Punk label',
      withTemplate({ metadata: { labels: { 'mcp.punk.dev/server': 'other' } } }),
      'spec.podTemplate.metadata.labels["mcp.punk.dev/server"]',
      /set by Punk to "bad"/,
    ],
    [
      'a changed secret checksum',
      withTemplate({ metadata: { annotations: { 'mcp.punk.dev/secret-checksum': 'x' } } }),
      'spec.podTemplate.metadata.annotations["mcp.punk.dev/secret-checksum"]',
      /cannot be changed/,
    ],
    [
      'a projected ServiceAccount token in a podTemplate volume',
      withTemplate({
        spec: {
          volumes: [{ name: 'kube', projected: { sources: [{ configMap: { name: 'c' } }, { serviceAccountToken: { path: 'token' } }] } }],
        },
      }),
      'spec.podTemplate.spec.volumes[0].projected.sources[1].serviceAccountToken',
      /Kubernetes token/,
    ],
    [
      'a projected ServiceAccount token in a sandbox volume',
      build({
        ...image,
        sandbox: { volumes: [{ name: 'kube', projected: { sources: [{ serviceAccountToken: { path: 'token', audience: 'x' } }] } }] },
      }),
      'spec.sandbox.volumes[0].projected.sources[0].serviceAccountToken',
      /Kubernetes token/,
    ],
    [
      "a runtime class other than the sandbox's",
      build({ ...image, sandbox: { runtimeClassName: 'gvisor' }, podTemplate: { spec: { runtimeClassName: 'runc' } } }),
      'spec.podTemplate.spec.runtimeClassName',
      /sandbox's runtime class gvisor/,
    ],
    [
      'an unconfined AppArmor annotation',
      withTemplate({ metadata: { annotations: { 'container.apparmor.security.beta.kubernetes.io/server': 'unconfined' } } }),
      'spec.podTemplate.metadata.annotations["container.apparmor.security.beta.kubernetes.io/server"]',
      /loosen the sandbox's profile/,
    ],
    [
      'an unconfined seccomp annotation for the pod',
      withTemplate({ metadata: { annotations: { 'seccomp.security.alpha.kubernetes.io/pod': 'unconfined' } } }),
      'spec.podTemplate.metadata.annotations["seccomp.security.alpha.kubernetes.io/pod"]',
      /runtime\/default or docker\/default or localhost/,
    ],
    [
      'an unconfined seccomp annotation for a container',
      withTemplate({ metadata: { annotations: { 'container.seccomp.security.alpha.kubernetes.io/server': 'unconfined' } } }),
      'spec.podTemplate.metadata.annotations["container.seccomp.security.alpha.kubernetes.io/server"]',
      /loosen/,
    ],
    [
      'a null value',
      withTemplate({ spec: { containers: [{ name: 'server', securityContext: null }] } }),
      'spec.podTemplate.spec.containers[0].securityContext',
      /must not be null/,
    ],
    ['a key beside metadata and spec', withTemplate({ kind: 'Pod' }), 'spec.podTemplate.kind', /only metadata and spec/],
    [
      'a container without name',
      withTemplate({ spec: { containers: [{ image: 'y' }] } }),
      'spec.podTemplate.spec.containers[0].name',
      /merged by name/,
    ],
    [
      'an env entry without name',
      withTemplate({ spec: { containers: [{ name: 'server', env: [{ value: 'x' }] }] } }),
      'spec.podTemplate.spec.containers[0].env[0].name',
      /merged by name/,
    ],
    [
      'containers that are not a list',
      withTemplate({ spec: { containers: { name: 'server' } } }),
      'spec.podTemplate.spec.containers',
      /must be a list/,
    ],
    [
      'a security context that is not an object',
      withTemplate({ spec: { securityContext: 'none' } }),
      'spec.podTemplate.spec.securityContext',
      /must be an object/,
    ],
  ];
  for (const [story, run, field, message] of cases) {
    it(`${story}: ${field}`, () => {
      const error = specError(run);
      assert.equal(error.field, field);
      assert.match(error.message, message);
      assert.equal(error.reason, field.includes('credentialRef') ? 'CredentialMissing' : 'InvalidSpec');
    });
  }

  it("accepts what the sandbox allows: NET_BIND_SERVICE, a Localhost seccomp profile, a drop list with ALL, Punk's own label values", () => {
    const result = withTemplate({
      metadata: { labels: { 'mcp.punk.dev/server': 'bad' } },
      spec: {
        containers: [
          {
            name: 'server',
            securityContext: {
              capabilities: { add: ['NET_BIND_SERVICE'], drop: ['ALL', 'NET_RAW'] },
              seccompProfile: { type: 'Localhost', localhostProfile: 'p.json' },
            },
          },
        ],
      },
    })() as { objects: KubernetesObject[] };
    const c = container(child<V1Deployment>(result.objects, 'Deployment', 'bad'));
    assert.deepEqual(c.securityContext!.capabilities, { add: ['NET_BIND_SERVICE'], drop: ['ALL', 'NET_RAW'] });
  });

  it('accepts a podTemplate runtime class when the sandbox sets none or the same, and profile annotations the restricted standard allows', () => {
    const runtimeOf = (sandbox: Record<string, unknown> | undefined) => {
      const result = build({ ...image, ...(sandbox && { sandbox }), podTemplate: { spec: { runtimeClassName: 'gvisor' } } })() as {
        objects: KubernetesObject[];
      };
      return child<V1Deployment>(result.objects, 'Deployment', 'bad').spec!.template.spec!.runtimeClassName;
    };
    assert.equal(runtimeOf(undefined), 'gvisor');
    assert.equal(runtimeOf({ runtimeClassName: 'gvisor' }), 'gvisor');
    const annotations = {
      'seccomp.security.alpha.kubernetes.io/pod': 'runtime/default',
      'container.seccomp.security.alpha.kubernetes.io/server': 'localhost/mcp.json',
      'container.apparmor.security.beta.kubernetes.io/server': 'runtime/default',
    };
    const result = withTemplate({
      metadata: { annotations },
      spec: { volumes: [{ name: 'ca', projected: { sources: [{ configMap: { name: 'ca' } }] } }] },
    })() as { objects: KubernetesObject[] };
    const template = child<V1Deployment>(result.objects, 'Deployment', 'bad').spec!.template;
    assert.equal(template.metadata!.annotations!['container.seccomp.security.alpha.kubernetes.io/server'], 'localhost/mcp.json');
    assert.ok(template.spec!.volumes!.some((v) => v.name === 'ca'));
  });

  it("throws a TypeError, not a SpecError, for an McpServer without uid (a caller's mistake)", () => {
    const server = mcpServer('x', image);
    delete server.metadata.uid;
    assert.throws(() => buildServerChildren(server, childrenOptions()), TypeError);
  });
});
