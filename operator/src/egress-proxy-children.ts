/**
 * The egress allow-list of a server (`spec.sandbox.egress`) as Kubernetes enforces it. A NetworkPolicy can
 * only match addresses, so `cidr` entries go into the server's own policy, while `host` entries (DNS names,
 * `*.example.com`) need an egress proxy that checks the name of each CONNECT or request: a Deployment
 * `<name>-egress` running `punk-bridge egress-proxy` from the bridge image, its Service, and its
 * NetworkPolicy (only the server's pods may reach it; it may reach DNS and the declared ports). The server
 * container then gets HTTP(S)_PROXY pointing at it, and NO_PROXY for loopback only: in-cluster names go
 * through the proxy too, which checks them like any other (the server's own policy would block them
 * anyway). A package server's registry hosts are added to the allow-list, so `npx`/`uvx` can download it. The
 * proxy's arguments, rule format and environment are the bridge's (`@punk/bridge/contract`).
 */
import { isIP } from 'node:net';
import type {
  KubernetesObject,
  V1Deployment,
  V1EnvVar,
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyPort,
  V1Service,
} from '@kubernetes/client-node';
import {
  checkEgressItem,
  EgressItemError,
  egressProxyArgs,
  egressProxyEnv,
  EGRESS_PROXY_PORT,
  type EgressEntry,
} from '@punk/bridge/contract';
import { EGRESS_PROXY_SUFFIX, type McpServer } from '@punk/lib/controller';
import {
  childLabels,
  helperContainer,
  ownerReference,
  podSecurityContext,
  selectorLabels,
  TMP_VOLUME,
  writableVolumes,
} from './sandbox.js';
import { SERVER_SERVICE_ACCOUNT } from './shared-service-account.js';
import { SpecError } from './spec-error.js';

/** Path of the bridge executable inside the bridge and runner images. */
export const BRIDGE_BINARY = '/opt/punk/bin/punk-bridge';

/**
 * Checks `spec.sandbox.egress` with the bridge's own checker (the proxy's rule parser), so the operator never
 * writes a rule the proxy refuses: each `host` a DNS name or `*.` wildcard (lower-cased), each `cidr` an IPv4
 * or IPv6 range (a bare address becomes a /32 or /128 range), ports unique and ascending. An address as `host`
 * is refused too: addresses are for the server's NetworkPolicy, which only `cidr` reaches.
 * @throws SpecError naming `spec.sandbox.egress[i].host`, `.cidr` or `.ports`.
 */
export function egressEntries(spec: McpServer['spec']): EgressEntry[] {
  return (spec.sandbox?.egress ?? []).map((item, i) => {
    let entry: EgressEntry;
    try {
      entry = checkEgressItem(item, `spec.sandbox.egress[${i}]`);
    } catch (error) {
      if (error instanceof EgressItemError) throw new SpecError(error.field, error.reason);
      throw error;
    }
    if ('host' in entry && isIP(entry.host) !== 0)
      throw new SpecError(`spec.sandbox.egress[${i}].host`, `"${item.host}" is an address; an address goes in cidr`);
    return entry;
  });
}

/** Where package servers download from, by registry: each `host` or `host:port` (port 443 when absent). */
export interface PackageRegistries {
  npm: string[];
  pypi: string[];
}

/** The public registries: registry.npmjs.org for npm; pypi.org and files.pythonhosted.org (the files) for PyPI. */
export const DEFAULT_PACKAGE_REGISTRIES: PackageRegistries = {
  npm: ['registry.npmjs.org:443'],
  pypi: ['pypi.org:443', 'files.pythonhosted.org:443'],
};

/**
 * The egress entries that let a package server of `registry` download its package: one host entry per item of
 * `registries[registry]`, checked by the bridge's rule checker.
 * @throws Error naming `packageRegistries.<registry>[i]` for an item that is not a DNS name with an optional
 *   `:port` (a configuration mistake of the operator, not of the McpServer).
 */
export function packageRegistryEntries(registries: PackageRegistries, registry: keyof PackageRegistries): EgressEntry[] {
  return registries[registry].map((item, i) => {
    const at = `packageRegistries.${registry}[${i}]`;
    const match = /^([^:]+)(?::([0-9]+))?$/.exec(item);
    if (!match) throw new Error(`${at}: ${JSON.stringify(item)} is not host or host:port`);
    try {
      const entry = checkEgressItem({ host: match[1]!, ports: [match[2] === undefined ? 443 : Number(match[2])] }, at);
      if (isIP(match[1]!) !== 0) throw new EgressItemError(`${at}.host`, 'is an address; name the registry by its DNS name');
      return entry;
    } catch (error) {
      if (error instanceof EgressItemError) throw new Error(error.message, { cause: error });
      throw error;
    }
  });
}

/** Whether the allow-list names a host, so the server needs an egress proxy. */
export function needsEgressProxy(entries: readonly EgressEntry[]): boolean {
  return entries.some((entry) => 'host' in entry);
}

// McpServer names may not end in EGRESS_PROXY_SUFFIX (`-egress`; the schema, the CRD and buildServerChildren
// refuse them), so `<name>-egress` is never the name of another McpServer's children.
export { EGRESS_PROXY_SUFFIX };

