/**
 * The Kubernetes children of an McpServer, as pure functions of its spec: a Service (headless unless
 * `spec.service.clusterIP`), a Deployment of sandboxed pods and a NetworkPolicy (only the gateway may connect; egress
 * only to DNS and the declared allow-list), plus an egress proxy when the allow-list names hosts
 * (egress-proxy-children.ts). A stdio server runs behind Punk's bridge (`punk-bridge serve`), which speaks
 * Streamable HTTP to the gateway; an HTTP server (streamable-http, sse) is reached on its own port. Also the
 * McpServer the gateway serves in its place: a url server at the Service's address.
 */
import type {
  KubernetesObject,
  V1Container,
  V1Deployment,
  V1EnvVar,
  V1NetworkPolicy,
  V1PodTemplateSpec,
  V1Probe,
  V1Service,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import { BRIDGE_PORT, EGRESS_PROXY_PORT, serveFlags, type EgressEntry } from '@punk/bridge/contract';
import { API_VERSION, mcpServerSpecSchema, transportOf, type McpServer } from '@punk/lib/controller';
import {
  BRIDGE_BINARY,
  cidrEgressRules,
  DEFAULT_PACKAGE_REGISTRIES,
  dnsEgressRule,
  EGRESS_PROXY_SUFFIX,
  egressEntries,
  egressProxyChildren,
  egressProxyName,
  needsEgressProxy,
  packageRegistryEntries,
  serverProxyEnv,
  type PackageRegistries,
} from './egress-proxy-children.js';
import { checkImageReference } from './image-reference.js';
import { checkVolume, mergePodTemplate } from './pod-template-merge.js';
import {
  childLabels,
  containerSecurityContext,
  HOME_VOLUME,
  helperContainer,
  ownerReference,
  podSecurityContext,
  sandboxEnv,
  selectorLabels,
  quantityValue,
  serverResources,
  TMP_VOLUME,
  writableMounts,
  writableVolumes,
} from './sandbox.js';
import { SECRET_CHECKSUM_ANNOTATION } from './secret-checksum.js';
import { serverEnv, type CredentialSecrets } from './server-env.js';
import { SpecError } from './spec-error.js';
import { SERVER_SERVICE_ACCOUNT } from './shared-service-account.js';

export { SpecError } from './spec-error.js';
export { secretChecksum, SECRET_CHECKSUM_ANNOTATION } from './secret-checksum.js';
export { referencedSecretNames, type CredentialSecrets } from './server-env.js';
export { DEFAULT_PACKAGE_REGISTRIES, packageRegistryEntries, type PackageRegistries } from './egress-proxy-children.js';

/**
 * Annotation of a server's Service: `true` when it has a cluster IP, `false` when headless. A Service's cluster IP
 * cannot change once set, so the operator replaces a Service whose annotation differs from the spec (one without it
 * was made by an older operator, with a cluster IP).
 */
export const CLUSTER_IP_ANNOTATION = 'mcp.punk.dev/cluster-ip';

/** Name of the server's container in its pod (the one a podTemplate merges into). */
export const SERVER_CONTAINER = 'server';

/** The emptyDir the bridge's init container copies the bridge into, in a stdio image server's pod. */
const BRIDGE_VOLUME = 'punk-bin';
const BRIDGE_DIR = '/punk-bin';

/** Where each of `spec.sandbox.volumes` is mounted in the server container: `/mnt/<volume name>`. */
export const SANDBOX_VOLUMES_DIR = '/mnt';

/** What {@link buildServerChildren} needs beside the McpServer. */
export interface ServerChildrenOptions {
  /** Image holding the bridge at /opt/punk/bin/punk-bridge (and `cp`): init container of stdio image servers, egress proxy. */
  bridgeImage: string;
  /** Runner images of package servers, by registry: npm (node, npx) and pypi (uv, uvx), each with the bridge at /opt/punk/bin/punk-bridge. */
  runnerImages: { npm: string; pypi: string };
  /** The gateway's pods, the only ones a server's NetworkPolicy admits: their namespace and labels. */
  gateway: { namespace: string; podLabels: Record<string, string> };
  /** {@link secretChecksum} of the Secrets the pod reads ({@link referencedSecretNames}), as the pod template's annotation. */
  secretChecksum: string;
  /** Resolves an McpCredential of the server's namespace to its Secret. */
  credentialSecrets: CredentialSecrets;
  /** The cluster's DNS domain; `cluster.local` when absent. */
  clusterDomain?: string;
  /**
   * The hosts a package server downloads from (`host` or `host:port`, 443 when absent), added to its egress
   * allow-list; {@link DEFAULT_PACKAGE_REGISTRIES} (the public npm and PyPI registries) when absent.
   */
  packageRegistries?: PackageRegistries;
}

/** The children of one McpServer and how the gateway reaches it. */
export interface ServerChildren {
  /**
   * Objects to apply, in this order: Service, Deployment, NetworkPolicy of the server, then the
   * egress proxy's Deployment, Service and NetworkPolicy when it has one; none for a url server. They are
   * @kubernetes/client-node models, not wire JSON: a NetworkPolicy ingress rule's `from` is `_from`. Apply them
   * through `KubernetesObjectApi` (its serializer writes `from`); raw JSON would lose the rule's sources.
   */
  objects: KubernetesObject[];
  /**
   * URL of the server's MCP endpoint: the Service's DNS name, the server's port and `spec.path` (the pods' own port:
   * a headless Service maps no port, and its port is the container's), or a url server's url (an openapi server's
   * base URL).
   */
  endpoint: string;
  /** The McpServer the gateway serves (bucket PUNK_MCP_SERVERS): a url server at {@link endpoint}. */
  served: McpServer;
}

/**
 * The children of `server` (see this module's comment). A server made from an image or a package gets:
 * - Service `<name>` on the bridge's port 8080 (stdio) or `spec.port` (8080 too when absent; `$(PORT)` in the command,
 *   args and env values of an HTTP server expands to it, as under `punk up`), its target the container port of the
 *   same number: headless (clusterIP None) unless `spec.service.clusterIP`, annotated {@link CLUSTER_IP_ANNOTATION};
 * - Deployment `<name>` of `spec.replicas` sandboxed pods (sandbox.ts): the server container `server` with the
 *   bridge in front of a stdio server (`punk-bridge serve --port 8080 --path <spec.path> -- <command> <args>`;
 *   for an image, the bridge is copied in by an init container from the bridge image), `npx -y <name>@<version>`
 *   or `uvx <name>==<version>` in the runner image for a package (behind the runner's own bridge when stdio, alone
 *   on `spec.port` when it serves streamable-http or sse, as `punk up` runs it), HOME and TMPDIR on emptyDirs, the extra
 *   `spec.sandbox.volumes` mounted at /mnt/<name>, the namespace's shared ServiceAccount
 *   {@link SERVER_SERVICE_ACCOUNT} without a token (shared-service-account.ts), probes (the bridge's /healthz and /readyz, or TCP on the
 *   server's port), the annotation `mcp.punk.dev/secret-checksum`, and `spec.podTemplate` merged last
 *   (pod-template-merge.ts);
 * - NetworkPolicy `<name>`: ingress only from the gateway's pods on the server's port; egress only to the
 *   cluster DNS, the `cidr` entries of `spec.sandbox.egress`, and the egress proxy when there are `host` entries
 *   (a package server always has some: its registry's hosts, {@link ServerChildrenOptions.packageRegistries}).
 * A stdio server's bridge gets `--max-sessions` from the container's memory limit (one child process per session).
 * Every child has the labels and owner reference of sandbox.ts.
 * @param server an McpServer parsed by `mcpServerSchema`, with metadata.namespace and metadata.uid.
 * @throws TypeError when `server.metadata` lacks namespace or uid (a programming error).
 * @throws SpecError naming the field of a spec the API server accepts but Punk cannot run: `spec.image` (only a
 *   `command`, which runs only under `punk up`), `spec.port` (set on
 *   a stdio server, whose pod serves it on the bridge's port), `spec.command` (a stdio image server needs it: Kubernetes cannot read an image's entrypoint),
 *   `spec.sandbox.egress[i]`, `spec.sandbox.volumes[i]`, `spec.resources…`, `spec.env[i]…` (reason
 *   CredentialMissing for an unknown McpCredential), `metadata.name` (ending in `-egress`, a suffix kept for egress
 *   proxies, or too long for `<name>-egress` when the server needs a proxy), `spec.headers[i].valueFrom.secretKeyRef`
 *   of a url server (the gateway resolves only McpCredentials), and any refused `spec.podTemplate…` field.
 * @throws Error naming `packageRegistries.<registry>[i]` for a configured registry that is not `host[:port]`.
 */
/**
 * `value` with `$(PORT)` replaced by `port`, as `punk up` expands it (gateway launch.ts); `$$` escapes and every other
 * `$(VAR)` stay for Kubernetes, which expands those from the container's environment.
 */
function withPort(value: string, port: number): string {
  return value.replace(/\$\$|\$\(PORT\)/g, (match) => (match === '$$' ? match : String(port)));
}

/**
 * An `openapi` McpServer has no pod: the gateway serves its document's operations itself (docs/openapi.md). In the
 * cluster the document is a `url` or inline `content` (the reconciler turns a `configMapKeyRef` into `content`); a
 * `file` exists only beside a manifest under `punk up`.
 * @throws SpecError `spec.openapi.file`, an unresolved `spec.openapi.configMapKeyRef`, and
 *   `spec.headers[i].valueFrom.secretKeyRef` (the gateway resolves only McpCredentials).
 */
function openApiChildren(server: McpServer): ServerChildren {
  const openapi = server.spec.openapi!;
  if (openapi.file !== undefined)
    throw new SpecError(
      'spec.openapi.file',
      'a file is read beside its manifest under punk up only: in the cluster set openapi.url or openapi.content',
    );
  // The reconciler resolves configMapKeyRef into content before building; one left here was not resolved.
  if (openapi.configMapKeyRef !== undefined)
    throw new SpecError('spec.openapi.configMapKeyRef', 'the ConfigMap was not read: the reconciler resolves it into openapi.content');
  (server.spec.headers ?? []).forEach((header, i) => {
    if (header.valueFrom?.secretKeyRef)
      throw new SpecError(
        `spec.headers[${i}].valueFrom.secretKeyRef`,
        'the gateway cannot read Secrets: make an McpCredential for the Secret and use valueFrom.credentialRef',
      );
  });
  // The base URL when set; else the document's URL (its first server is relative to it) or what names it.
  return { objects: [], endpoint: openapi.baseUrl ?? openapi.url ?? 'the first server of openapi.content', served: server };
}

export function buildServerChildren(server: McpServer, options: ServerChildrenOptions): ServerChildren {
  const spec = server.spec;
  if (spec.openapi !== undefined) return openApiChildren(server);
  if (spec.url !== undefined) {
    (spec.headers ?? []).forEach((header, i) => {
      if (header.valueFrom?.secretKeyRef) {
        throw new SpecError(
          `spec.headers[${i}].valueFrom.secretKeyRef`,
          'the gateway cannot read Secrets: make an McpCredential for the Secret and use valueFrom.credentialRef',
        );
      }
    });
    // Only whether it is scaled to zero reaches the gateways: another replica count must not restart their connections.
    return { objects: [], endpoint: spec.url, served: { ...server, spec: { ...spec, replicas: spec.replicas === 0 ? 0 : 1 } } };
  }
  const { name, namespace, uid } = server.metadata;
  if (namespace === undefined || uid === undefined)
    throw new TypeError(`McpServer ${name}: metadata.namespace and metadata.uid are required to build its children`);
  const clusterDomain = options.clusterDomain ?? 'cluster.local';
  const transport = transportOf(spec);
  const stdio = transport === 'stdio';
  if (stdio && spec.port !== undefined) {
    throw new SpecError(
      'spec.port',
      `a stdio server is served by Punk's bridge on port ${BRIDGE_PORT}; spec.port applies only to streamable-http and sse servers: remove it`,
    );
  }
  if (spec.image === undefined && spec.package === undefined) {
    // The API server's CEL rule refuses this; a spec from an older CRD may still carry it.
    throw new SpecError(
      'spec.image',
      'a server with only spec.command runs as a local process under punk up; in the cluster it runs in a pod, which needs the image that holds the command: set spec.image',
    );
  }
  if (spec.image !== undefined) checkImageReference(spec.image, 'spec.image');
  if (spec.image !== undefined && stdio && spec.command === undefined) {
    throw new SpecError(
      'spec.command',
      "a stdio server from an image needs spec.command: Kubernetes cannot read the image's entrypoint, and the bridge must start the server itself",
    );
  }
  if (name.endsWith(EGRESS_PROXY_SUFFIX)) {
    throw new SpecError(
      'metadata.name',
      `"${name}" ends in ${EGRESS_PROXY_SUFFIX}, which Punk keeps for the egress proxy of McpServer ${name.slice(0, -EGRESS_PROXY_SUFFIX.length)}: choose another name`,
    );
  }
  const egress = withRegistries(egressEntries(spec), spec, options.packageRegistries ?? DEFAULT_PACKAGE_REGISTRIES);
  const proxied = needsEgressProxy(egress);
  if (proxied && egressProxyName(server).length > 63) {
    const why = spec.package !== undefined ? `its package registry (${spec.package.registry})` : 'a host in spec.sandbox.egress';
    throw new SpecError(
      'metadata.name',
      `"${name}" has ${name.length} characters, too many for the egress proxy this server needs for ${why}: its children are named ${egressProxyName(server)}, which must fit 63 characters, so use a name of at most ${63 - EGRESS_PROXY_SUFFIX.length} characters`,
    );
  }
  // A pod has a network of its own: an HTTP server that declares no port listens on the bridge's (punk up picks one).
  const port = stdio ? BRIDGE_PORT : (spec.port ?? BRIDGE_PORT);
  const metadata = (component: 'mcp-server' = 'mcp-server') => ({
    name,
    namespace,
    labels: childLabels(server, component),
    ownerReferences: [ownerReference(server)],
  });

  const clusterIP = spec.service?.clusterIP === true;
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { ...metadata(), annotations: { [CLUSTER_IP_ANNOTATION]: String(clusterIP) } },
    spec: {
      type: 'ClusterIP',
      // Headless: no cluster IP to allocate; the name resolves to the ready pods, reached on their own port.
      ...(!clusterIP && { clusterIP: 'None' }),
      selector: selectorLabels(server, 'mcp-server'),
      ports: [{ name: 'mcp', port, targetPort: 'mcp', protocol: 'TCP', appProtocol: 'http' }],
    },
  };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(),
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: selectorLabels(server, 'mcp-server') },
      template: podTemplate(server, options, { port, stdio, egress: proxied ? serverProxyEnv(server, clusterDomain) : [] }),
    },
  };
  const objects: KubernetesObject[] = [service, deployment, serverNetworkPolicy(server, options.gateway, port, egress, proxied)];
  if (proxied) objects.push(...egressProxyChildren(server, egress, options.bridgeImage));

  const endpoint = `http://${name}.${namespace}.svc.${clusterDomain}:${port}${spec.path}`;
  const served: McpServer = {
    apiVersion: API_VERSION,
    kind: 'McpServer',
    metadata: { name, namespace, ...(server.metadata.labels && { labels: server.metadata.labels }) },
    spec: mcpServerSpecSchema.parse({
      url: endpoint,
      transport: stdio ? 'streamable-http' : transport,
      sessionMode: spec.sessionMode,
      timeout: spec.timeout,
      ...(spec.tools && { tools: spec.tools }),
      // An HTTP server in its pod is called as its caller too (docs/identity.md).
      ...(spec.auth && { auth: spec.auth }),
      // The gateways answer a server scaled to zero at once (a replica count of 1 otherwise: see the url case).
      ...(spec.replicas === 0 && { replicas: 0 }),
      // Asleep at zero, the gateways hold its calls for a wake (registry/wake.ts) instead of answering at once.
      ...(spec.idle && { idle: spec.idle }),
    }),
  };
  return { objects, endpoint, served };
}

