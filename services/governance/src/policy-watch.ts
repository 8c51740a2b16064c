/**
 * The tenants' McpPolicy custom resources, as the operator publishes them in bucket `PUNK_MCP_POLICIES` (whole
 * objects by `kvKey(tenant, name)`). Every governance replica watches the bucket and keeps each tenant's policies
 * compiled (compile.ts). An entry that is not a valid McpPolicy is logged with its key and the bad field and
 * skipped: a policy already served under that key stays served as it was (dropping it could widen access), and
 * every other policy is still served.
 */
import { buckets, kvKey, mcpPolicySchema, type Bus, type BusSubscription, type Logger, type McpPolicy } from '@punk/lib';
import { compilePolicies, type CompiledPolicies } from './compile.js';
import type { PolicyRule } from './policy.js';

/** The compiled policies of every tenant, kept current by a watch of bucket `PUNK_MCP_POLICIES`. */
export interface TenantPolicies {
  /** What governance evaluates for `tenant`: its McpPolicy rules then the defaults, and its rate limits. */
  of(tenant: string): CompiledPolicies;
  /** Stops the watch. */
  stop(): Promise<void>;
}

/**
 * Watches bucket `PUNK_MCP_POLICIES`; resolves once the policies it held at the start are compiled.
 * @param defaults the built-in rules that follow every tenant's own.
 * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
 */
export async function watchPolicies(bus: Bus, log: Logger, defaults: readonly PolicyRule[]): Promise<TenantPolicies> {
  const kv = await bus.keyValue(buckets.mcpPolicies);
  /** Valid policies by bucket key. */
  const policies = new Map<string, McpPolicy>();
  const compiled = new Map<string, CompiledPolicies>();
  const fallback = compilePolicies([], defaults);
  const recompile = (tenant: string) => {
    const own = [...policies.values()].filter((p) => p.metadata.namespace === tenant);
    if (own.length === 0) compiled.delete(tenant);
    else compiled.set(tenant, compilePolicies(own, defaults));
  };
  const subscription: BusSubscription = await kv.watch((change) => {
    if (change.operation === 'delete') {
      const gone = policies.get(change.key);
      if (!gone) return;
      policies.delete(change.key);
      recompile(gone.metadata.namespace!);
      log.info(
        { key: change.key, policy: gone.metadata.name, tenant: gone.metadata.namespace },
        `McpPolicy ${gone.metadata.namespace}/${gone.metadata.name} removed`,
      );
      return;
    }
    const policy = validPolicy(change.key, change.value, log, policies.has(change.key));
    if (!policy) return;
    policies.set(change.key, policy);
    recompile(policy.metadata.namespace!);
    log.info(
      { key: change.key, policy: policy.metadata.name, tenant: policy.metadata.namespace },
      `McpPolicy ${policy.metadata.namespace}/${policy.metadata.name} served`,
    );
  });
  return {
    of: (tenant) => compiled.get(tenant) ?? fallback,
    stop: () => subscription.unsubscribe(),
  };
}

/** The McpPolicy of a bucket entry, or `undefined` (logged with the key and the field) when it is not a valid one. */
function validPolicy(key: string, value: unknown, log: Logger, previous: boolean): McpPolicy | undefined {
  const refuse = (field: string, message: string) => {
    const kept = previous ? '; the previous version stays served' : '';
    log.error({ bucket: buckets.mcpPolicies.name, key, field }, `McpPolicy entry ${key} is skipped: ${field}: ${message}${kept}`);
    return undefined;
  };
  const parsed = mcpPolicySchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    refuse(issue.path.map(String).join('.') || '(entry)', issue.message);
    return;
  }
  const { namespace, name } = parsed.data.metadata;
  if (namespace === undefined) {
    refuse('metadata.namespace', 'is required: it names the tenant');
    return;
  }
  if (kvKey(namespace, name) !== key) {
    refuse('metadata', `names ${namespace}/${name}, whose key is ${kvKey(namespace, name)}, not ${key}`);
    return;
  }
  return parsed.data;
}
