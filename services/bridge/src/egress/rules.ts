/**
 * The egress allow-list of a server pod, as the egress proxy enforces it: rules of the form
 * `host[:port[,port...]]` (an exact DNS name, `*.example.com` for every name below example.com, an IP address,
 * `[v6]`) or `cidr[:port[,port...]]` (`10.0.0.0/8:443`), all ports when none are given. The rules come from the
 * McpServer's `spec.sandbox.egress` ({@link egressAllowRules}); matching is a pure function ({@link matchEgress})
 * of a request host checked and normalized once ({@link parseRequestHost}). Which address a name may lead to is
 * resolution.ts's part: a name rule only public ones, a cidr or address rule its own.
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
  /** The request's host as {@link parseRequestHost} normalized it: a DNS name or an IP address (IPv6 without brackets). */
  host: string;
  port: number;
  /** The address the proxy resolved `host` to and would connect to, when known; CIDR and IP rules match it too. */
  address?: string;
}

/** A label of letters, digits and hyphens, neither first nor last a hyphen (RFC 1123 §2.1, RFC 952). */
const LABEL = '[a-z0-9]([a-z0-9-]*[a-z0-9])?';
const NAME = new RegExp(`^${LABEL}(\\.${LABEL})*$`);
/** A last label that resolvers (inet_aton) and URL parsers read as a number: `127.1`, `0x7f000001`, `010.0.0.1`. */
const NUMERIC_LAST_LABEL = /(^|\.)(0x[0-9a-f]*|[0-9]+)$/;

/**
 * Whether `host` (lower case, no trailing dot) is a DNS name of LDH labels, each at most 63 long, 253 in all
 * (RFC 1035 §2.3.4), whose last label is not a number (RFC 3696 §2), which `getaddrinfo` would take for an IPv4 address.
 */
function isName(host: string): boolean {
  return host.length <= 253 && NAME.test(host) && !NUMERIC_LAST_LABEL.test(host) && host.split('.').every((label) => label.length <= 63);
}

/** Lower-cased, without a trailing dot or IPv6 brackets: how a rule's host is kept. */
export function normalizeHost(host: string): string {
  const lower = host.toLowerCase();
  const unbracketed = lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
  return unbracketed.endsWith('.') ? unbracketed.slice(0, -1) : unbracketed;
}

/** The host of one proxied request, checked and normalized once: what is matched and what is resolved. */
export interface RequestHost {
  /** A DNS name (lower case, no trailing dot, ASCII) or an IP address (IPv6 without brackets, compressed). */
  host: string;
  /** 4 or 6 for an IP address, 0 for a DNS name. */
  family: 0 | 4 | 6;
}

/** Why a request's host is not one the proxy takes (answered 400); the message names the host. */
export class RequestHostError extends Error {
  constructor(
    readonly host: string,
    reason: string,
  ) {
    super(`${JSON.stringify(host)} is not a host the egress proxy takes: ${reason}`);
    this.name = 'RequestHostError';
  }
}

/**
 * Checks and normalizes the host of a request (the `host` of `CONNECT host:port`, or a URL's hostname): a DNS name
 * of LDH labels, an IPv4 address in dotted-decimal, or an IPv6 address in brackets (no zone). It is lower-cased and
 * one trailing dot is removed. Names must be ASCII: a client sends an internationalized name in its A-label form
 * (`xn--…`, IDNA 2008, RFC 5891), as request targets are ASCII (RFC 9112 §3.2); the proxy does not convert, so a
 * rule matches one spelling only.
 * @throws RequestHostError naming the host and what is wrong with it.
 */
export function parseRequestHost(raw: string): RequestHost {
  if (!/^[\x21-\x7e]+$/.test(raw))
    throw new RequestHostError(
      raw,
      // eslint-disable-next-line no-control-regex -- the range is every ASCII character
      /[^\x00-\x7f]/.test(raw)
        ? 'not ASCII: send an internationalized name in its A-label (xn--) form'
        : 'empty, or has spaces or control characters',
    );
  const lower = raw.toLowerCase();
  if (lower.startsWith('[')) {
    const inner = lower.endsWith(']') ? lower.slice(1, -1) : '';
    if (isIP(inner) !== 6 || inner.includes('%')) throw new RequestHostError(raw, 'brackets hold an IPv6 address without a zone');
    return { host: new URL(`http://[${inner}]/`).hostname.slice(1, -1), family: 6 };
  }
  const host = lower.endsWith('.') ? lower.slice(0, -1) : lower;
  if (isIP(host) === 4) return { host, family: 4 };
  if (isIP(host) === 6) throw new RequestHostError(raw, 'write an IPv6 address in brackets');
  if (!isName(host))
    throw new RequestHostError(
      raw,
      'not a DNS name of letters, digits and hyphens in dot-separated labels (at most one trailing dot), nor an IP address in dotted-decimal or [IPv6] form',
    );
  return { host, family: 0 };
}