/** The pod template of the server's Deployment, with `spec.podTemplate` merged last. */
function podTemplate(
  server: McpServer,
  options: ServerChildrenOptions,
  how: { port: number; stdio: boolean; egress: V1EnvVar[] },
): V1PodTemplateSpec {
  const spec = server.spec;
  const extraVolumes = sandboxVolumes(spec);
  const initContainers: V1Container[] = [];
  const volumes: V1Volume[] = [...writableVolumes()];
  const mounts: V1VolumeMount[] = [...writableMounts()];
  let image: string;
  let command: string[] | undefined;
  let args: string[] | undefined;
  if (spec.package !== undefined) {
    image = options.runnerImages[spec.package.registry];
    const { name, version } = spec.package;
    const run =
      spec.command ??
      (spec.package.registry === 'npm'
        ? ['npx', '-y', version ? `${name}@${version}` : name]
        : ['uvx', version ? `${name}==${version}` : name]);
    if (how.stdio) {
      command = [BRIDGE_BINARY, ...serveFlags({ path: spec.path, maxSessions: bridgeMaxSessions(spec) })];
      args = [...run, ...(spec.args ?? [])];
    } else {
      // A package that serves HTTP itself (as `punk up` runs it): the runner starts it on spec.port, no bridge.
      command = run;
      args = spec.args;
    }
  } else if (how.stdio) {
    image = spec.image!;
    initContainers.push(
      helperContainer({
        name: 'install-bridge',
        image: options.bridgeImage,
        command: ['cp', BRIDGE_BINARY, `${BRIDGE_DIR}/punk-bridge`],
        volumeMounts: [{ name: BRIDGE_VOLUME, mountPath: BRIDGE_DIR }],
      }),
    );
    volumes.push({ name: BRIDGE_VOLUME, emptyDir: { sizeLimit: '256Mi' } });
    mounts.push({ name: BRIDGE_VOLUME, mountPath: BRIDGE_DIR, readOnly: true });
    command = [`${BRIDGE_DIR}/punk-bridge`, ...serveFlags({ path: spec.path, maxSessions: bridgeMaxSessions(spec) })];
    args = [...spec.command!, ...(spec.args ?? [])];
  } else {
    image = spec.image!;
    command = spec.command;
    args = spec.args;
  }
  for (const volume of extraVolumes) {
    volumes.push(volume);
    mounts.push({ name: volume.name, mountPath: `${SANDBOX_VOLUMES_DIR}/${volume.name}` });
  }
  const probes: Pick<V1Container, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> = how.stdio
    ? {
        startupProbe: { httpGet: { path: '/healthz', port: 'mcp' }, periodSeconds: 2, failureThreshold: 60 },
        readinessProbe: { httpGet: { path: '/readyz', port: 'mcp' }, periodSeconds: 5 },
        livenessProbe: { httpGet: { path: '/healthz', port: 'mcp' }, periodSeconds: 10 },
      }
    : tcpProbes();
  const container: V1Container = {
    name: SERVER_CONTAINER,
    image,
    ...(command && { command: how.stdio ? command : command.map((part) => withPort(part, how.port)) }),
    ...(args && { args: how.stdio ? args : args.map((arg) => withPort(arg, how.port)) }),
    ports: [{ name: 'mcp', containerPort: how.port, protocol: 'TCP' }],
    env: withOverrides(
      [...sandboxEnv(), ...how.egress],
      serverEnv(server, options.credentialSecrets).map((entry) =>
        how.stdio || entry.value === undefined ? entry : { ...entry, value: withPort(entry.value, how.port) },
      ),
    ),
    resources: serverResources(spec),
    securityContext: containerSecurityContext(),
    volumeMounts: mounts,
    ...probes,
  };
  const labels = childLabels(server, 'mcp-server');
  const annotations = { [SECRET_CHECKSUM_ANNOTATION]: options.secretChecksum, 'kubectl.kubernetes.io/default-container': SERVER_CONTAINER };
  const template: V1PodTemplateSpec = {
    metadata: { labels, annotations },
    spec: {
      serviceAccountName: SERVER_SERVICE_ACCOUNT,
      automountServiceAccountToken: false,
      // Service links would put every Service of the namespace into the server's environment.
      enableServiceLinks: false,
      securityContext: podSecurityContext(),
      ...(spec.sandbox?.runtimeClassName !== undefined && { runtimeClassName: spec.sandbox.runtimeClassName }),
      ...(initContainers.length > 0 && { initContainers }),
      containers: [container],
      volumes,
    },
  };
  if (spec.podTemplate === undefined) return template;
  const protect = {
    labels,
    annotations: { [SECRET_CHECKSUM_ANNOTATION]: options.secretChecksum },
    runtimeClassName: spec.sandbox?.runtimeClassName,
  };
  return mergePodTemplate(template, spec.podTemplate, protect, containerSecurityContext());
}

