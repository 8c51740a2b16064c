/**
 * The servers the operator manages (McpServer custom resources), and `punk cluster` those of its manifests
 * directory, as they publish them in bucket `PUNK_MCP_SERVERS` (`managedServerSchema` by `kvKey(tenant, name)`).
 * Every gateway replica watches the bucket and serves its entries beside the manifests' (read-only in the registry
 * API, like them). An entry that is not a valid McpServer is logged with its key and the bad field and not served;
 * the others still are.
 */
import {
  buckets,
  kvKey,
  managedServerSchema,
  mcpServerSchema,
  type Bus,
  type BusSubscription,
  type Logger,
  type McpServer,
} from '@punk/lib';
import type { z } from 'zod';

/** A valid entry of the bucket: its server, and whether its `spec.url` is a process its writer launched (`managedServerSchema`). */
export interface ManagedEntry {
  server: McpServer;
  launched: boolean;
}

/** Options of {@link watchManagedServers}. */
export interface ManagedServersOptions {
  bus: Bus;
  log: Logger;
  /**
   * Called with every valid entry of the bucket: once when the watch has read the bucket, then after each change
   * (a put, an update, a delete), one call at a time.
   */
  onChange: (entries: ManagedEntry[]) => Promise<void>;
}

/**
 * Watches bucket `PUNK_MCP_SERVERS` (see the module comment); resolves once the servers it held at the start were
 * handed to `onChange`. `unsubscribe` stops the watch.
 * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
 */
export async function watchManagedServers(options: ManagedServersOptions): Promise<BusSubscription> {
  const { bus, log, onChange } = options;
  const kv = await bus.keyValue(buckets.mcpServers);
  const servers = new Map<string, ManagedEntry>();
  let caughtUp = false;
  const subscription = await kv.watch(async (change) => {
    const entry = change.operation === 'put' ? validEntry(change.key, change.value, log) : undefined;
    if (entry) servers.set(change.key, entry);
    else if (!servers.delete(change.key)) return;
    if (caughtUp) await onChange([...servers.values()]);
  });
  caughtUp = true;
  await onChange([...servers.values()]);
  return subscription;
}

/** A bucket entry, or `undefined` (logged with the key and the field) when it is not a valid one. */
function validEntry(key: string, value: unknown, log: Logger): ManagedEntry | undefined {
  const refuse = (field: string, message: string) => {
    log.error({ bucket: buckets.mcpServers.name, key, field }, `managed server ${key} is not served: ${field}: ${message}`);
    return undefined;
  };
  const entry = managedServerSchema.safeParse(value);
  if (!entry.success) {
    refuse(...firstIssue(entry.error));
    return;
  }
  const parsed = mcpServerSchema.safeParse(entry.data.server);
  if (!parsed.success) {
    refuse(...firstIssue(parsed.error, 'server'));
    return;
  }
  const server = parsed.data;
  const { namespace = 'default', name } = server.metadata;
  if (kvKey(namespace, name) !== key) {
    refuse('server.metadata', `names ${namespace}/${name}, whose key is ${kvKey(namespace, name)}, not ${key}`);
    return;
  }
  return { server, launched: entry.data.launched ?? false };
}

/** The path (`server.spec.port`) and message of the first issue of a failed parse. */
function firstIssue(error: z.ZodError, prefix?: string): [string, string] {
  const issue = error.issues[0]!;
  const path = [...(prefix ? [prefix] : []), ...issue.path.map(String)].join('.') || '(entry)';
  return [path, issue.message];
}
