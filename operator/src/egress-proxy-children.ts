/**
 * The egress allow-list of a server (`spec.sandbox.egress`) as Kubernetes enforces it. A NetworkPolicy can
 * only match addresses, so `cidr` entries go into the server's own policy, while `host` entries (DNS names,
 * `*.example.com`) need an egress proxy that checks the name of each CONNECT or request: a Deployment
 * `<name>-egress` running `punk-bridge egress-proxy` from the bridge image, its Service, and its
 * NetworkPolicy (only the server's pods may reach it; it may reach DNS and the declared ports). The server
 * container then gets HTTP(S)_PROXY pointing at it, and NO_PROXY for the cluster's own names.
 */
import { isIP } from 'node:net';
import type { KubernetesObject, V1Deployment, V1EnvVar, V1NetworkPolicy, V1NetworkPolicyEgressRule, V1NetworkPolicyPort, V1Service } from '@kubernetes/client-node';
import type { McpServer } from '@punk/lib';
import {
  childLabels,
  helperContainer,
  ownerReference,
  podSecurityContext,
  selectorLabels,
  TMP_VOLUME,
  writableVolumes,
} from './sandbox.js';
import { SpecError } from './spec-error.js';

/** Port the egress proxy listens on. */
export const EGRESS_PROXY_PORT = 3128;

/** Path of the bridge executable inside the bridge and runner images. */
export const BRIDGE_BINARY = '/opt/punk/bin/punk-bridge';

/** One checked entry of `spec.sandbox.egress`: a lower-case DNS name (or `*.` wildcard), or a CIDR with its prefix. */
export type EgressEntry = { host: string; ports?: number[] } | { cidr: string; ports?: number[] };

// A DNS name of letters, digits and -, optionally behind one leading `*.` wildcard label (RFC 1123 §2.1).
const HOST = /^(\*\.)?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Checks `spec.sandbox.egress`: each `host` a DNS name or `*.` wildcard (lower-cased), each `cidr` an IPv4 or
 * IPv6 range (a bare address becomes a /32 or /128 range).
 * @throws SpecError naming `spec.sandbox.egress[i].host` or `.cidr`.
 */
export function egressEntries(spec: McpServer['spec']): EgressEntry[] {
  return (spec.sandbox?.egress ?? []).map((entry, i) => {
    const ports = entry.ports && { ports: [...new Set(entry.ports)].sort((a, b) => a - b) };
    if (entry.host !== undefined) {
      const host = entry.host.toLowerCase();
      if (host.length > 253 || !HOST.test(host) || isIP(host) !== 0) {
        const hint = isIP(host) !== 0 ? '; an address goes in cidr' : '';
        throw new SpecError(`spec.sandbox.egress[${i}].host`, `"${entry.host}" is not a DNS name or a *.wildcard name${hint}`);
      }
      return { host, ...ports };
    }
    return { cidr: checkedCidr(entry.cidr!, `spec.sandbox.egress[${i}].cidr`), ...ports };
  });
}

function checkedCidr(cidr: string, field: string): string {
  const [address = '', prefix, ...rest] = cidr.split('/');
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  if (family === 0 || rest.length > 0 || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))) {
    throw new SpecError(field, `"${cidr}" is not an IPv4 or IPv6 range such as 10.0.0.0/8 or 2001:db8::/32`);
  }
  return prefix === undefined ? `${address}/${bits}` : cidr;
}

/** Whether the allow-list names a host, so the server needs an egress proxy. */
export function needsEgressProxy(entries: readonly EgressEntry[]): boolean {
  return entries.some(entry => 'host' in entry);
}

/**
 * The egress proxy's rules, one per entry, in the format of `punk-bridge egress-proxy --allow`:
 * `host[:port[,port…]]`, `*.example.com[:ports]`, `cidr[:ports]` (no ports: all ports).
 */
export function egressProxyRules(entries: readonly EgressEntry[]): string[] {
  return entries.map(entry => ('host' in entry ? entry.host : entry.cidr) + (entry.ports ? `:${entry.ports.join(',')}` : ''));
}

