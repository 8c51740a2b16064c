/**
 * Reconciles one McpPolicy: validates and publishes it to bucket `PUNK_MCP_POLICIES` with lib's `policyEntryOf` and
 * `publishPolicy` (the path `punk up` takes for its manifests' policies); status Ready/Degraded and `ruleCount`.
 *
 * An invalid policy (which the CRD's own validation lets through only for rules it cannot express) is Degraded
 * with the field named, and the entry of its last valid generation stays published: withdrawing it would
 * silently drop the deny rules it held. A deleted policy's entry is removed here (the reconcile finds no
 * object) and by the manager's orphan sweep; no finalizer is needed since the entry is rebuilt from the
 * objects that exist.
 */
import { buckets, policyEntryOf, publishPolicy, withdrawPolicy, type KvStore } from '@punk/lib/controller';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ReconcileContext } from './context.js';
import { conditionsOf, degraded, fieldPath, healthy, setConditions, writeStatus } from './status.js';

/** Reconciles McpPolicy objects of the cache into the policies bucket. */
export class McpPolicyReconciler {
  constructor(
    private readonly context: ReconcileContext,
    private readonly bucket: KvStore,
  ) {}

  /** Brings the bucket entry and status of policy `namespace/name` in line with the object. */
  async reconcile(namespace: string, name: string): Promise<void> {
    const object = this.context.caches.McpPolicy.get(name, namespace) as
      (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
    if (!object || object.metadata?.deletionTimestamp) {
      await withdrawPolicy(this.bucket, namespace, name);
      return;
    }
    const generation = object.metadata?.generation ?? 0;
    const metadata = { name, namespace, uid: object.metadata?.uid, resourceVersion: object.metadata?.resourceVersion };
    const previous = conditionsOf(object);
    const parsed = policyEntryOf({
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: { name, namespace, generation },
      spec: object.spec,
    });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const message = `${fieldPath(issue.path) || '(object)'}: ${issue.message}; the last valid generation, if any, is still served`;
      const status = {
        ...(object.status as object | undefined),
        observedGeneration: generation,
        conditions: setConditions(previous, degraded('InvalidSpec', message), this.context.now(), generation),
      };
      await writeStatus(this.context.clients, this.context.recorder, { kind: 'McpPolicy', metadata, status: object.status }, status);
      return;
    }
    const policy = parsed.data;
    await publishPolicy(this.bucket, policy);
    const status = {
      observedGeneration: generation,
      conditions: setConditions(
        previous,
        healthy(
          'Published',
          `generation ${generation} (${policy.spec.rules.length} rules, ${policy.spec.rateLimits.length} rate limits) is published to bucket ${buckets.mcpPolicies.name}, which every gateway, front and governance replica watches`,
        ),
        this.context.now(),
        generation,
      ),
      ruleCount: policy.spec.rules.length,
    };
    await writeStatus(this.context.clients, this.context.recorder, { kind: 'McpPolicy', metadata, status: object.status }, status);
  }
}
