/**
 * Who and how the client connected, seen through reverse proxies: each
 * trusted proxy appends its peer to `X-Forwarded-For` and its scheme to
 * `X-Forwarded-Proto`, so the entry `trustedProxies` hops from the right
 * is the client's; entries a client wrote itself sit further left and are
 * never used. With no trusted proxy, the socket's own values.
 */

/** The client's address: the socket's peer, or the `X-Forwarded-For` entry `trustedProxies` hops from the right. */
export function clientAddressOf(
  req: { socket: { remoteAddress?: string | undefined }; headers: Record<string, string | string[] | undefined> },
  trustedProxies: number,
): string {
  return forwarded(req.headers['x-forwarded-for'], req.socket.remoteAddress ?? 'unknown', trustedProxies);
}

/** The scheme the client used (`http` or `https`): the socket's, or the `X-Forwarded-Proto` entry `trustedProxies` hops from the right. */
export function schemeOf(req: { socket: object; headers: Record<string, string | string[] | undefined> }, trustedProxies: number): string {
  const own = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http';
  return forwarded(req.headers['x-forwarded-proto'], own, trustedProxies).toLowerCase();
}

/** The value `hops` entries from the right of `[…header entries, own]` (the leftmost when there are fewer). */
function forwarded(header: string | string[] | undefined, own: string, hops: number): string {
  if (hops === 0 || header === undefined) return own;
  const entries = [
    ...(Array.isArray(header) ? header : [header])
      .flatMap((h) => h.split(','))
      .map((s) => s.trim())
      .filter((s) => s !== ''),
    own,
  ];
  return entries[Math.max(0, entries.length - 1 - hops)]!;
}
