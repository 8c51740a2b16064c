/**
 * Classifies IP addresses for the SSRF guard: which special-purpose class an address is in (loopback,
 * private, link-local, cloud metadata, ...), or none for a public unicast address. The ranges come from
 * ipaddr.js (IANA special-purpose registries, RFC 6890 and successors); this file only names them and
 * looks inside IPv6 forms that embed an IPv4 address.
 */
import ipaddr from 'ipaddr.js';

/**
 * Cloud instance metadata endpoints: AWS, GCP, Azure, OCI, DigitalOcean (169.254.169.254), AWS over
 * IPv6 (fd00:ec2::254), Alibaba (100.100.100.200), Azure WireServer (168.63.129.16, in a public range).
 */
const CLOUD_METADATA_ADDRESSES = new Set(
  ['169.254.169.254', 'fd00:ec2::254', '100.100.100.200', '168.63.129.16'].map((text) => ipaddr.parse(text).toString()),
);

/** Host names of cloud metadata services (GCP `metadata.google.internal` and `metadata`; AWS `instance-data`). */
const CLOUD_METADATA_NAMES = new Set(['metadata.google.internal', 'metadata', 'instance-data', 'instance-data.ec2.internal']);

/** What people read for each ipaddr.js range name; a name missing here is shown as ipaddr.js spells it. */
const RANGE_NAMES: Record<string, string> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT (RFC 6598)',
  private: 'private (RFC 1918)',
  reserved: 'reserved',
  as112: 'AS112 (RFC 7534)',
  amt: 'AMT (RFC 7450)',
  uniqueLocal: 'unique-local (RFC 4193)',
  deprecatedSiteLocal: 'site-local (RFC 3879)',
  discard: 'discard-only (RFC 6666)',
  rfc6052: 'local-use NAT64 (RFC 8215)',
  teredo: 'Teredo tunnel (RFC 4380)',
  benchmarking: 'benchmarking (RFC 5180)',
  as112v6: 'AS112 (RFC 7534)',
  deprecatedOrchid: 'ORCHID (RFC 4843)',
  orchid2: 'ORCHIDv2 (RFC 7343)',
  droneRemoteIdProtocolEntityTags: 'DRIP entity tags (RFC 9374)',
  segmentRouting: 'segment routing (RFC 9602)',
};

/** The well-known NAT64 prefix 64:ff9b::/96 (RFC 6052), whose low 32 bits are the IPv4 address. */
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

/** Names of the IPv6 forms that carry an IPv4 address, for messages. */
const EMBEDDING_NAMES: Record<string, string> = {
  ipv4Mapped: 'IPv4-mapped (RFC 4291)',
  rfc6145: 'IPv4-translated (RFC 6145)',
  rfc6052: 'NAT64 (RFC 6052)',
  '6to4': '6to4 (RFC 3056)',
  unicast: 'IPv4-compatible (RFC 4291)',
};

/** Whether `hostname` (lower case, any trailing dots ignored) is the name of a cloud metadata service. */
export function isCloudMetadataName(hostname: string): boolean {
  return CLOUD_METADATA_NAMES.has(hostname.toLowerCase().replace(/\.+$/, ''));
}

/**
 * The special-purpose class `address` is in, as a phrase for people ("loopback", "private (RFC 1918)",
 * "cloud metadata service", "6to4 (RFC 3056) form of 10.0.0.1, which is private (RFC 1918)"), or `undefined` for a
 * public unicast address. IPv6 forms that embed an IPv4 address (IPv4-mapped, IPv4-translated, NAT64
 * 64:ff9b::/96, 6to4 2002::/16, IPv4-compatible ::/96) are judged by the IPv4 address they carry; the
 * local-use NAT64 prefix 64:ff9b:1::/48 (whose layout is the operator's) and Teredo are refused as such.
 *
 * @param address a parsed address (`ipaddr.parse`).
 */
export function addressClassOf(address: ipaddr.IPv4 | ipaddr.IPv6): string | undefined {
  if (CLOUD_METADATA_ADDRESSES.has(address.toString())) return 'cloud metadata service';
  const range = address.range();
  if (address.kind() === 'ipv4') return range === 'unicast' ? undefined : (RANGE_NAMES[range] ?? range);
  const embedded = embeddedIPv4(address as ipaddr.IPv6, range);
  if (embedded) {
    const inner = addressClassOf(embedded);
    return inner === undefined ? undefined : `${EMBEDDING_NAMES[range]} form of ${embedded.toString()}, which is ${inner}`;
  }
  return range === 'unicast' ? undefined : (RANGE_NAMES[range] ?? range);
}

/** The IPv4 address an IPv6 address of ipaddr.js range `range` carries, if its form has one at a known place. */
function embeddedIPv4(address: ipaddr.IPv6, range: string): ipaddr.IPv4 | undefined {
  const parts = address.parts;
  const fromWords = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  switch (range) {
    case 'ipv4Mapped':
    case 'rfc6145':
      return fromWords(parts[6]!, parts[7]!);
    case 'rfc6052':
      return address.match(NAT64_WELL_KNOWN) ? fromWords(parts[6]!, parts[7]!) : undefined;
    case '6to4':
      return fromWords(parts[1]!, parts[2]!);
    case 'unicast':
      // ::a.b.c.d (deprecated IPv4-compatible); :: and ::1 are ranges of their own and never get here.
      return parts.slice(0, 6).every((part) => part === 0) ? fromWords(parts[6]!, parts[7]!) : undefined;
    default:
      return undefined;
  }
}
