/**
 * Which names a Punk listener answers to in the `Host` header: DNS-rebinding
 * protection (MCP 2025-11-25 basic/transports "Security Warning"). A web page
 * whose name is rebound to 127.0.0.1 reaches a loopback listener but still
 * says its own name in `Host`, so on loopback only loopback names (and the
 * host of `PUNK_PUBLIC_URL`) are answered, on every path but `/healthz` and
 * `/readyz`: the MCP endpoint and the `/api/v1` APIs alike.
 */
import type { PunkConfig } from '../config.js';

/** Host names a loopback listener answers to by default. */
export const LOOPBACK_HOST_NAMES = ['localhost', '127.0.0.1', '[::1]'] as const;

/** Whether a listen address is a loopback one (`127.0.0.0/8`, `::1`, `localhost`). */
export function isLoopbackAddress(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * The host names a listener of this configuration answers to: `PUNK_ALLOWED_HOSTS` when set; else, on a
 * loopback `PUNK_HOST`, {@link LOOPBACK_HOST_NAMES} and the host of `PUNK_PUBLIC_URL`; else undefined
 * (any host: an ingress or the cluster network decides).
 */
export function allowedHostsOf(config: Pick<PunkConfig, 'allowedHosts' | 'host' | 'publicUrl'>): readonly string[] | undefined {
  if (config.allowedHosts) return config.allowedHosts;
  if (!isLoopbackAddress(config.host)) return undefined;
  return [...LOOPBACK_HOST_NAMES, ...(config.publicUrl ? [new URL(config.publicUrl).hostname] : [])];
}

/**
 * Whether a `Host` header names one of `allowed` (host names, any port, case-insensitive; IPv6 in
 * brackets). A missing or malformed header never does.
 */
export function isAllowedHost(hostHeader: string | undefined, allowed: readonly string[]): boolean {
  if (!hostHeader) return false;
  const name = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::\d{1,5})?$/i.exec(hostHeader.trim())?.[1]?.toLowerCase();
  return name !== undefined && allowed.some((host) => host.toLowerCase() === name);
}
