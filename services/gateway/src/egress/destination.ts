/**
 * The destination half of the SSRF guard: resolves an upstream URL's host once and checks every address
 * it resolves to against the policy, so the connection can go to a checked address and nowhere else.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { errorMessage, PunkError, type PunkConfig } from '@punk/lib';
import { addressClassOf, isCloudMetadataName } from './address-class.js';
import { checkUrlShape, egressRefused, redactUrl } from './url-shape.js';

/** One address a host name resolves to, as `dns.lookup` with `all: true` answers it. */
export interface ResolvedAddress {
  address: string;
  /** 4 or 6. */
  family: number;
}

/** Resolves a host name to all its addresses (`dns.lookup(hostname, { all: true })` semantics). */
export type HostLookup = (hostname: string) => Promise<ResolvedAddress[]>;

/** Where http upstreams may connect to. */
export interface DestinationPolicy {
  /**
   * The open-dev carve-out: when true, destinations in every special-purpose class (loopback, private,
   * link-local, unique-local, CGNAT, multicast, cloud metadata, ...) are allowed. Meant for local
   * development with authentication off (`PUNK_AUTH_MODE=off`), where upstreams usually run on this
   * machine; never for a deployment that authenticates its callers. The URL shape is checked all the same.
   */
  allowPrivate: boolean;
  /**
   * CIDRs (`10.96.0.0/12`, `fd00::/8`, `127.0.0.1/32`) whose addresses are allowed even when their class
   * is refused: the configuration key `upstreamAllowedNetworks` (`PUNK_UPSTREAM_ALLOWED_NETWORKS`).
   */
  allowedNetworks: readonly string[];
  /**
   * Origins (`http://127.0.0.1:4101`) of processes Punk itself launched for the server this policy guards (the
   * HTTP servers `punk cluster` starts once for every gateway): not remote URLs, so an IP-literal URL of exactly
   * such an origin is allowed whatever its address class. Another port, host or redirect target is checked as usual.
   */
  launchedOrigins?: readonly string[];
  /** Resolves host names; default `dns.lookup` from `node:dns/promises` with `all: true`. */
  lookup?: HostLookup;
}

/** A URL that passed the guard, and the addresses a connection to it may use (all checked). */
export interface CheckedDestination {
  /** The parsed, WHATWG-normalized URL. */
  url: URL;
  /** `url.hostname` without the brackets of an IPv6 literal: the name for Host, SNI and certificate checks. */
  hostname: string;
  /** Every address the host resolved to, in the resolver's order, each checked; one for an IP literal. */
  addresses: ResolvedAddress[];
}

/** How to allow what the policy refused, for messages. */
const HOW_TO_ALLOW =
  'to allow it, add its network to PUNK_UPSTREAM_ALLOWED_NETWORKS, or, for local development only, turn authentication off (PUNK_AUTH_MODE=off)';

/**
 * The destination policy a gateway runs with: the open-dev carve-out (`allowPrivate`) exactly when
 * authentication is off (`PUNK_AUTH_MODE=off`), and the networks of `PUNK_UPSTREAM_ALLOWED_NETWORKS`.
 */
export function destinationPolicyOf(config: Pick<PunkConfig, 'authMode' | 'upstreamAllowedNetworks'>): DestinationPolicy {
  return { allowPrivate: config.authMode === 'off', allowedNetworks: config.upstreamAllowedNetworks };
}

/**
 * Checks `url` (shape first, {@link checkUrlShape}) and its destination: resolves the host once (an IP
 * literal, in any form the WHATWG parser normalizes such as `http://2130706433`, is not resolved) and
 * checks every address of the answer. Unless `policy.allowPrivate` (the open-dev carve-out), an address
 * in a special-purpose class (see `addressClassOf`: loopback, unspecified, private, link-local,
 * unique-local, CGNAT, multicast, broadcast, reserved, cloud metadata, and IPv6 forms embedding such an
 * IPv4 address) is refused unless it lies in `policy.allowedNetworks`; one refused address refuses the
 * whole answer. An IP-literal URL whose origin is one of `policy.launchedOrigins` (a process Punk launched) is allowed. Cloud metadata host names (GCP `metadata.google.internal` and `metadata`, AWS
 * `instance-data` and `instance-data.ec2.internal`) are refused by name before any resolution.
 *
 * @returns the URL and the checked addresses; connect to those and resolve nothing again.
 * @throws PunkError `EgressRefused` (URL with userinfo and query values removed, the address, its class, how to allow it);
 *   `UpstreamUnreachable` when the host does not resolve; `InvalidConfig` for an entry of
 *   `allowedNetworks` that is not a CIDR.
 */
