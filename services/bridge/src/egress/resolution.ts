/**
 * From a request's DNS name to the one address the egress proxy connects to: the name is looked up fully
 * qualified ({@link lookupAddresses}), and {@link chooseAddress} keeps an address that a cidr or address rule
 * declares, or, for a name rule, a public unicast one; a name rule never leads to loopback, private, link-local,
 * metadata and other special-purpose addresses ({@link specialAddressReason}) that no cidr rule declares.
 */
import { lookup } from 'node:dns/promises';
import { specialAddressReason } from './address-class.js';
import { networkRuleFor, type EgressDecision, type EgressRule } from './rules.js';

/** What {@link chooseAddress} decided: the address and the rule that allows it, or a refusal and its reason. */
export type AddressChoice =
  | { allowed: true; address: string; rule: string }
  | {
      allowed: false;
      /** The first address refused, when a name rule allowed the name; for the log. */
      address: string | undefined;
      /** `resolves to a private (RFC 1918) address 10.0.0.5` when a name rule allowed the name; else undefined (no rule matches). */
      reason: string | undefined;
    };

/**
 * Picks, in the resolver's order, the first of `addresses` that a cidr or address rule allows on `port` (then
 * that rule decides), or, when `byName` (the decision on the name alone) allowed it, that is public unicast (then
 * the name rule decides). A pure function of its arguments.
 * @param addresses the addresses `host` resolved to (at least one).
 */
export function chooseAddress(
  rules: readonly EgressRule[],
  port: number,
  byName: EgressDecision,
  addresses: readonly string[],
): AddressChoice {
  let refused: { address: string; reason: string } | undefined;
  for (const address of addresses) {
    const declared = networkRuleFor(rules, address, port);
    if (declared) return { allowed: true, address, rule: declared.text };
    if (!byName.allowed) continue;
    const special = specialAddressReason(address);
    if (special === undefined) return { allowed: true, address, rule: byName.rule! };
    refused ??= { address, reason: `resolves to ${special}` };
  }
  return { allowed: false, address: refused?.address, reason: refused?.reason };
}

/** `localhost` and the names below it are loopback (RFC 6761 §6.3): answered here, never asked of DNS. */
const LOOPBACK = ['127.0.0.1', '::1'];

/**
 * The addresses of `host` (a DNS name as `parseRequestHost` returns it), in the resolver's order. The name is
 * looked up with a trailing dot, as fully qualified, so the pod's resolv.conf search list (`ndots:5`) never turns
 * `github.com` into `github.com.<namespace>.svc.cluster.local`; `localhost` and `*.localhost` are loopback.
 * @throws Error from `getaddrinfo` (ENOTFOUND, …) when the name does not resolve.
 */
export async function lookupAddresses(host: string): Promise<string[]> {
  if (host === 'localhost' || host.endsWith('.localhost')) return LOOPBACK;
  return (await lookup(`${host}.`, { all: true, order: 'verbatim' })).map((entry) => entry.address);
}
