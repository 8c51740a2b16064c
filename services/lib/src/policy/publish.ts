/**
 * How an McpPolicy object reaches bucket `PUNK_MCP_POLICIES`, the one path the operator (from the cluster's
 * objects) and `punk up` (from its manifests directory) both take: the object is validated with `mcpPolicySchema`
 * and stored whole under `kvKey(namespace, name)`, written only when it differs from the entry there, so an
 * unchanged policy makes no new generation.
 */
import { isDeepStrictEqual } from 'node:util';
import type { z } from 'zod';
import type { KvStore } from '../bus/bus.js';
import { kvKey } from '../contracts.js';
import { mcpPolicySchema, type McpPolicy } from '../spec/mcppolicy.js';

/** What an McpPolicy object is published from: its kind, name, namespace and generation, and its spec as written. */
export interface PolicyObject {
  apiVersion?: unknown;
  kind?: unknown;
  metadata: { name: string; namespace: string; generation?: number | undefined };
  spec?: unknown;
}

/** `object` as the entry it is published as, or zod's issues naming the bad field. */
export function policyEntryOf(object: PolicyObject): z.ZodSafeParseResult<McpPolicy> {
  return mcpPolicySchema.safeParse({ apiVersion: object.apiVersion, kind: object.kind, metadata: object.metadata, spec: object.spec });
}

/**
 * Publishes a valid policy (from {@link policyEntryOf}) under `kvKey(namespace, name)` unless the bucket already holds it.
 * @returns whether it wrote.
 * @throws PunkError `BusUnavailable` from the bucket.
 */
export async function publishPolicy(bucket: KvStore, policy: McpPolicy): Promise<boolean> {
  const key = kvKey(policy.metadata.namespace!, policy.metadata.name);
  const entry = await bucket.get(key);
  if (entry && isDeepStrictEqual(entry.value, JSON.parse(JSON.stringify(policy)))) return false;
  await bucket.put(key, policy);
  return true;
}

/**
 * Removes policy `namespace/name` from the bucket (a no-op when absent).
 * @throws PunkError `BusUnavailable` from the bucket.
 */
export async function withdrawPolicy(bucket: KvStore, namespace: string, name: string): Promise<void> {
  await bucket.delete(kvKey(namespace, name));
}