export async function checkDestination(url: string | URL, policy: DestinationPolicy): Promise<CheckedDestination> {
  const parsed = checkUrlShape(url);
  const hostname = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname;
  const networks = parseNetworks(policy.allowedNetworks);
  if (!policy.allowPrivate && isCloudMetadataName(hostname)) {
    throw egressRefused(
      url,
      `${hostname} is the name of a cloud metadata service; for local development only, turn authentication off (PUNK_AUTH_MODE=off)`,
      { class: 'cloud metadata service' },
    );
  }
  const family = isIP(hostname);
  if (family !== 0 && policy.launchedOrigins?.includes(parsed.origin))
    return { url: parsed, hostname, addresses: [{ address: hostname, family }] };
  const addresses = family !== 0 ? [{ address: hostname, family }] : await resolve(url, hostname, policy.lookup ?? defaultLookup);
  for (const { address } of addresses) {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = ipaddr.parse(address);
    } catch {
      throw egressRefused(url, `${hostname} resolved to ${JSON.stringify(address)}, which is not an IP address`);
    }
    if (policy.allowPrivate || inNetworks(ip, networks)) continue;
    const addressClass = addressClassOf(ip);
    if (addressClass === undefined) continue;
    const where = address === hostname ? `${address} is` : `${hostname} resolves to ${address}, which is`;
    throw egressRefused(url, `${where} a special-purpose address, class ${addressClass}; ${HOW_TO_ALLOW}`, {
      address,
      class: addressClass,
    });
  }
  return { url: parsed, hostname, addresses };
}

const defaultLookup: HostLookup = (hostname) => dnsLookup(hostname, { all: true });

/** All addresses of `hostname` (never empty). */
async function resolve(url: string | URL, hostname: string, lookup: HostLookup): Promise<ResolvedAddress[]> {
  let addresses: ResolvedAddress[];
  try {
    addresses = await lookup(hostname);
  } catch (error) {
    throw new PunkError(
      'UpstreamUnreachable',
      `upstream URL ${redactUrl(url)}: cannot resolve ${hostname} (${errorMessage(error)})`,
      { url: redactUrl(url) },
      { cause: error },
    );
  }
  if (addresses.length === 0)
    throw new PunkError('UpstreamUnreachable', `upstream URL ${redactUrl(url)}: ${hostname} resolves to no address`, {
      url: redactUrl(url),
    });
  return addresses;
}

/** Whether `ip`, or the IPv4 address of an IPv4-mapped `ip` (`::ffff:10.0.0.1`), lies in one of `networks`. */
function inNetworks(ip: ipaddr.IPv4 | ipaddr.IPv6, networks: [ipaddr.IPv4 | ipaddr.IPv6, number][]): boolean {
  const forms = ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress() ? [ip, (ip as ipaddr.IPv6).toIPv4Address()] : [ip];
  return forms.some((form) => networks.some(([network, bits]) => network.kind() === form.kind() && form.match(network, bits)));
}

/** `allowedNetworks` parsed. */
function parseNetworks(allowedNetworks: readonly string[]): [ipaddr.IPv4 | ipaddr.IPv6, number][] {
  return allowedNetworks.map((cidr) => {
    try {
      return ipaddr.parseCIDR(cidr);
    } catch {
      throw new PunkError(
        'InvalidConfig',
        `PUNK_UPSTREAM_ALLOWED_NETWORKS: ${JSON.stringify(cidr)} is not a CIDR such as 10.0.0.0/8 or fd00::/8`,
        { key: 'upstreamAllowedNetworks' },
      );
    }
  });
}
