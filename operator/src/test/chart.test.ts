// The Helm chart charts/punk with a real helm (built from its Go module by scripts/control-plane.mjs) and a real
// kube-apiserver: lint and template with the default values and every examples/ file, every rendered object
// accepted by a server-side dry-run apply, the schema refusing bad values by name, the chart's CRDs equal to
// crds/, the generated keys kept across an upgrade of a real release, and files/list-tools.mjs listing the tools
// of a real `punk up`.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { parseAllDocuments } from 'yaml';
import { controlPlaneAvailability, helmBinary, requestApi, startControlPlane, type ControlPlane } from './control-plane.js';

const availability = controlPlaneAvailability();
const helm = helmBinary(availability);
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const chart = join(repoRoot, 'charts', 'punk');
const exampleValues = readdirSync(join(chart, 'examples'))
  .filter((file) => file.endsWith('.yaml'))
  .sort();
/** The values files the chart is rendered with: undefined is the default values. */
const valueSets: (string | undefined)[] = [undefined, ...exampleValues];
const NAMESPACE = 'punk-system';
/** The namespace of the real release: the dry runs leave ServiceAccounts in NAMESPACE, which no release owns. */
const RELEASE_NAMESPACE = 'punk-release';

/** A Kubernetes object as helm renders it. */
interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** helm's own state (cache, config, data) in a throwaway directory, so the user's is untouched. */
const helmHome = mkdtempSync(join(tmpdir(), 'punk-helm-'));

