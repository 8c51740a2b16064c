/**
 * The egress allow-list of a server pod, as the egress proxy enforces it: rules of the form
 * `host[:port[,port...]]` (an exact DNS name, `*.example.com` for every name below example.com, an IP address,
 * `[v6]`) or `cidr[:port[,port...]]` (`10.0.0.0/8:443`), all ports when none are given. The rules come from the
 * McpServer's `spec.sandbox.egress` ({@link egressAllowRules}); matching is a pure function ({@link matchEgress}).
 */
import { BlockList, isIP } from 'node:net';
import type { McpServerSpec } from '@punk/lib';

/** One parsed allow rule. */
export type EgressRule = {
  /** The rule as written (what decisions log). */
  text: string;
  /** Allowed ports; every port when undefined. */
  ports: readonly number[] | undefined;
} & (
  | { kind: 'name'; name: string }
  | { kind: 'wildcard'; /** `.example.com`: matches names that end with it and have at least one label more. */ suffix: string }
  | { kind: 'network'; /** The address or range (an IP is a /32 or /128). */ network: BlockList }
);

/** One `sandbox.egress` item of an McpServer. */
export type EgressItem = NonNullable<McpServerSpec['sandbox']>['egress'][number];

/** The decision on one destination: allowed by which rule, or refused. */
export interface EgressDecision {
  allowed: boolean;
  /** The text of the rule that allowed it; undefined when refused. */
  rule: string | undefined;
}

/** The destination of one proxied request. */
export interface EgressDestination {
  /** Host as the client asked for it: a DNS name or an IP literal (brackets allowed). */
  host: string;
  port: number;
  /** The address the proxy resolved `host` to and would connect to, when known; CIDR and IP rules match it too. */
  address?: string;
}

const LABEL = '[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?';
const NAME = new RegExp(`^${LABEL}(\\.${LABEL})*$`);

/** Lower-cased, without a trailing dot or IPv6 brackets. */
export function normalizeHost(host: string): string {
  const lower = host.toLowerCase();
  const unbracketed = lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
  return unbracketed.endsWith('.') ? unbracketed.slice(0, -1) : unbracketed;
}

function parsePorts(text: string, list: string | undefined): number[] | undefined {
  if (list === undefined) return undefined;
  const ports = list.split(',').map(port => (/^\d{1,5}$/.test(port) ? Number(port) : NaN));
  if (ports.some(port => !(port >= 1 && port <= 65535))) throw new Error(`${JSON.stringify(text)}: ports must be numbers from 1 to 65535 separated by commas`);
  return ports;
}

function addressList(address: string, prefix: number): BlockList {
  const list = new BlockList();
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  list.addSubnet(address, prefix, family);
  return list;
}

/**
 * Parses one allow rule: `host[:port[,port...]]`, `[v6][:ports]` or `cidr[:ports]`.
 * @throws Error naming the rule and what is wrong with it.
 */
export function parseEgressRule(text: string): EgressRule {
  const cidr = /^(.+)\/(\d{1,3})(?::([^:]*))?$/.exec(text);
  if (cidr) {
    const address = normalizeHost(cidr[1]!);
    const family = isIP(address);
    const prefix = Number(cidr[2]);
    if (family === 0 || prefix > (family === 4 ? 32 : 128)) throw new Error(`${JSON.stringify(text)} is not a CIDR such as 10.0.0.0/8 or fd00::/8 (with optional :port,port)`);
    return { text, kind: 'network', network: addressList(address, prefix), ports: parsePorts(text, cidr[3]) };
  }
  const bracketed = /^\[([0-9a-fA-F:.]+)\](?::([^:]*))?$/.exec(text);
  if (bracketed) {
    if (isIP(bracketed[1]!) !== 6) throw new Error(`${JSON.stringify(text)}: ${bracketed[1]} is not an IPv6 address`);
    return { text, kind: 'network', network: addressList(bracketed[1]!, 128), ports: parsePorts(text, bracketed[2]) };
  }
  const hostPort = /^([^:]*)(?::([^:]*))?$/.exec(text);
  if (!hostPort) throw new Error(`${JSON.stringify(text)} is not host[:port[,port]]; write an IPv6 address in brackets: [fd00::1]:443`);
  const host = normalizeHost(hostPort[1]!);
  const ports = parsePorts(text, hostPort[2]);
  if (isIP(host) === 4) return { text, kind: 'network', network: addressList(host, 32), ports };
  if (host.startsWith('*.') && NAME.test(host.slice(2))) return { text, kind: 'wildcard', suffix: host.slice(1), ports };
  if (NAME.test(host)) return { text, kind: 'name', name: host, ports };
  throw new Error(`${JSON.stringify(text)}: ${JSON.stringify(hostPort[1])} is not a DNS name, *.wildcard name, IP address or CIDR`);
}

