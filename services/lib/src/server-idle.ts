/**
 * Scale to zero when idle (`spec.idle`), the part the operator and `punk cluster` (which plays the operator's part)
 * share: how long a server has gone unused by the entries of bucket `PUNK_SERVER_ACTIVITY`, and the ledger events of
 * a sleep and a wake.
 */
import { randomUUID } from 'node:crypto';
import type { KvStore } from './bus/bus.js';
import { kvKey, serverActivitySchema, type LedgerEvent, type ServerActivity } from './contracts.js';

/** How often a gateway replica writes the activity of a server it is using, at most, in milliseconds. */
export const ACTIVITY_WRITE_MS = 5_000;

/**
 * Age past which an activity entry's calls in flight and open streams no longer hold its server up, in milliseconds:
 * its replica rewrites it every {@link ACTIVITY_WRITE_MS} while anything is in flight, so an older one is from a
 * replica that stopped.
 */
export const ACTIVITY_STALE_MS = 4 * ACTIVITY_WRITE_MS;

/** Annotation on an McpServer scaled to zero by `spec.idle`: the replicas a wake scales it back to. */
export const WAKE_REPLICAS_ANNOTATION = 'mcp.punk.dev/wake-replicas';

/**
 * How long a server has gone unused, in milliseconds, or undefined while a fresh entry shows a call in flight or a
 * stream open. `entries` are the gateway replicas' entries of the server; `since` (epoch milliseconds) is when it
 * became available last (its start or wake), the idle clock's start when no call came since.
 */
export function idleForMs(entries: readonly ServerActivity[], since: number, now: number): number | undefined {
  let last = since;
  for (const entry of entries) {
    const fresh = now - Date.parse(entry.writtenAt) < ACTIVITY_STALE_MS;
    if (fresh && (entry.inFlight > 0 || entry.streams > 0)) return undefined;
    last = Math.max(last, Date.parse(entry.lastUsedAt));
  }
  return Math.max(0, now - last);
}

/**
 * The gateway replicas' entries of McpServer `namespace/name` in bucket `PUNK_SERVER_ACTIVITY` (keys
 * `kvKey(namespace, name, instanceId)`); `keys` are the bucket's keys, listed once per check of every server. An entry
 * that does not parse is left out (a replica of another version: it holds nothing up).
 */
export async function activityEntries(
  bucket: KvStore,
  keys: readonly string[],
  namespace: string,
  name: string,
): Promise<ServerActivity[]> {
  const prefix = `${kvKey(namespace, name)}.`;
  const entries: ServerActivity[] = [];
  for (const key of keys.filter((k) => k.startsWith(prefix))) {
    const parsed = serverActivitySchema.safeParse((await bucket.get(key))?.value);
    if (parsed.success) entries.push(parsed.data);
  }
  return entries;
}

/** Run id of server lifecycle events, which belong to no client run: `server.<namespace>.<name>` (no `/`, so it fits a URL path segment). */
export function lifecycleRunId(namespace: string, name: string): string {
  return `server.${namespace}.${name}`;
}

/** A `server.slept` or `server.woken` ledger event of McpServer `namespace/name`, appended by `source` (`operator`, `cluster`). */
export function idleEvent(
  type: 'server.slept' | 'server.woken',
  namespace: string,
  name: string,
  source: string,
  data: Record<string, unknown>,
): LedgerEvent {
  return {
    id: randomUUID(),
    type,
    tenant: namespace,
    runId: lifecycleRunId(namespace, name),
    occurredAt: new Date().toISOString(),
    source,
    server: name,
    data,
  };
}