/** The name of a server's egress proxy Deployment and Service. */
export function egressProxyName(server: McpServer): string {
  return `${server.metadata.name}-egress`;
}

/**
 * The proxy environment of the server container: HTTP_PROXY, HTTPS_PROXY and their lower-case forms at the
 * proxy's Service, NO_PROXY/no_proxy for loopback and the cluster's own names.
 */
export function egressProxyEnv(server: McpServer, clusterDomain: string): V1EnvVar[] {
  const url = `http://${egressProxyName(server)}.${server.metadata.namespace}.svc.${clusterDomain}:${EGRESS_PROXY_PORT}`;
  const noProxy = ['localhost', '127.0.0.1', '::1', '.svc', `.${clusterDomain}`].join(',');
  return [
    { name: 'HTTP_PROXY', value: url },
    { name: 'HTTPS_PROXY', value: url },
    { name: 'http_proxy', value: url },
    { name: 'https_proxy', value: url },
    { name: 'NO_PROXY', value: noProxy },
    { name: 'no_proxy', value: noProxy },
  ];
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
  return ports?.map(port => ({ protocol: 'TCP', port }));
}

/** Egress rules of the `cidr` entries: each range on its ports. */
export function cidrEgressRules(entries: readonly EgressEntry[]): V1NetworkPolicyEgressRule[] {
  return entries.flatMap(entry => ('cidr' in entry ? [{ to: [{ ipBlock: { cidr: entry.cidr } }], ...(entry.ports && { ports: tcpPorts(entry.ports) }) }] : []));
}

/**
 * The egress proxy's children: Deployment, Service and NetworkPolicy `<name>-egress`. The policy admits only
 * the server's pods on port 3128 and lets the proxy reach DNS, the `cidr` entries, and the `host` entries'
 * ports anywhere except link-local addresses (cloud metadata services); the proxy itself checks the names.
 * The pod uses the server's ServiceAccount and the same sandbox as the server.
 */
export function egressProxyChildren(server: McpServer, entries: readonly EgressEntry[], bridgeImage: string): KubernetesObject[] {
  const name = egressProxyName(server);
  const namespace = server.metadata.namespace!;
  const metadata = () => ({ name, namespace, labels: childLabels(server, 'egress-proxy'), ownerReferences: [ownerReference(server)] });
  const selector = selectorLabels(server, 'egress-proxy');
  const args = ['egress-proxy', '--port', String(EGRESS_PROXY_PORT), ...egressProxyRules(entries).flatMap(rule => ['--allow', rule])];
  const probe = { tcpSocket: { port: 'proxy' } };
  const deployment: V1Deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(),
    spec: {
      replicas: 1,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: childLabels(server, 'egress-proxy') },
        spec: {
          serviceAccountName: server.metadata.name,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: podSecurityContext(),
          containers: [
            helperContainer({
              name: 'egress-proxy',
              image: bridgeImage,
              command: [BRIDGE_BINARY],
              args,
              ports: [{ name: 'proxy', containerPort: EGRESS_PROXY_PORT, protocol: 'TCP' }],
              readinessProbe: { ...probe, periodSeconds: 5 },
              livenessProbe: { ...probe, periodSeconds: 10 },
              volumeMounts: [{ name: TMP_VOLUME, mountPath: '/tmp' }],
            }),
          ],
          volumes: writableVolumes().filter(volume => volume.name === TMP_VOLUME),
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
  const hostPorts = entries.filter(entry => 'host' in entry).map(entry => entry.ports);
  const anyPort = hostPorts.some(ports => ports === undefined);
  const ports = [...new Set(hostPorts.flatMap(p => p ?? []))].sort((a, b) => a - b);
  const policy: V1NetworkPolicy = {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: metadata(),
    spec: {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ _from: [{ podSelector: { matchLabels: selectorLabels(server, 'mcp-server') } }], ports: [{ protocol: 'TCP', port: EGRESS_PROXY_PORT }] }],
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