function inNetwork(network: BlockList, address: string | undefined): boolean {
  if (address === undefined) return false;
  const family = isIP(address);
  return family !== 0 && network.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/**
 * Decides whether the proxy may connect to `destination`: the first rule whose ports include its port and
 * that names its host (exactly, or below a wildcard) or whose address range holds its host (an IP literal) or
 * the address it resolved to. A pure function of its arguments.
 */
export function matchEgress(rules: readonly EgressRule[], destination: EgressDestination): EgressDecision {
  const host = normalizeHost(destination.host);
  for (const rule of rules) {
    if (rule.ports !== undefined && !rule.ports.includes(destination.port)) continue;
    const matches =
      rule.kind === 'name'
        ? host === rule.name
        : rule.kind === 'wildcard'
          ? host.endsWith(rule.suffix) && host.length > rule.suffix.length
          : inNetwork(rule.network, isIP(host) !== 0 ? host : destination.address);
    if (matches) return { allowed: true, rule: rule.text };
  }
  return { allowed: false, rule: undefined };
}

/** Whether some rule could allow `port` by address (so resolving a name that no name rule allows is worth it). */
export function hasNetworkRuleFor(rules: readonly EgressRule[], port: number): boolean {
  return rules.some(rule => rule.kind === 'network' && (rule.ports === undefined || rule.ports.includes(port)));
}

/**
 * The proxy's `--allow` rules for an McpServer's `spec.sandbox.egress`: `host[:ports]` for a host item (an IPv6
 * address in brackets), `cidr[:ports]` for a cidr item; all ports when `ports` is absent. CIDR items are listed
 * too: a proxy-aware client sends every request through the proxy, also those to addresses the NetworkPolicy
 * would let it reach directly.
 * @throws Error naming the item (`sandbox.egress[i].host` or `.cidr` or `.ports`) and what is wrong with it.
 */
export function egressAllowRules(egress: readonly EgressItem[]): string[] {
  return egress.map((item, index) => {
    const field = item.host !== undefined ? 'host' : 'cidr';
    const target = item.host ?? item.cidr;
    if (target === undefined || (item.host !== undefined && item.cidr !== undefined)) throw new Error(`sandbox.egress[${index}] must set exactly one of host and cidr`);
    if (item.ports !== undefined && item.ports.length === 0) throw new Error(`sandbox.egress[${index}].ports is empty: list at least one port, or leave it out for every port`);
    const written = field === 'host' && isIP(target) === 6 ? `[${target}]` : target;
    const text = item.ports === undefined ? written : `${written}:${item.ports.join(',')}`;
    try {
      const rule = parseEgressRule(text);
      if (field === 'cidr' && !text.includes('/')) throw new Error(`${JSON.stringify(target)} is not a CIDR such as 10.0.0.0/8`);
      if (field === 'host' && rule.kind === 'network' && text.includes('/')) throw new Error(`${JSON.stringify(target)} is a CIDR: put it in cidr`);
    } catch (error) {
      throw new Error(`sandbox.egress[${index}].${field}: ${(error as Error).message}`);
    }
    return text;
  });
}

/** The port the egress proxy listens on unless told otherwise. */
export const EGRESS_PROXY_PORT = 3128;

/**
 * The arguments of the egress proxy's container for an McpServer's `spec.sandbox.egress`, after the bridge
 * binary: `['egress-proxy', '--port', '3128', '--allow', rule, ...]` (see {@link egressAllowRules}).
 * @throws Error naming the bad item, as {@link egressAllowRules} does.
 */
export function egressProxyArgs(egress: readonly EgressItem[], options: { port?: number } = {}): string[] {
  const rules = egressAllowRules(egress);
  return ['egress-proxy', '--port', String(options.port ?? EGRESS_PROXY_PORT), ...rules.flatMap(rule => ['--allow', rule])];
}
