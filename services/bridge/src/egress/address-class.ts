/**
 * Which addresses a name rule of the egress allow-list must not lead to: every address outside public unicast
 * (loopback, RFC 1918 private, RFC 4193 unique-local, link-local, RFC 6598 carrier-grade NAT, unspecified,
 * multicast, broadcast, reserved and the other IANA special-purpose ranges, RFC 6890), the cloud metadata
 * endpoints, and the IPv6 forms that carry such an IPv4 address. The ranges are ipaddr.js's (`range()`); this
 * file names them for people and looks inside the IPv6 forms that embed an IPv4 address.
 */
import ipaddr from 'ipaddr.js';

/**
 * Cloud instance metadata endpoints: 169.254.169.254 (AWS, GCP, Azure, OCI, …; link-local anyway),
 * fd00:ec2::254 (AWS over IPv6; unique-local anyway), 100.100.100.200 (Alibaba; carrier-grade NAT anyway) and
 * 168.63.129.16 (Azure WireServer, inside a public range, so named here).
 */
const CLOUD_METADATA = new Set(
  ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200', '168.63.129.16'].map((text) => ipaddr.parse(text).toString()),
);

/** How a message names each ipaddr.js range; a range missing here is named as ipaddr.js spells it. */
const RANGE_NAMES: Record<string, string> = {
  unspecified: 'an unspecified',
  broadcast: 'a broadcast',
  multicast: 'a multicast',
  linkLocal: 'a link-local',
  loopback: 'a loopback',
  carrierGradeNat: 'a carrier-grade NAT (RFC 6598)',
  private: 'a private (RFC 1918)',
  reserved: 'a reserved',
  uniqueLocal: 'a unique-local (RFC 4193)',
  deprecatedSiteLocal: 'a site-local',
  rfc6052: 'a local-use NAT64 (RFC 8215)',
  teredo: 'a Teredo (RFC 4380)',
};

/** The well-known NAT64 prefix (RFC 6052 §2.1): its low 32 bits are the IPv4 address. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

/** Names of the IPv6 forms that carry an IPv4 address. */
const FORM_NAMES: Record<string, string> = {
  ipv4Mapped: 'IPv4-mapped',
  rfc6145: 'IPv4-translated',
  rfc6052: 'NAT64',
  '6to4': '6to4',
  unicast: 'IPv4-compatible',
};

/** The IPv4 address an IPv6 address of ipaddr.js range `range` carries, when its form puts one at a known place. */
function embeddedIPv4(address: ipaddr.IPv6, range: string): ipaddr.IPv4 | undefined {
  const [, w1 = 0, w2 = 0, , , , w6 = 0, w7 = 0] = address.parts;
  const ipv4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (range) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d (RFC 4291 §2.5.5.2)
    case 'rfc6145': // ::ffff:0:a.b.c.d
      return ipv4(w6, w7);
    case 'rfc6052': // 64:ff9b::a.b.c.d; the local-use 64:ff9b:1::/48 has an operator's layout and is refused as such
      return address.match(NAT64_WELL_KNOWN) ? ipv4(w6, w7) : undefined;
    case '6to4': // 2002:AABB:CCDD::/48 (RFC 3056 §2)
      return ipv4(w1, w2);
    case 'unicast': // ::a.b.c.d, the deprecated IPv4-compatible form (RFC 4291 §2.5.5.1)
      return address.parts.slice(0, 6).every((part) => part === 0) ? ipv4(w6, w7) : undefined;
    default:
      return undefined;
  }
}

/**
 * Why a name rule may not lead to `address`, as words that follow "resolves to" (`a private (RFC 1918) address
 * 10.0.0.5`, `a loopback address ::ffff:7f00:1 (the IPv4-mapped form of 127.0.0.1)`), or `undefined` for a
 * public unicast address. A Teredo address (RFC 4380) is refused as such: it tunnels to an IPv4 host the proxy
 * cannot vouch for.
 * @param address an IPv4 or IPv6 address as `getaddrinfo` returns it.
 * @throws Error when `address` is not an IP address.
 */
export function specialAddressReason(address: string): string | undefined {
  const parsed = ipaddr.parse(address);
  if (CLOUD_METADATA.has(parsed.toString())) return `a cloud metadata address ${address}`;
  const range = parsed.range();
  if (parsed.kind() === 'ipv6') {
    const inner = embeddedIPv4(parsed as ipaddr.IPv6, range);
    if (inner) {
      const reason = specialAddressReason(inner.toString());
      return reason && `${reason.replace(/ [^ ]+$/, '')} ${address} (the ${FORM_NAMES[range]} form of ${inner.toString()})`;
    }
  }
  return range === 'unicast' ? undefined : `${RANGE_NAMES[range] ?? `a ${range}`} address ${address}`;
}