function parsePorts(text: string, list: string | undefined): number[] | undefined {
  if (list === undefined) return undefined;
  const ports = list.split(',').map((port) => (/^\d{1,5}$/.test(port) ? Number(port) : NaN));
  if (ports.some((port) => !(port >= 1 && port <= 65535)))
    throw new Error(`${JSON.stringify(text)}: ports must be numbers from 1 to 65535 separated by commas`);
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
    if (family === 0 || prefix > (family === 4 ? 32 : 128))
      throw new Error(`${JSON.stringify(text)} is not a CIDR such as 10.0.0.0/8 or fd00::/8 (with optional :port,port)`);
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
  if (host.startsWith('*.') && isName(host.slice(2))) return { text, kind: 'wildcard', suffix: host.slice(1), ports };
  if (isName(host)) return { text, kind: 'name', name: host, ports };
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
 * the address it resolved to. A pure function of its arguments; it does not normalize `destination.host` again.
 */
export function matchEgress(rules: readonly EgressRule[], destination: EgressDestination): EgressDecision {
  const { host } = destination;
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
  return rules.some((rule) => rule.kind === 'network' && (rule.ports === undefined || rule.ports.includes(port)));
}

/** The first address or CIDR rule that allows `address` on `port` (declared), or undefined. Pure. */
export function networkRuleFor(rules: readonly EgressRule[], address: string, port: number): EgressRule | undefined {
  return rules.find(
    (rule) => rule.kind === 'network' && (rule.ports === undefined || rule.ports.includes(port)) && inNetwork(rule.network, address),
  );
}

/** One `sandbox.egress` item, checked and normalized: a lower-case host, or a cidr with its prefix; ports unique and ascending. */
export type EgressEntry = { host: string; ports?: number[] } | { cidr: string; ports?: number[] };

/** Why one `sandbox.egress` item is not a rule: the field that is wrong, and a sentence for people without it. */
export class EgressItemError extends Error {
  /**
   * @param field path of the offending field: `<item>.host`, `.cidr`, `.ports`, or the item itself.
   * @param reason what is wrong and what to write instead; the message is `<field>: <reason>`.
   */
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = 'EgressItemError';
  }
}

const CIDR_EXAMPLE = 'an IPv4 or IPv6 range such as 10.0.0.0/8 or 2001:db8::/32 (a bare address is one host)';

/**
 * Checks one `sandbox.egress` item with {@link parseEgressRule}, the proxy's own parser, so what passes here is
 * a rule the proxy takes: `host` a DNS name, `*.` wildcard name or IP address (lower-cased), `cidr` an IPv4 or
 * IPv6 range (a bare address becomes its /32 or /128), `ports` at least one port when present.
 * @param at path of the item in its object (`sandbox.egress[2]`, `spec.sandbox.egress[2]`), for errors.
 * @throws EgressItemError naming `<at>.host`, `<at>.cidr`, `<at>.ports`, or `<at>` when not exactly one of host and cidr is set.
 */
export function checkEgressItem(item: EgressItem, at: string): EgressEntry {
  if ((item.host === undefined) === (item.cidr === undefined)) throw new EgressItemError(at, 'set exactly one of host and cidr');
  if (item.ports !== undefined && item.ports.length === 0)
    throw new EgressItemError(`${at}.ports`, 'lists no port: list at least one, or leave ports out for every port');
  if (item.ports?.some((port) => !(Number.isInteger(port) && port >= 1 && port <= 65535)))
    throw new EgressItemError(`${at}.ports`, `${JSON.stringify(item.ports)}: ports must be numbers from 1 to 65535`);
  const ports = item.ports && { ports: [...new Set(item.ports)].sort((a, b) => a - b) };
  const suffix = ports ? `:${ports.ports.join(',')}` : '';
  if (item.host !== undefined) {
    const host = item.host;
    // Ports have their own field; a colon here is an IPv6 address or a mistake such as a URL.
    if (host.includes('/') || (host.includes(':') && isIP(host) !== 6)) {
      throw new EgressItemError(
        `${at}.host`,
        `${JSON.stringify(host)} is not a DNS name, *.wildcard name or IP address${host.includes('/') && isIP(host.split('/')[0]!) !== 0 ? ': put a range in cidr' : ''}`,
      );
    }
    try {
      parseEgressRule((isIP(host) === 6 ? `[${host}]` : host) + suffix);
    } catch (error) {
      throw new EgressItemError(`${at}.host`, (error as Error).message);
    }
    return { host: normalizeHost(host), ...ports };
  }
  const [address = '', prefix, ...rest] = item.cidr!.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0 || (prefix !== undefined && !/^\d{1,3}$/.test(prefix)))
    throw new EgressItemError(`${at}.cidr`, `${JSON.stringify(item.cidr)} is not a CIDR: ${CIDR_EXAMPLE}`);
  const cidr = prefix === undefined ? `${address}/${family === 4 ? 32 : 128}` : item.cidr!;
  try {
    parseEgressRule(cidr + suffix);
  } catch {
    throw new EgressItemError(`${at}.cidr`, `${JSON.stringify(item.cidr)} is not a CIDR: ${CIDR_EXAMPLE}`);
  }
  return { cidr, ...ports };
}

/** The `--allow` rule of a checked item: `host[:ports]` (an IPv6 address in brackets) or `cidr[:ports]`. */
export function egressRuleOf(entry: EgressEntry): string {
  const target = 'host' in entry ? (isIP(entry.host) === 6 ? `[${entry.host}]` : entry.host) : entry.cidr;
  return entry.ports === undefined ? target : `${target}:${entry.ports.join(',')}`;
}

/**
 * The proxy's `--allow` rules for an McpServer's `spec.sandbox.egress` ({@link checkEgressItem},
 * {@link egressRuleOf}); all ports when `ports` is absent. CIDR items are listed too: a proxy-aware client sends
 * every request through the proxy, also those to addresses the NetworkPolicy would let it reach directly.
 * @throws EgressItemError naming the item (`sandbox.egress[i].host` or `.cidr` or `.ports`) and what is wrong with it.
 */
export function egressAllowRules(egress: readonly EgressItem[]): string[] {
  return egress.map((item, index) => egressRuleOf(checkEgressItem(item, `sandbox.egress[${index}]`)));
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
  return ['egress-proxy', '--port', String(options.port ?? EGRESS_PROXY_PORT), ...rules.flatMap((rule) => ['--allow', rule])];
}