/**
 * The allow-list of a server: `spec.sandbox.egress`, and for a package server the hosts of its registry (so
 * `npx`/`uvx` can download the package at pod start), each unless the spec already lists the same entry.
 */
function withRegistries(entries: EgressEntry[], spec: McpServer['spec'], registries: PackageRegistries): EgressEntry[] {
  if (spec.package === undefined) return entries;
  const listed = new Set(entries.map((entry) => JSON.stringify(entry)));
  return [...entries, ...packageRegistryEntries(registries, spec.package.registry).filter((entry) => !listed.has(JSON.stringify(entry)))];
}

/** Memory the bridge (about 85 MiB) and each session's child (about 76 MiB for a Node server) take, rounded up. */
const SESSION_MEMORY = 96 * 2 ** 20;

/**
 * The bridge's `--max-sessions`: it runs one child process per session, so as many sessions as fit the server
 * container's memory limit (the podTemplate's for the server container, else `spec.resources` over the default)
 * after the bridge itself: floor((limit − 96Mi) / 96Mi), at least 1. The default 512Mi gives 4, 1Gi gives 9.
 * @throws SpecError naming `spec.podTemplate.spec.containers[i].resources.limits.memory` when it is not a quantity.
 */
function bridgeMaxSessions(spec: McpServer['spec']): number {
  let limit = serverResources(spec).limits!.memory as string;
  const containers = (spec.podTemplate as { spec?: { containers?: unknown } } | undefined)?.spec?.containers;
  if (Array.isArray(containers)) {
    const i = containers.findIndex((c) => (c as { name?: unknown } | null)?.name === SERVER_CONTAINER);
    const memory = (containers[i] as { resources?: { limits?: { memory?: unknown } } } | undefined)?.resources?.limits?.memory;
    if (memory !== undefined) {
      if (typeof memory !== 'string' || quantityValue(memory) === undefined) {
        throw new SpecError(
          `spec.podTemplate.spec.containers[${i}].resources.limits.memory`,
          `${JSON.stringify(memory)} is not a Kubernetes quantity (such as 512Mi or 1Gi)`,
        );
      }
      limit = memory;
    }
  }
  return Math.max(1, Math.floor((quantityValue(limit)! - SESSION_MEMORY) / SESSION_MEMORY));
}