/** Runs helm; returns its exit status and output. */
function runHelm(args: string[], env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(helm!, args, {
    encoding: 'utf8',
    env: {
      ...process.env,
      HELM_CACHE_HOME: join(helmHome, 'cache'),
      HELM_CONFIG_HOME: join(helmHome, 'config'),
      HELM_DATA_HOME: join(helmHome, 'data'),
      ...env,
    },
    maxBuffer: 64 * 1024 * 1024,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `-f charts/punk/examples/<file>`, or nothing for the default values. */
function valuesArgs(file: string | undefined): string[] {
  return file === undefined ? [] : ['-f', join(chart, 'examples', file)];
}

/** What a cluster with the Prometheus Operator serves beyond the defaults (examples/production.yaml needs it). */
const PROMETHEUS_OPERATOR_API = ['--api-versions', 'monitoring.coreos.com/v1/ServiceMonitor'];

/**
 * `helm template` of the chart (with its test hooks) into objects, for a cluster serving the ServiceMonitor API.
 * @throws AssertionError with helm's message when it fails.
 */
function template(file: string | undefined, extra: string[] = []): KubeObject[] {
  const result = runHelm(['template', 'punk', chart, '-n', NAMESPACE, ...PROMETHEUS_OPERATOR_API, ...valuesArgs(file), ...extra]);
  assert.equal(result.status, 0, `helm template ${file ?? '(default values)'} failed:\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((object): object is KubeObject => object !== null);
}

/** The object of `kind` and `name`. */
function find(objects: KubeObject[], kind: string, name: string): KubeObject {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  assert.ok(found, `no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}

interface Container {
  image: string;
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  envFrom?: { configMapRef: { name: string } }[];
}

/** The first container of a Deployment. */
function containerOf(deployment: KubeObject): Container {
  return (deployment as unknown as { spec: { template: { spec: { containers: Container[] } } } }).spec.template.spec.containers[0]!;
}

// Skipped only without Go; with Go and the binaries missing, the tests fail saying how to build them.
describe('the Helm chart charts/punk', { skip: availability.available || availability.goInstalled ? false : availability.reason }, () => {
  before(() => assert.ok(availability.available, availability.available ? '' : availability.reason));
  after(() => rmSync(helmHome, { recursive: true, force: true }));

  it('ships the CRDs of crds/ unchanged in its crds/', () => {
    const top = readdirSync(join(repoRoot, 'crds'))
      .filter((file) => file.endsWith('.yaml'))
      .sort();
    const ours = readdirSync(join(chart, 'crds'))
      .filter((file) => file.endsWith('.yaml'))
      .sort();
    assert.deepEqual(ours, top, 'charts/punk/crds/ holds other files than crds/: run `npm run crds`');
    for (const file of top) {
      assert.equal(
        readFileSync(join(chart, 'crds', file), 'utf8'),
        readFileSync(join(repoRoot, 'crds', file), 'utf8'),
        `charts/punk/crds/${file} differs from crds/${file}: run \`npm run crds\``,
      );
    }
  });

  for (const file of valueSets) {
    it(`passes helm lint --strict with ${file ?? 'the default values'}`, () => {
      const result = runHelm(['lint', '--strict', chart, '-n', NAMESPACE, ...valuesArgs(file)]);
      assert.equal(result.status, 0, `helm lint failed:\n${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    });
  }

  it('renders every component with probes, the pod security defaults and images from the image keys', () => {
    const objects = template(undefined, [
      '--set',
      'image.registry=registry.example.com/team',
      '--set',
      'image.tag=9.9.9',
      '--set',
      'gateway.image.tag=1.2.3',
    ]);
    for (const component of ['operator', 'mcp-front', 'gateway', 'governance', 'ledger']) {
      const deployment = find(objects, 'Deployment', `punk-${component}`) as unknown as {
        spec: {
          replicas: number;
          template: {
            metadata: { annotations: Record<string, string> };
            spec: {
              automountServiceAccountToken: boolean;
              volumes: { name: string; emptyDir?: object }[];
              securityContext: Record<string, unknown>;
              containers: (Container & Record<string, any>)[];
            };
          };
        };
      };
      const pod = deployment.spec.template.spec;
      const container = pod.containers[0]!;
      const tag = component === 'gateway' ? '1.2.3' : '9.9.9';
      assert.equal(container.image, `registry.example.com/team/punk-${component}:${tag}`);
      assert.equal(deployment.spec.replicas, 2);
      assert.deepEqual(container.livenessProbe.httpGet, { path: '/healthz', port: 'http' });
      assert.deepEqual(container.readinessProbe.httpGet, { path: '/readyz', port: 'http' });
      assert.deepEqual(container.ports, [
        { name: 'http', containerPort: 8080, protocol: 'TCP' },
        { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
      ]);
      assert.equal(container.securityContext.runAsUser, 65532);
      assert.equal(container.securityContext.readOnlyRootFilesystem, true);
      assert.deepEqual(container.securityContext.capabilities, { drop: ['ALL'] });
      assert.deepEqual(container.securityContext.seccompProfile, { type: 'RuntimeDefault' });
      assert.ok(
        pod.volumes.some((volume) => volume.name === 'tmp' && volume.emptyDir),
        `${component}: an emptyDir for /tmp`,
      );
      assert.equal(pod.automountServiceAccountToken, component === 'operator', `${component}: a token only for the operator`);
      assert.match(deployment.spec.template.metadata.annotations['checksum/config']!, /^[0-9a-f]{64}$/);
      find(objects, 'PodDisruptionBudget', `punk-${component}`);
      find(objects, 'Service', `punk-${component}`);
    }
    const operatorConfig = find(objects, 'ConfigMap', 'punk-operator') as unknown as { data: Record<string, string> };
    assert.equal(operatorConfig.data['PUNK_BRIDGE_IMAGE'], 'registry.example.com/team/punk-bridge:9.9.9');
    assert.equal(operatorConfig.data['PUNK_RUNNER_NPM_IMAGE'], 'registry.example.com/team/punk-runner-npm:9.9.9');
    assert.equal(operatorConfig.data['PUNK_RUNNER_PYPI_IMAGE'], 'registry.example.com/team/punk-runner-pypi:9.9.9');
    assert.equal(operatorConfig.data['PUNK_GATEWAY_POD_LABELS'], 'app.kubernetes.io/name=punk-gateway,app.kubernetes.io/instance=punk');
    const gatewayPods = (
      find(objects, 'Deployment', 'punk-gateway') as unknown as { spec: { template: { metadata: { labels: Record<string, string> } } } }
    ).spec.template.metadata.labels;
    assert.equal(gatewayPods['app.kubernetes.io/name'], 'punk-gateway');
    assert.equal(gatewayPods['app.kubernetes.io/instance'], 'punk');
  });

  it('gives each process the settings it needs, secrets from Secrets', () => {
    const objects = template('production.yaml');
    const config = (component: string) =>
      (find(objects, 'ConfigMap', `punk-${component}`) as unknown as { data: Record<string, string> }).data;
    const secretEnv = (component: string) =>
      Object.fromEntries(
        (containerOf(find(objects, 'Deployment', `punk-${component}`)).env ?? []).map((entry) => [
          entry.name,
          entry.valueFrom?.secretKeyRef,
        ]),
      );
    for (const component of ['operator', 'mcp-front', 'gateway', 'governance', 'ledger']) {
      assert.equal(config(component)['PUNK_HOST'], '0.0.0.0');
      assert.equal(config(component)['PUNK_PORT'], '8080');
      assert.deepEqual(secretEnv(component)['PUNK_NATS_URL'], { name: 'punk-connections', key: 'nats-url' });
    }
    assert.equal(config('mcp-front')['PUNK_PUBLIC_URL'], 'https://punk.example.com');
    assert.equal(config('mcp-front')['PUNK_AUTH_MODE'], 'on');
    assert.deepEqual(secretEnv('mcp-front')['PUNK_SESSION_SIGNING_KEY'], { name: 'punk-keys', key: 'session-signing-key' });
    assert.deepEqual(secretEnv('mcp-front')['PUNK_AUTH_BOOTSTRAP_ADMIN_KEY'], { name: 'punk-admin', key: 'bootstrap-admin-key' });
    assert.deepEqual(secretEnv('gateway')['PUNK_ENCRYPTION_KEY'], { name: 'punk-keys', key: 'encryption-key' });
    assert.deepEqual(secretEnv('gateway')['PUNK_DATABASE_URL'], { name: 'punk-database', key: 'database-url' });
    assert.deepEqual(secretEnv('ledger')['PUNK_DATABASE_URL'], { name: 'punk-database', key: 'database-url' });
    assert.deepEqual(
      secretEnv('governance')['PUNK_DATABASE_URL'],
      { name: 'punk-database', key: 'database-url' },
      'governance keeps approvals and the tenant settings',
    );
    assert.equal(
      config('gateway')['PUNK_UPSTREAM_ALLOWED_NETWORKS'],
      '10.96.0.0/12,10.244.0.0/16',
      'Service and pod networks: a headless Service resolves to pod addresses',
    );
    assert.equal(config('gateway')['PUNK_MANIFESTS'], '/var/run/punk/manifests');
    assert.equal(config('operator')['PUNK_OPERATOR_NAMESPACES'], '');
    assert.equal(config('operator')['PUNK_OPERATOR_LEASE_NAMESPACE'], NAMESPACE);
    const ingress = find(objects, 'Ingress', 'punk') as unknown as {
      metadata: { annotations: Record<string, string> };
      spec: { rules: { http: { paths: { path: string }[] } }[] };
    };
    assert.equal(ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-buffering'], 'off');
    assert.equal(ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'], '3600');
    const paths = ingress.spec.rules[0]!.http.paths.map((path) => path.path);
    assert.deepEqual(paths, ['/mcp', '/sse', '/servers', '/.well-known/oauth-protected-resource']);
    for (const component of ['mcp-front', 'gateway', 'governance', 'ledger']) {
      assert.equal(config(component)['OTEL_EXPORTER_OTLP_ENDPOINT'], 'http://otel-collector.observability:4318');
      assert.equal(config(component)['OTEL_TRACES_SAMPLER_ARG'], '0.1');
      const egress = (
        find(objects, 'NetworkPolicy', `punk-${component}`) as unknown as { spec: { egress: { ports?: { port: number | string }[] }[] } }
      ).spec.egress;
      assert.ok(
        egress.some((rule) => rule.ports?.some((port) => port.port === 4318)),
        `${component} may reach the OTLP receiver`,
      );
    }
    assert.equal(config('operator')['OTEL_EXPORTER_OTLP_ENDPOINT'], undefined, 'the operator exports no spans');
    assert.equal(
      template(undefined).some(
        (object) =>
          object.kind === 'ConfigMap' && (object as unknown as { data?: Record<string, string> }).data?.['OTEL_EXPORTER_OTLP_ENDPOINT'],
      ),
      false,
      'tracing is off by default',
    );
    find(objects, 'HorizontalPodAutoscaler', 'punk-mcp-front');
    const monitor = find(objects, 'ServiceMonitor', 'punk') as unknown as { spec: { endpoints: { port: string; path: string }[] } };
    assert.deepEqual(
      monitor.spec.endpoints.map((endpoint) => [endpoint.port, endpoint.path]),
      [['metrics', '/metrics']],
    );
    for (const component of ['operator', 'mcp-front', 'gateway', 'governance', 'ledger']) {
      assert.equal(config(component)['PUNK_METRICS_PORT'], '9090');
      // Scrapers reach the metrics port only: the ledger's and the front's APIs stay closed to them.
      const ingress = (
        find(objects, 'NetworkPolicy', `punk-${component}`) as unknown as {
          spec: { ingress: { from: unknown[]; ports: { port: string | number }[] }[] };
        }
      ).spec.ingress;
      const scrape = ingress.filter((rule) => JSON.stringify(rule.from).includes('monitoring'));
      assert.deepEqual(
        scrape.map((rule) => rule.ports.map((port) => port.port)),
        [['metrics']],
        `${component}: scrapers admitted to port metrics alone`,
      );
    }
    // The front serves the ledger API by passing it on to the ledger's Service: the one peer of the ledger's API port.
    assert.equal(config('mcp-front')['PUNK_LEDGER_URL'], 'http://punk-ledger:8080');
    const ledgerIngress = (
      find(objects, 'NetworkPolicy', 'punk-ledger') as unknown as {
        spec: { ingress: { from: Array<{ podSelector?: { matchLabels: Record<string, string> } }>; ports: { port: string | number }[] }[] };
      }
    ).spec.ingress.filter((rule) => rule.ports.some((port) => port.port === 'http'));
    assert.deepEqual(
      ledgerIngress.flatMap((rule) => rule.from.map((peer) => peer.podSelector?.matchLabels['app.kubernetes.io/name'])),
      ['punk-mcp-front'],
    );
    const dashboard = find(objects, 'ConfigMap', 'punk-dashboard') as unknown as { data: Record<string, string> };
    assert.match(
      JSON.parse(dashboard.data['punk.json']!)
        .panels.map((panel: { targets: { expr: string }[] }) => panel.targets[0]!.expr)
        .join('\n'),
      /mcp_server_operation_duration_seconds/,
    );
  });

  it('scopes the operator to Roles in each watched namespace with operator.watchNamespaces', () => {
    const objects = template('namespaced-operator.yaml');
    assert.equal(objects.filter((object) => object.kind === 'ClusterRole').length, 0, 'no ClusterRole');
    for (const namespace of ['team-a', 'team-b']) {
      const role = objects.find((object) => object.kind === 'Role' && object.metadata.namespace === namespace);
      assert.ok(role, `a Role in ${namespace}`);
    }
    const config = (find(objects, 'ConfigMap', 'punk-operator') as unknown as { data: Record<string, string> }).data;
    assert.equal(config['PUNK_OPERATOR_NAMESPACES'], 'team-a,team-b');
  });

  const refusals: { set: string; field: RegExp }[] = [
    { set: 'mcpFront.replicas=-1', field: /at '\/mcpFront\/replicas': minimum: got -1, want 0/ },
    { set: 'auth.mode=maybe', field: /at '\/auth\/mode': value must be one of 'off', 'on'/ },
    { set: 'gateway.replica=2', field: /at '\/gateway': additional properties 'replica' not allowed/ },
    { set: 'image.pullPolicy=Sometimes', field: /at '\/image\/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'/ },
    { set: 'tenant=Not_A_Label', field: /at '\/tenant': 'Not_A_Label' does not match pattern/ },
    { set: 'tracing.protocol=grpc', field: /at '\/tracing\/protocol': value must be one of 'http\/protobuf', 'http\/json'/ },
  ];
  for (const { set, field } of refusals) {
    it(`refuses --set ${set} naming the field`, () => {
      const result = runHelm(['template', 'punk', chart, '-n', NAMESPACE, '--set', set]);
      assert.notEqual(result.status, 0, `helm template --set ${set} succeeded`);
      assert.match(result.stderr, /values don't meet the specifications of the schema/);
      assert.match(result.stderr, field);
    });
  }

  /** A values file in the helm home holding `yaml` (to pass numbers as YAML reads them, not as --set does). */
  function valuesFile(name: string, yaml: string): string {
    const file = join(helmHome, name);
    writeFileSync(file, yaml);
    return file;
  }

  /** Asserts that `helm template` with `args` fails with a message matching `message`. */
  function assertRefused(args: string[], message: RegExp): void {
    const result = runHelm(['template', 'punk', chart, '-n', NAMESPACE, ...PROMETHEUS_OPERATOR_API, ...args]);
    assert.notEqual(result.status, 0, `helm template ${args.join(' ')} succeeded`);
    assert.match(result.stderr, message);
  }

  const secretEnvOf = (objects: KubeObject[], component: string) =>
    Object.fromEntries(
      (containerOf(find(objects, 'Deployment', `punk-${component}`)).env ?? []).map((entry) => [entry.name, entry.valueFrom?.secretKeyRef]),
    );

  it('takes the database URL from the bundled PostgreSQL, else postgres.url, else postgres.existingSecret', () => {
    const byUrl = template('namespaced-operator.yaml');
    for (const component of ['gateway', 'governance', 'ledger']) {
      assert.deepEqual(
        secretEnvOf(byUrl, component)['PUNK_DATABASE_URL'],
        { name: 'punk-connections', key: 'database-url' },
        `${component}: postgres.url wins over the default existingSecret`,
      );
    }
    const connections = find(byUrl, 'Secret', 'punk-connections') as unknown as { stringData: Record<string, string> };
    assert.equal(connections.stringData['database-url'], 'postgres://punk:change-me@postgres.databases.svc.cluster.local:5432/punk');
    // The pods' checksum of those URLs is salted with a value of that Secret: reading pods does not give a hash of the password.
    const salt = Buffer.from((connections as unknown as { data: Record<string, string> }).data['checksum-salt']!, 'base64').toString();
    assert.match(salt, /^[A-Za-z0-9]{32}$/);
    const checksums = new Set(
      ['operator', 'mcp-front', 'gateway', 'governance', 'ledger'].map(
        (component) =>
          (
            find(byUrl, 'Deployment', `punk-${component}`) as unknown as {
              spec: { template: { metadata: { annotations: Record<string, string> } } };
            }
          ).spec.template.metadata.annotations['checksum/connections'],
      ),
    );
    assert.equal(checksums.size, 1, 'one salt in one render');
    const unsalted = createHash('sha256')
      .update(`nats://nats.nats.svc.cluster.local:4222|postgres://punk:change-me@postgres.databases.svc.cluster.local:5432/punk`)
      .digest('hex');
    assert.notEqual([...checksums][0], unsalted);
    assert.equal(
      [...checksums][0],
      createHash('sha256')
        .update(
          `${(connections as unknown as { data: Record<string, string> }).data['checksum-salt']}|nats://nats.nats.svc.cluster.local:4222|postgres://punk:change-me@postgres.databases.svc.cluster.local:5432/punk`,
        )
        .digest('hex'),
    );
    assert.deepEqual(
      secretEnvOf(template(undefined), 'gateway')['PUNK_DATABASE_URL'],
      { name: 'punk-database', key: 'database-url' },
      'without url: existingSecret',
    );
    const bundled = template('dev-bundled.yaml', ['--set', 'postgres.url=postgres://u:p@db:5432/punk']);
    assert.equal(secretEnvOf(bundled, 'gateway')['PUNK_DATABASE_URL'], undefined, 'bundled wins: a plain value, no Secret');
    assert.equal(
      bundled.some((object) => object.kind === 'Secret' && object.metadata.name === 'punk-connections'),
      false,
      'no unused URL Secret',
    );
    const natsSecret = template(undefined, ['--set', 'nats.existingSecret.name=my-nats']);
    assert.deepEqual(
      secretEnvOf(natsSecret, 'governance')['PUNK_NATS_URL'],
      { name: 'my-nats', key: 'nats-url' },
      'nats.existingSecret wins over the default nats.url',
    );
  });

  it('refuses to publish an anonymous endpoint or admin API through the ingress, saying what to set', () => {
    const ingress = ['--set', 'ingress.enabled=true', '--set', 'ingress.host=punk.example.com'];
    assertRefused(
      ingress,
      /ingress\.enabled=true with auth\.mode=off would publish an anonymous MCP endpoint: set auth\.mode=on, or auth\.allowAnonymous=true/,
    );
    assertRefused(
      [...ingress, '--set', 'auth.allowAnonymous=true', '--set', 'ingress.adminApi=true'],
      /ingress\.adminApi=true with auth\.mode=off would publish the anonymous admin API.*set auth\.mode=on, or ingress\.adminApi=false/,
    );
    find(template(undefined, [...ingress, '--set', 'auth.allowAnonymous=true']), 'Ingress', 'punk');
  });

  it('routes the admin API and the dashboard through the ingress with ingress.adminApi', () => {
    const args = [
      '--set',
      'ingress.enabled=true',
      '--set',
      'ingress.host=punk.example.com',
      '--set',
      'auth.mode=on',
      '--set',
      'ingress.adminApi=true',
    ];
    const ingress = find(template(undefined, args), 'Ingress', 'punk') as unknown as {
      spec: { rules: { http: { paths: { path: string; pathType: string }[] } }[] };
    };
    const paths = ingress.spec.rules[0]!.http.paths.map((path) => `${path.path} ${path.pathType}`);
    assert.deepEqual(paths.slice(-2), ['/api/v1 Prefix', '/ui Prefix']);
  });

  it('keeps the gateway and the external services away from link-local addresses (cloud metadata) by default', () => {
    const policy = find(template(undefined), 'NetworkPolicy', 'punk-gateway') as unknown as {
      spec: { egress: { to?: { ipBlock?: { cidr: string; except?: string[] } }[] }[] };
    };
    const blocks = policy.spec.egress.flatMap((rule) => rule.to ?? []).flatMap((peer) => (peer.ipBlock ? [peer.ipBlock] : []));
    assert.ok(blocks.length > 0, 'ipBlock rules by default');
    for (const block of blocks) assert.deepEqual(block, { cidr: '0.0.0.0/0', except: ['169.254.0.0/16'] });
  });

  it('leaves out an egress rule whose peer list is empty (no access) instead of admitting every destination', () => {
    const objects = template(undefined, [
      '--set',
      'networkPolicy.nats=null',
      '--set-json',
      'networkPolicy.postgres=[]',
      '--set-json',
      'networkPolicy.apiServer=[]',
      '--set-json',
      'networkPolicy.gatewayEgress=[]',
    ]);
    for (const component of ['mcp-front', 'gateway', 'governance', 'ledger', 'operator']) {
      const egress = (
        find(objects, 'NetworkPolicy', `punk-${component}`) as unknown as {
          spec: { egress: { to?: unknown[]; ports?: { port: number | string }[] }[] };
        }
      ).spec.egress;
      for (const rule of egress) {
        const dns = rule.ports?.some((port) => port.port === 53);
        assert.ok(dns || (rule.to?.length ?? 0) > 0, `${component}: a rule without peers: ${JSON.stringify(rule)}`);
      }
      assert.equal(
        egress.some((rule) => rule.ports?.some((port) => [4222, 5432, 443].includes(port.port as number))),
        false,
        `${component}: no NATS, PostgreSQL or API server rule`,
      );
    }
    assertRefused(['--set-json', 'networkPolicy.nats=[{}]'], /at '\/networkPolicy\/nats\/0': minProperties: got 0, want 1/);
    assertRefused(
      ['--set-json', 'networkPolicy.gatewayEgress=[{"ipBlock":{"cidr":"everywhere"}}]'],
      /at '\/networkPolicy\/gatewayEgress\/0\/ipBlock\/cidr': 'everywhere' does not match pattern/,
    );
  });

  it('keeps the helm test Pod for helm test --logs, its script in an ordinary ConfigMap of another name', () => {
    const objects = template(undefined);
    const pod = find(objects, 'Pod', 'punk-test-list-tools') as unknown as {
      metadata: { annotations: Record<string, string> };
      spec: { volumes: { configMap?: { name: string } }[] };
    };
    assert.equal(pod.metadata.annotations['helm.sh/hook'], 'test');
    assert.equal(
      pod.metadata.annotations['helm.sh/hook-delete-policy'],
      'before-hook-creation',
      'no hook-succeeded: helm deletes those before reading logs',
    );
    const scripts = pod.spec.volumes.find((volume) => volume.configMap)!.configMap!.name;
    assert.notEqual(scripts, 'punk-test-list-tools');
    assert.equal(find(objects, 'ConfigMap', scripts).metadata.annotations?.['helm.sh/hook'], undefined, 'the script is no hook');
  });

  it('refuses a ServiceMonitor on a cluster without the Prometheus Operator, saying what is needed', () => {
    const result = runHelm(['template', 'punk', chart, '-n', NAMESPACE, ...valuesArgs('production.yaml')]);
    assert.notEqual(result.status, 0);
    assert.match(
      result.stderr,
      /metrics\.serviceMonitor\.enabled needs the Prometheus Operator's CRDs \(monitoring\.coreos\.com\/v1 ServiceMonitor\).*or set metrics\.serviceMonitor\.enabled=false/,
    );
  });

  it('refuses env keys and ingress annotations the chart sets, naming the value to use', () => {
    assertRefused(
      ['--set', 'mcpFront.env.PUNK_AUTH_MODE=on'],
      /mcpFront\.env\.PUNK_AUTH_MODE: PUNK_AUTH_MODE is set by the chart; set auth\.mode instead/,
    );
    assertRefused(['--set', 'gateway.env.PUNK_PORT=9000'], /gateway\.env\.PUNK_PORT: PUNK_PORT is set by the chart; the chart fixes it/);
    assertRefused(
      ['--set', 'mcpFront.env.PUNK_MCP_PATH=/rpc'],
      /mcpFront\.env\.PUNK_MCP_PATH: PUNK_MCP_PATH is set by the chart; the chart fixes it/,
    );
    assertRefused(
      ['--set', 'ledger.env.PUNK_DATABASE_URL=postgres://x'],
      /ledger\.env\.PUNK_DATABASE_URL: PUNK_DATABASE_URL is set by the chart; set postgres\.url or postgres\.existingSecret instead/,
    );
    assertRefused(
      ['--set-json', 'operator.extraEnv=[{"name":"PUNK_CLUSTER_DOMAIN","value":"x"}]'],
      /operator\.extraEnv PUNK_CLUSTER_DOMAIN: PUNK_CLUSTER_DOMAIN is set by the chart; set cluster\.domain instead/,
    );
    assertRefused(
      [
        '-f',
        join(chart, 'examples', 'production.yaml'),
        '--set-string',
        'ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-read-timeout=60',
      ],
      /ingress\.annotations\.nginx\.ingress\.kubernetes\.io\/proxy-read-timeout is set by the chart: set ingress\.streamTimeoutSeconds instead/,
    );
    // A variable of another component is fine: PUNK_MANIFESTS is the gateway's only.
    assert.equal(
      (
        find(template(undefined, ['--set', 'ledger.env.PUNK_MANIFESTS=/m']), 'ConfigMap', 'punk-ledger') as unknown as {
          data: Record<string, string>;
        }
      ).data['PUNK_MANIFESTS'],
      '/m',
    );
  });

  it('renders whole numbers without an exponent', () => {
    const numbers = valuesFile(
      'numbers.yaml',
      'ingress:\n  streamTimeoutSeconds: 10000000\ngateway:\n  env:\n    PUNK_CALL_TIMEOUT_MS: 10000000\n',
    );
    const objects = template('production.yaml', ['-f', numbers]);
    const ingress = find(objects, 'Ingress', 'punk') as unknown as { metadata: { annotations: Record<string, string> } };
    assert.equal(ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-read-timeout'], '10000000');
    assert.equal(ingress.metadata.annotations['nginx.ingress.kubernetes.io/proxy-send-timeout'], '10000000');
    assert.equal(
      (find(objects, 'ConfigMap', 'punk-gateway') as unknown as { data: Record<string, string> }).data['PUNK_CALL_TIMEOUT_MS'],
      '10000000',
    );
    const storage = valuesFile('storage.yaml', 'postgres:\n  bundled:\n    storage: 10000000000\n');
    const database = find(template('dev-bundled.yaml', ['-f', storage]), 'StatefulSet', 'punk-postgres') as unknown as {
      spec: { volumeClaimTemplates: { spec: { resources: { requests: { storage: string } } } }[] };
    };
    assert.equal(database.spec.volumeClaimTemplates[0]!.spec.resources.requests.storage, '10000000000');
  });

  it("adds <component>.extraEnv (EnvVar objects, valueFrom) after the chart's entries; each needs a name", () => {
    const objects = template(undefined, [
      '--set-json',
      'gateway.extraEnv=[{"name":"PUNK_ENCRYPTION_PREVIOUS_KEYS","valueFrom":{"secretKeyRef":{"name":"old-keys","key":"keys"}}}]',
    ]);
    const env = containerOf(find(objects, 'Deployment', 'punk-gateway')).env!;
    assert.deepEqual(env.at(-1), { name: 'PUNK_ENCRYPTION_PREVIOUS_KEYS', valueFrom: { secretKeyRef: { name: 'old-keys', key: 'keys' } } });
    assert.ok(env.findIndex((entry) => entry.name === 'PUNK_ENCRYPTION_KEY') < env.length - 1);
    assertRefused(['--set-json', 'gateway.extraEnv=[{"value":"x"}]'], /at '\/gateway\/extraEnv\/0': missing property 'name'/);
  });

  it('generates the keys under fixed data keys; secrets.*Key name keys of secrets.existingSecret only', () => {
    const generated = template(undefined, [
      '--set',
      'secrets.encryptionKeyKey=renamed',
      '--set',
      'secrets.sessionSigningKeyKey=renamed-too',
    ]);
    assert.deepEqual(Object.keys((find(generated, 'Secret', 'punk-keys') as unknown as { data: Record<string, string> }).data).sort(), [
      'encryption-key',
      'session-signing-key',
    ]);
    assert.deepEqual(secretEnvOf(generated, 'gateway')['PUNK_ENCRYPTION_KEY'], { name: 'punk-keys', key: 'encryption-key' });
    assert.deepEqual(secretEnvOf(generated, 'mcp-front')['PUNK_SESSION_SIGNING_KEY'], { name: 'punk-keys', key: 'session-signing-key' });
    const own = template(undefined, ['--set', 'secrets.existingSecret=my-keys', '--set', 'secrets.encryptionKeyKey=enc']);
    assert.deepEqual(secretEnvOf(own, 'gateway')['PUNK_ENCRYPTION_KEY'], { name: 'my-keys', key: 'enc' });
  });

  it('spreads each component over nodes softly by default, overridable', () => {
    const objects = template(undefined, [
      '--set-json',
      'ledger.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]',
    ]);
    const spreadOf = (component: string) =>
      (
        find(objects, 'Deployment', `punk-${component}`) as unknown as {
          spec: { template: { spec: { topologySpreadConstraints: Record<string, unknown>[] } } };
        }
      ).spec.template.spec.topologySpreadConstraints;
    for (const component of ['operator', 'mcp-front', 'gateway', 'governance']) {
      assert.deepEqual(spreadOf(component), [
        {
          maxSkew: 1,
          topologyKey: 'kubernetes.io/hostname',
          whenUnsatisfiable: 'ScheduleAnyway',
          labelSelector: { matchLabels: { 'app.kubernetes.io/name': `punk-${component}`, 'app.kubernetes.io/instance': 'punk' } },
        },
      ]);
    }
    assert.deepEqual(spreadOf('ledger'), [{ maxSkew: 1, topologyKey: 'topology.kubernetes.io/zone', whenUnsatisfiable: 'DoNotSchedule' }]);
  });

  it('refuses auth.mode=on without a public URL, saying what to set', () => {
    const result = runHelm(['template', 'punk', chart, '-n', NAMESPACE, '--set', 'auth.mode=on']);
    assert.notEqual(result.status, 0);
    assert.match(result.stderr, /auth\.mode=on needs the public URL.*set publicUrl, or ingress\.enabled with ingress\.host/);
  });

  describe('on a real kube-apiserver', () => {
    let plane: ControlPlane;
    let kubeconfigFile: string;
    before(async () => {
      plane = await startControlPlane();
      kubeconfigFile = join(helmHome, 'kubeconfig');
      writeFileSync(kubeconfigFile, plane.kubeConfig.exportConfig(), { mode: 0o600 });
      for (const namespace of [NAMESPACE, RELEASE_NAMESPACE, 'team-a', 'team-b']) {
        const { status, text } = await requestApi(plane.kubeConfig, 'POST', '/api/v1/namespaces', {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name: namespace },
        });
        assert.equal(status, 201, text);
      }
      // The Prometheus Operator's ServiceMonitor, reduced to what an apply needs: its group, version and kind.
      const { status, text } = await requestApi(plane.kubeConfig, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'servicemonitors.monitoring.coreos.com' },
        spec: {
          group: 'monitoring.coreos.com',
          scope: 'Namespaced',
          names: { plural: 'servicemonitors', singular: 'servicemonitor', kind: 'ServiceMonitor', listKind: 'ServiceMonitorList' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          ],
        },
      });
      assert.equal(status, 201, text);
      for (const deadline = Date.now() + 30_000; ;) {
        const discovery = await requestApi(plane.kubeConfig, 'GET', '/apis/monitoring.coreos.com/v1');
        if (discovery.status === 200 && discovery.text.includes('servicemonitors')) break;
        assert.ok(Date.now() < deadline, 'the ServiceMonitor CRD was not served within 30 s');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    });
    after(() => plane?.stop());

    /** The resource (plural) and scope of each apiVersion/kind, from the API server's discovery. */
    async function resourcesByKind(): Promise<Map<string, { plural: string; namespaced: boolean }>> {
      const byKind = new Map<string, { plural: string; namespaced: boolean }>();
      const groups = JSON.parse((await requestApi(plane.kubeConfig, 'GET', '/apis')).text) as {
        groups: { versions: { groupVersion: string }[] }[];
      };
      const groupVersions = ['v1', ...groups.groups.flatMap((group) => group.versions.map((version) => version.groupVersion))];
      for (const groupVersion of groupVersions) {
        const path = groupVersion === 'v1' ? '/api/v1' : `/apis/${groupVersion}`;
        const list = JSON.parse((await requestApi(plane.kubeConfig, 'GET', path)).text) as {
          resources: { name: string; kind: string; namespaced: boolean }[];
        };
        for (const resource of list.resources) {
          if (!resource.name.includes('/'))
            byKind.set(`${groupVersion}/${resource.kind}`, { plural: resource.name, namespaced: resource.namespaced });
        }
      }
      return byKind;
    }

    /**
     * Server-side apply of one object (field manager punk-chart-test, strict field validation), as a dry run unless
     * `dryRun` is false.
     * @throws AssertionError with the API server's message when it refuses the object.
     */
    async function apply(byKind: Map<string, { plural: string; namespaced: boolean }>, object: KubeObject, dryRun: boolean): Promise<void> {
      const resource = byKind.get(`${object.apiVersion}/${object.kind}`);
      assert.ok(resource, `the API server does not serve ${object.apiVersion} ${object.kind} (${object.metadata.name})`);
      const base = object.apiVersion.includes('/') ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
      const scope = resource.namespaced ? `/namespaces/${object.metadata.namespace ?? NAMESPACE}` : '';
      const query = `${dryRun ? 'dryRun=All&' : ''}fieldManager=punk-chart-test&fieldValidation=Strict&force=true`;
      const { status, text } = await requestApi(
        plane.kubeConfig,
        'PATCH',
        `${base}${scope}/${resource.plural}/${object.metadata.name}?${query}`,
        object,
        'application/apply-patch+yaml',
      );
      assert.ok(status === 200 || status === 201, `${object.kind} ${object.metadata.name}: HTTP ${status}: ${text.slice(0, 800)}`);
    }

    it('prints NOTES for the values: a cleartext warning without TLS, the port-forward URL of the admin API', () => {
      const install = runHelm(
        [
          'install',
          'punk-notes',
          chart,
          '-n',
          RELEASE_NAMESPACE,
          '--dry-run=server',
          '-f',
          join(chart, 'examples', 'production.yaml'),
          '--set',
          'ingress.tls.enabled=false',
        ],
        { KUBECONFIG: kubeconfigFile },
      );
      assert.equal(install.status, 0, install.stderr);
      assert.match(
        install.stdout,
        /WARNING: the public URL http:\/\/punk\.example\.com is plain HTTP: bearer tokens \(API keys\) travel in cleartext/,
      );
      assert.match(
        install.stdout,
        /POST http:\/\/127\.0\.0\.1:4100\/api\/v1\/api-keys through a port-forward \(ingress\.adminApi is off\)/,
      );
      assert.doesNotMatch(install.stdout, /POST http:\/\/punk\.example\.com/);
      assert.match(install.stdout, /kind: McpServer/, 'an McpServer to apply, inline');
      assert.doesNotMatch(install.stdout, /no way to authenticate is configured/, 'production.yaml names a bootstrap admin key');
      const locked = runHelm(
        [
          'install',
          'punk-notes',
          chart,
          '-n',
          RELEASE_NAMESPACE,
          '--dry-run=server',
          '-f',
          join(chart, 'examples', 'dev-bundled.yaml'),
          '--set',
          'auth.mode=on',
          '--set',
          'publicUrl=http://127.0.0.1:4100',
        ],
        { KUBECONFIG: kubeconfigFile },
      );
      assert.equal(locked.status, 0, locked.stderr);
      assert.match(
        locked.stdout,
        /WARNING: authentication is on, but no way to authenticate is configured: set auth\.bootstrapAdminKey\.existingSecret/,
      );
      assert.match(locked.stdout, /and NATS without authentication/);
    });

    for (const file of valueSets) {
      it(`accepts every object rendered with ${file ?? 'the default values'} in a server-side dry-run apply`, async () => {
        const byKind = await resourcesByKind();
        const objects = template(file);
        assert.ok(objects.length > 20, `only ${objects.length} objects`);
        // A Pod is admitted only when its ServiceAccount exists, which a dry run does not make: those first, for real.
        for (const object of objects.filter((o) => o.kind === 'ServiceAccount')) await apply(byKind, object, false);
        for (const object of objects) await apply(byKind, object, true);
      });
    }

    it("refuses, with its ValidatingAdmissionPolicy, a change to a McpServer Deployment's pod template by anyone but the operator", async () => {
      const byKind = await resourcesByKind();
      const objects = template(undefined).filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'));
      assert.deepEqual(
        objects.map((o) => o.kind),
        ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'],
        'on by default',
      );
      // The operator's RBAC, for real: the operator's own writes below pass RBAC, and only the policy refuses.
      const rbac = template(undefined).filter((o) => o.kind.startsWith('ClusterRole') && o.metadata.name.includes('-operator-'));
      assert.equal(rbac.length, 2);
      for (const object of [...objects, ...rbac]) await apply(byKind, object, false);
      const operator = { 'Impersonate-User': `system:serviceaccount:${NAMESPACE}:punk-operator` };
      const path = '/apis/apps/v1/namespaces/team-a/deployments';
      const deployment = (name: string) => ({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'punk-operator', 'mcp.punk.dev/server': name } },
        spec: {
          selector: { matchLabels: { 'mcp.punk.dev/server': name } },
          template: {
            metadata: { labels: { 'mcp.punk.dev/server': name } },
            spec: { automountServiceAccountToken: false, containers: [{ name: 'server', image: 'example.com/server:1' }] },
          },
        },
      });
      // The policy takes effect once the API server has compiled it: until then a create by the test's user passes.
      let refused: { status: number; text: string } | undefined;
      for (let i = 0, deadline = Date.now() + 60_000; !refused; i++) {
        const attempt = await requestApi(plane.kubeConfig, 'POST', path, deployment(`forged-${i}`));
        if (attempt.status >= 400) refused = attempt;
        else assert.ok(Date.now() < deadline, 'the admission policy took no effect within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.equal(refused.status, 403, refused.text);
      assert.match(refused.text, /only the Punk operator \(system:serviceaccount:punk-system:punk-operator\) creates Deployments labelled/);

      const created = await requestApi(plane.kubeConfig, 'POST', path, deployment('search'), 'application/json', operator);
      assert.equal(created.status, 201, created.text);
      const patch = (body: object, headers: Record<string, string> = {}) =>
        requestApi(plane.kubeConfig, 'PATCH', `${path}/search`, body, 'application/strategic-merge-patch+json', headers);
      for (const podSpec of [
        { hostNetwork: true },
        { volumes: [{ name: 'node', hostPath: { path: '/' } }] },
        { containers: [{ name: 'sidecar', image: 'example.com/tool:1', securityContext: { privileged: true } }] },
        { containers: [{ name: 'server', securityContext: { capabilities: { add: ['NET_ADMIN'] } } }] },
        { automountServiceAccountToken: true },
      ]) {
        const answer = await patch({ spec: { template: { spec: podSpec } } });
        assert.equal(answer.status, 403, `${JSON.stringify(podSpec)}: ${answer.text}`);
        assert.match(
          answer.text,
          /spec\.template\.spec of Deployment team-a\/search is the sandbox of an McpServer; only the Punk operator/,
        );
      }
      // What the Deployment controller, the garbage collector and `kubectl rollout restart` do stays open.
      const restart = await patch({ spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': 'now' } } } } });
      assert.equal(restart.status, 200, restart.text);
      const annotate = await patch({ metadata: { annotations: { 'deployment.kubernetes.io/revision': '2' } } });
      assert.equal(annotate.status, 200, annotate.text);
      // The operator itself may change it.
      const byOperator = await patch({ spec: { template: { spec: { terminationGracePeriodSeconds: 5 } } } }, operator);
      assert.equal(byOperator.status, 200, byOperator.text);
      // The operator reads the ConfigMaps of openapi McpServers (spec.openapi.configMapKeyRef): get, list and watch.
      const configMaps = '/api/v1/namespaces/team-a/configmaps';
      const got = await requestApi(plane.kubeConfig, 'GET', `${configMaps}/absent`, undefined, 'application/json', operator);
      assert.equal(got.status, 404, got.text);
      const listed = await requestApi(plane.kubeConfig, 'GET', configMaps, undefined, 'application/json', operator);
      assert.equal(listed.status, 200, listed.text);
      const watched = await requestApi(
        plane.kubeConfig,
        'GET',
        `${configMaps}?watch=1&timeoutSeconds=1`,
        undefined,
        'application/json',
        operator,
      );
      assert.equal(watched.status, 200, watched.text);
      // It reconciles McpWorkflows: lists and watches them, and writes their status (404: allowed, and no such object).
      const workflows = '/apis/mcp.punk.dev/v1alpha1/namespaces/team-a/mcpworkflows';
      // A watch of a kind whose CRD was just installed may meet 429 "storage is (re)initializing": ask again as
      // clients do, after its Retry-After (1 s).
      const watchWorkflows = () =>
        requestApi(plane.kubeConfig, 'GET', `${workflows}?watch=1&timeoutSeconds=1`, undefined, 'application/json', operator);
      let workflowList = await watchWorkflows();
      for (let attempt = 0; workflowList.status === 429 && attempt < 30; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        workflowList = await watchWorkflows();
      }
      assert.equal(workflowList.status, 200, workflowList.text);
      const workflowStatus = await requestApi(
        plane.kubeConfig,
        'PATCH',
        `${workflows}/absent/status`,
        { status: {} },
        'application/merge-patch+json',
        operator,
      );
      assert.equal(workflowStatus.status, 404, workflowStatus.text);
    });

    it('keeps the generated keys across helm upgrade and uninstall, and rolls pods when their settings change', async () => {
      const kube = { KUBECONFIG: kubeconfigFile };
      const install = runHelm(
        [
          'install',
          'punk',
          chart,
          '-n',
          RELEASE_NAMESPACE,
          '-f',
          join(chart, 'examples', 'dev-bundled.yaml'),
          '--wait=false',
          '--timeout',
          '60s',
        ],
        kube,
      );
      assert.equal(install.status, 0, install.stderr);
      // NOTES.txt: the bundled services' warning, the port-forward, and how to connect Claude Code.
      assert.match(install.stdout, /WARNING: the bundled NATS and PostgreSQL are NOT FOR PRODUCTION/);
      assert.match(install.stdout, /kubectl -n punk-release port-forward service\/punk-mcp-front 4100:80/);
      assert.match(install.stdout, /claude mcp add --transport http punk http:\/\/127\.0\.0\.1:4100\/mcp/);
      const readSecret = async (name: string) => {
        const { status, text } = await requestApi(plane.kubeConfig, 'GET', `/api/v1/namespaces/${RELEASE_NAMESPACE}/secrets/${name}`);
        assert.equal(status, 200, text);
        return (JSON.parse(text) as { data: Record<string, string> }).data;
      };
      const readChecksum = async (component: string) => {
        const { text } = await requestApi(
          plane.kubeConfig,
          'GET',
          `/apis/apps/v1/namespaces/${RELEASE_NAMESPACE}/deployments/punk-${component}`,
        );
        return (JSON.parse(text) as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec.template.metadata
          .annotations['checksum/config'];
      };
      const keys = await readSecret('punk-keys');
      const encryptionKey = Buffer.from(Buffer.from(keys['encryption-key']!, 'base64').toString(), 'base64');
      assert.equal(encryptionKey.length, 32, 'PUNK_ENCRYPTION_KEY decodes to 32 bytes');
      assert.ok(Buffer.from(keys['session-signing-key']!, 'base64').length >= 32, 'PUNK_SESSION_SIGNING_KEY has at least 32 characters');
      const password = await readSecret('punk-postgres');
      const frontChecksum = await readChecksum('mcp-front');
      const ledgerChecksum = await readChecksum('ledger');

      // A data key an older release wrote (a renamed secrets.encryptionKeyKey) stays: no upgrade drops a key.
      const legacy = await requestApi(
        plane.kubeConfig,
        'PATCH',
        `/api/v1/namespaces/${RELEASE_NAMESPACE}/secrets/punk-keys`,
        { data: { 'legacy-key': keys['encryption-key'] } },
        'application/merge-patch+json',
      );
      assert.equal(legacy.status, 200, legacy.text);
      const keysBefore = await readSecret('punk-keys');
      assert.ok(keysBefore['legacy-key']);
      // Renaming the *Key values must not touch the generated Secret (they name keys of secrets.existingSecret).
      const upgrade = runHelm(
        [
          'upgrade',
          'punk',
          chart,
          '-n',
          RELEASE_NAMESPACE,
          '-f',
          join(chart, 'examples', 'dev-bundled.yaml'),
          '--set',
          'mcpFront.env.PUNK_MAX_SESSIONS=500',
          '--set',
          'secrets.encryptionKeyKey=renamed',
          '--wait=false',
          '--timeout',
          '60s',
        ],
        kube,
      );
      assert.equal(upgrade.status, 0, upgrade.stderr);
      assert.deepEqual(await readSecret('punk-keys'), keysBefore, 'an upgrade keeps the keys, every data key');
      assert.deepEqual(await readSecret('punk-postgres'), password, 'an upgrade keeps the bundled database password');
      assert.notEqual(await readChecksum('mcp-front'), frontChecksum, 'a changed setting rolls the front');
      assert.equal(await readChecksum('ledger'), ledgerChecksum, 'an unchanged component keeps its pods');

      const uninstall = runHelm(['uninstall', 'punk', '-n', RELEASE_NAMESPACE, '--wait=false'], kube);
      assert.equal(uninstall.status, 0, uninstall.stderr);
      assert.deepEqual(await readSecret('punk-keys'), keysBefore, 'uninstall leaves the keys behind (helm.sh/resource-policy: keep)');
      const deployment = await requestApi(
        plane.kubeConfig,
        'GET',
        `/apis/apps/v1/namespaces/${RELEASE_NAMESPACE}/deployments/punk-mcp-front`,
      );
      assert.equal(deployment.status, 404, 'uninstall removed the Deployments');
    });
  });
});

describe('files/list-tools.mjs against a real punk up', () => {
  const script = join(chart, 'files', 'list-tools.mjs');
  let punk: { url: string; stop: () => Promise<void> } | undefined;
  const adminKey = 'a'.repeat(20) + 'chart-test-bootstrap-key';
  const manifests = mkdtempSync(join(tmpdir(), 'punk-chart-manifests-'));

  /** Starts `punk up` on the example servers everything and memory, on a free port; resolves with its /mcp URL. */
  async function startPunk(env: Record<string, string>): Promise<{ url: string; stop: () => Promise<void> }> {
    const child = spawn(
      process.execPath,
      [join(repoRoot, 'services/cli/dist/main.js'), 'up', '--manifests', manifests, '--port', '0', '--ephemeral'],
      {
        cwd: manifests,
        env: { ...process.env, PUNK_LOG_LEVEL: 'warn', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stderr.on('data', (chunk) => (output += chunk));
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`punk up not ready within 150 s:\n${output}`));
      }, 150_000);
      child.stdout.on('data', (chunk) => {
        output += chunk;
        const match = /Punk is ready in \d+ ms: (http:\/\/[^\s/]+)\//.exec(output);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`punk up exited (${code}):\n${output}`));
      });
    });
    return {
      url: `${base}/mcp`,
      stop: async () => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      },
    };
  }

  /** Runs the script with `args` and `env`; resolves with its exit code and output. */
  function listTools(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.once('exit', (code) => resolve({ code, stdout, stderr }));
    });
  }

  before(() => {
    // Two of the example servers keep start-up short on a loaded machine.
    for (const file of ['everything.yaml', 'memory.yaml']) copyFileSync(join(repoRoot, 'examples', file), join(manifests, file));
  });
  after(async () => {
    await punk?.stop();
    rmSync(manifests, { recursive: true, force: true });
  });

  /** The tool names the SDK client lists at `url`, every page. */
  async function sdkToolNames(url: string): Promise<string[]> {
    const sdk = new Client({ name: 'punk-chart-test', version: '1.0.0' });
    await sdk.connect(new StreamableHTTPClientTransport(new URL(url)));
    const expected: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await sdk.listTools(cursor === undefined ? {} : { cursor });
      expected.push(...page.tools.map((tool) => tool.name));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    await sdk.close();
    return expected;
  }

  it('prints the tool names the SDK client lists', async () => {
    punk = await startPunk({});
    const expected = await sdkToolNames(punk.url);
    assert.ok(
      expected.some((name) => name.startsWith('everything__')) && expected.some((name) => name.startsWith('memory__')),
      `both example servers listed: ${expected.join(', ')}`,
    );

    const result = await listTools([punk.url]);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(result.stdout.trim().split('\n'), expected);
    assert.match(result.stderr, new RegExp(`${expected.length} tools`));
    await punk.stop();
    punk = undefined;
  });

  it('reads the responses out of SSE answers (PUNK_RESPONSE_MODE=always)', async () => {
    punk = await startPunk({ PUNK_RESPONSE_MODE: 'always' });
    const expected = await sdkToolNames(punk.url);
    const streamed = await listTools([punk.url]);
    assert.equal(streamed.code, 0, streamed.stderr);
    assert.deepEqual(streamed.stdout.trim().split('\n'), expected);
    await punk.stop();
    punk = undefined;
  });

  it('sends MCP_BEARER_TOKEN when authentication is on, and says what is missing without it', async () => {
    punk = await startPunk({ PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'http://127.0.0.1', PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: adminKey });
    const refused = await listTools([punk.url]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^list-tools: initialize: HTTP 401 \(authentication is on: set MCP_BEARER_TOKEN to an API key\)/);
    const allowed = await listTools([punk.url], { MCP_BEARER_TOKEN: adminKey });
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.ok(
      allowed.stdout.split('\n').some((name) => name.startsWith('everything__')),
      allowed.stdout,
    );
    await punk.stop();
    punk = undefined;
  });

  it('fails with a message naming the step when nothing answers, and refuses a bad URL', async () => {
    const unreachable = await listTools(['http://127.0.0.1:9/mcp']);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /^list-tools: initialize: cannot reach http:\/\/127\.0\.0\.1:9\/mcp: /);
    const usage = await listTools(['not-a-url']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /^usage: node list-tools\.mjs <http\(s\) URL of an MCP endpoint>/);
  });
});
