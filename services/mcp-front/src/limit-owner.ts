/** Who the front's bounds per caller (listen streams, sessions) count against. */
import type { Principal } from '@punk/lib';

/**
 * The principal, or the client address of an anonymous caller (without authentication every caller is the same
 * anonymous principal, so its address tells callers apart).
 */
export function limitOwnerOf(principal: Principal, clientAddress: string): string {
  return principal.subject === 'anonymous' ? `address:${clientAddress}` : `principal:${principal.tenant}/${principal.subject}`;
}
