/**
 * The tenants' McpPolicy custom resources, as the operator publishes them in bucket `PUNK_MCP_POLICIES` (whole
 * objects by `kvKey(tenant, name)`). Every gateway, mcp-front and governance replica watches the bucket and keeps
 * each tenant's policies compiled (compile.ts): the bucket is how policies reach every replica that decides. An entry
 * that is not a valid McpPolicy is logged with its key and the bad field and skipped: a policy already served under
 * that key stays served as it was (dropping it could widen access), and every other policy is still served.
 */
import type { Bus, BusSubscription } from '../bus/bus.js';
import { buckets, kvKey } from '../contracts.js';
import type { Logger } from '../log.js';
import { mcpPolicySchema, type McpPolicy } from '../spec/mcppolicy.js';
import { compilePolicies, type CompiledPolicies } from './compile.js';
import { defaultPolicy } from './rules.js';

/** A tenant's compiled policies and the generation they were compiled at. */
export interface TenantPolicy extends CompiledPolicies {
  /**
   * The bucket revision of the latest change to the tenant's McpPolicy objects this replica applied; 0 when it has
   * seen none (the defaults alone). Replicas that applied the same changes report the same generation.
   */
  generation: number;
}

/** The compiled policies of every tenant, kept current by a watch of bucket `PUNK_MCP_POLICIES`. */
export interface TenantPolicies {
  /** What a decision evaluates for `tenant`: its McpPolicy rules then the defaults, its rate limits, its generation. */
  of(tenant: string): TenantPolicy;
  /** Stops the watch. */
  stop(): Promise<void>;
}

/**
 * Watches bucket `PUNK_MCP_POLICIES`; resolves once the policies it held at the start are compiled. The built-in
 * rules (`defaultPolicy`) follow every tenant's own.
 * @throws PunkError `BusUnavailable` when the bucket cannot be opened or watched.
 */
export async function watchPolicies(bus: Bus, log: Logger): Promise<TenantPolicies> {
  const defaults = defaultPolicy;
  const kv = await bus.keyValue(buckets.mcpPolicies);
  /** Valid policies by bucket key. */
  const policies = new Map<string, McpPolicy>();
  const compiled = new Map<string, TenantPolicy>();
  const fallback: TenantPolicy = { ...compilePolicies([], defaults), generation: 0 };
  const recompile = (tenant: string, revision: number | undefined) => {
    const own = [...policies.values()].filter((p) => p.metadata.namespace === tenant);
    const generation = Math.max(revision ?? 0, compiled.get(tenant)?.generation ?? 0);
    compiled.set(tenant, { ...compilePolicies(own, defaults), generation });
  };
  const subscription: BusSubscription = await kv.watch((change) => {
    if (change.operation === 'delete') {
      const gone = policies.get(change.key);
      if (!gone) return;
      policies.delete(change.key);
      recompile(gone.metadata.namespace!, change.revision);
      log.info(
        { key: change.key, policy: gone.metadata.name, tenant: gone.metadata.namespace },
        `McpPolicy ${gone.metadata.namespace}/${gone.metadata.name} removed`,
      );
      return;
    }
    const policy = validPolicy(change.key, change.value, log, policies.has(change.key));
    if (!policy) return;
    policies.set(change.key, policy);
    recompile(policy.metadata.namespace!, change.revision);
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