/** The name of a server's egress proxy Deployment, Service and NetworkPolicy: `<name>-egress`. */
export function egressProxyName(server: McpServer): string {
  return `${server.metadata.name}${EGRESS_PROXY_SUFFIX}`;
}

/**
 * The proxy environment of the server container (the bridge's `egressProxyEnv`): HTTP_PROXY, HTTPS_PROXY and
 * their lower-case forms at the proxy's Service, NODE_USE_ENV_PROXY, and NO_PROXY/no_proxy for loopback only.
 * The cluster's own names (`.svc`, `.<clusterDomain>`) are not exempt: the server's NetworkPolicy lets it reach
 * only DNS, its `cidr` entries and the proxy, so an allowed in-cluster `host` works only through the proxy, and
 * one not allowed is refused there with a clear answer instead of a timeout.
 */
export function serverProxyEnv(server: McpServer, clusterDomain: string): V1EnvVar[] {
  const url = `http://${egressProxyName(server)}.${server.metadata.namespace}.svc.${clusterDomain}:${EGRESS_PROXY_PORT}`;
  return egressProxyEnv(url, ['localhost', '127.0.0.1', '::1']);
}

/** Egress to the cluster DNS: kube-dns pods of kube-system on port 53, UDP and TCP. */
export function dnsEgressRule(): V1NetworkPolicyEgressRule {
  return {
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
  };
}

/** TCP ports of an entry for a NetworkPolicy rule; undefined (every port and protocol) when the entry names none. */
export function tcpPorts(ports: readonly number[] | undefined): V1NetworkPolicyPort[] | undefined {
  return ports?.map((port) => ({ protocol: 'TCP', port }));
}

/** Egress rules of the `cidr` entries: each range on its ports. */
export function cidrEgressRules(entries: readonly EgressEntry[]): V1NetworkPolicyEgressRule[] {
  return entries.flatMap((entry) =>
    'cidr' in entry ? [{ to: [{ ipBlock: { cidr: entry.cidr } }], ...(entry.ports && { ports: tcpPorts(entry.ports) }) }] : [],
  );
}

/**
 * The egress proxy's children: Deployment, Service and NetworkPolicy `<name>-egress`. The policy admits only
 * the server's pods on port 3128 and lets the proxy reach DNS, the `cidr` entries, and the `host` entries'
 * ports anywhere except link-local addresses (cloud metadata services); the proxy itself checks the names.
 * The pod uses the namespace's shared ServiceAccount (shared-service-account.ts) and the same sandbox as the server.
 */
export function egressProxyChildren(server: McpServer, entries: readonly EgressEntry[], bridgeImage: string): KubernetesObject[] {
  const name = egressProxyName(server);
  const namespace = server.metadata.namespace!;
  const metadata = () => ({ name, namespace, labels: childLabels(server, 'egress-proxy'), ownerReferences: [ownerReference(server)] });
  const selector = selectorLabels(server, 'egress-proxy');
  const probe = { tcpSocket: { port: 'proxy' } };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(),
    spec: {
      // The proxy exists only to serve the server's pods: none at zero replicas.
      replicas: server.spec.replicas === 0 ? 0 : 1,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: childLabels(server, 'egress-proxy') },
        spec: {
          serviceAccountName: SERVER_SERVICE_ACCOUNT,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: podSecurityContext(),
          containers: [
            helperContainer({
              name: 'egress-proxy',
              image: bridgeImage,
              command: [BRIDGE_BINARY],
              args: egressProxyArgs(entries),
              ports: [{ name: 'proxy', containerPort: EGRESS_PROXY_PORT, protocol: 'TCP' }],
              readinessProbe: { ...probe, periodSeconds: 5 },
              livenessProbe: { ...probe, periodSeconds: 10 },
              volumeMounts: [{ name: TMP_VOLUME, mountPath: '/tmp' }],
            }),
          ],
          volumes: writableVolumes().filter((volume) => volume.name === TMP_VOLUME),
        },
      },
    },
  };
  const service: V1Service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata(),
    spec: { type: 'ClusterIP', selector, ports: [{ name: 'proxy', port: EGRESS_PROXY_PORT, targetPort: 'proxy', protocol: 'TCP' }] },
  };
  const hostPorts = entries.filter((entry) => 'host' in entry).map((entry) => entry.ports);
  const anyPort = hostPorts.some((ports) => ports === undefined);
  const ports = [...new Set(hostPorts.flatMap((p) => p ?? []))].sort((a, b) => a - b);
  const policy: V1NetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: metadata(),
    spec: {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          _from: [{ podSelector: { matchLabels: selectorLabels(server, 'mcp-server') } }],
          ports: [{ protocol: 'TCP', port: EGRESS_PROXY_PORT }],
        },
      ],
      egress: [
        dnsEgressRule(),
        {
          to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['169.254.0.0/16'] } }, { ipBlock: { cidr: '::/0', except: ['fe80::/10'] } }],
          ...(!anyPort && { ports: tcpPorts(ports) }),
        },
        ...cidrEgressRules(entries),
      ],
    },
  };
  return [deployment, service, policy];
}