function tcpProbes(): Pick<V1Container, 'startupProbe' | 'readinessProbe' | 'livenessProbe'> {
  const tcp: V1Probe = { tcpSocket: { port: 'mcp' } };
  return {
    startupProbe: { ...tcp, periodSeconds: 2, failureThreshold: 60 },
    readinessProbe: { ...tcp, periodSeconds: 5 },
    livenessProbe: { ...tcp, periodSeconds: 10 },
  };
}

/** Punk's variables, each replaced in place by the spec's variable of the same name, then the spec's others in order. */
function withOverrides(defaults: V1EnvVar[], own: V1EnvVar[]): V1EnvVar[] {
  const byName = new Map(own.map((entry) => [entry.name, entry]));
  const kept = defaults.map((entry) => byName.get(entry.name) ?? entry);
  const defaultNames = new Set(defaults.map((entry) => entry.name));
  return [...kept, ...own.filter((entry) => !defaultNames.has(entry.name))];
}

/**
 * `spec.sandbox.volumes`, checked.
 * @throws SpecError naming `spec.sandbox.volumes[i]` (not a Volume, a refused volume type, a name Punk uses).
 */
function sandboxVolumes(spec: McpServer['spec']): V1Volume[] {
  const reserved = new Set([TMP_VOLUME, HOME_VOLUME, BRIDGE_VOLUME]);
  const seen = new Set<string>();
  return (spec.sandbox?.volumes ?? []).map((volume, i) => {
    const field = `spec.sandbox.volumes[${i}]`;
    checkVolume(volume, field);
    const name = volume.name as string;
    if (reserved.has(name))
      throw new SpecError(`${field}.name`, `${name} is a volume of Punk's (${[...reserved].join(', ')}); choose another name`);
    if (seen.has(name)) throw new SpecError(`${field}.name`, `${name} is listed twice`);
    seen.add(name);
    return volume as unknown as V1Volume;
  });
}

/**
 * The server's NetworkPolicy: ingress only from the gateway's pods (their namespace and labels) on `port`;
 * egress only to the cluster DNS, the `cidr` entries on their ports, and the egress proxy's pods on 3128.
 */
function serverNetworkPolicy(
  server: McpServer,
  gateway: ServerChildrenOptions['gateway'],
  port: number,
  egress: readonly EgressEntry[],
  proxied: boolean,
): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: server.metadata.name,
      namespace: server.metadata.namespace!,
      labels: childLabels(server, 'mcp-server'),
      ownerReferences: [ownerReference(server)],
    },
    spec: {
      podSelector: { matchLabels: selectorLabels(server, 'mcp-server') },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          _from: [
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': gateway.namespace } },
              podSelector: { matchLabels: gateway.podLabels },
            },
          ],
          ports: [{ protocol: 'TCP', port }],
        },
      ],
      egress: [
        dnsEgressRule(),
        ...cidrEgressRules(egress),
        ...(proxied
          ? [
              {
                to: [{ podSelector: { matchLabels: selectorLabels(server, 'egress-proxy') } }],
                ports: [{ protocol: 'TCP', port: EGRESS_PROXY_PORT }],
              },
            ]
          : []),
      ],
    },
  };
}
