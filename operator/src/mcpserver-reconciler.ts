/**
 * Reconciles one McpServer: reads it with the Secrets and McpCredentials it references, builds its children
 * (`buildServerChildren`), applies them, prunes the children it no longer wants, publishes the server to bucket
 * `PUNK_MCP_SERVERS` for the gateway, reads its tools through the gateway and writes status.
 *
 * When the server is published: a url server at once (there is nothing to wait for: the gateway's own
 * connection tells whether it answers); a pod server once its Deployment is Available, so the gateway never
 * connects to a Service without ready endpoints. A published entry is kept while a later generation is not
 * runnable (a missing Secret, an invalid spec) and while the pods are down (the gateway reconnects): the pods of
 * the last good generation still run, and the gateway keeps serving them. The entry is removed when the McpServer is deleted (this reconcile finds it gone, and the
 * manager's orphan sweep catches a missed delete); the children go by their owner references.
 *
 * A spec that cannot be run (SpecError: a port clash, an unknown McpCredential, a missing Secret) makes the
 * server Degraded with the field named; for a new server nothing is applied. A child that exists without this
 * McpServer as its controller (a user's ServiceAccount of the same name, another McpServer's egress proxy) is never
 * taken over: nothing of the server is applied and it is Degraded with reason ChildConflict. An API failure a retry
 * cannot fix (403, 422, …) is Degraded with the API server's message and retried slowly; other failures (API
 * server, gateway) are written to status and thrown, so the queue retries with back-off.
 */
import type { KubernetesObject, ObjectCache, V1Deployment, V1Pod, V1Secret } from '@kubernetes/client-node';
import { errorMessage, kvKey, mcpServerSchema, PunkError, subjects, type KvStore, type McpServer } from '@punk/lib';
import { isDeepStrictEqual } from 'node:util';
import { applyObject, deleteObject, type ApplyObject } from './apply.js';
import type { ReconcileContext } from './context.js';
import {
  buildServerChildren,
  referencedSecretNames,
  secretChecksum,
  SpecError,
  type CredentialSecrets,
  type ServerChildrenOptions,
} from './server-children.js';
import { serverConditions, type ObservedServer } from './server-status.js';
import { SERVER_LABEL } from './sandbox.js';
import { conditionsOf, fieldPath, writeStatus } from './status.js';
import { apiErrorMessage, isNotFound, isPermanentApiError } from './kube.js';
import type { ReconcileResult } from './queue.js';

/** What children are built with: the operator's cluster-wide settings (images, gateway pods, DNS domain). */
export type ServerReconcilerOptions = Omit<ServerChildrenOptions, 'secretChecksum' | 'credentialSecrets'> & {
  /** `PUNK_PUBLIC_URL`: the URL clients reach Punk at, the base of each server's `status.endpoint`. */
  publicUrl?: string;
};

/** Where clients reach server `namespace/name` through Punk's front (`status.endpoint`). */
export function publicEndpoint(publicUrl: string | undefined, namespace: string, name: string): string {
  const path = `/servers/${namespace}/${name}/mcp`;
  return publicUrl === undefined ? path : `${publicUrl.replace(/\/+$/, '')}${path}`;
}

/** Kinds a server's children can be of, pruned when no longer wanted. */
const CHILD_KINDS: readonly { apiVersion: string; kind: string }[] = [
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'v1', kind: 'ServiceAccount' },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy' },
];

/**
 * How soon a server whose children cannot be applied for a reason a retry does not change (a child owned by
 * someone else, a 403 or 422 of the API server) is reconciled again, in milliseconds; an edit of the McpServer
 * reconciles it at once.
 */
const BLOCKED_RETRY_MS = 5 * 60_000;

/** Deadline of the tool listing through the gateway, in milliseconds. */
const TOOLS_TIMEOUT_MS = 10_000;

/** How soon a server whose tools could not be listed is reconciled again, in milliseconds. */
const TOOLS_RETRY_MS = 15_000;

/** How soon after publishing a server its tools are listed again when the first listing failed, in milliseconds. */
const TOOLS_FIRST_RETRY_MS = 1_000;

type ServerObject = KubernetesObject & { spec?: unknown; status?: Record<string, unknown> };

/** The McpCredentials `server` references (`credentialRef` of its env and headers), without repeats. */
export function serverCredentialNames(server: KubernetesObject): string[] {
  const spec = (server as ServerObject).spec as
    | { env?: { valueFrom?: { credentialRef?: { name?: string } } }[]; headers?: { valueFrom?: { credentialRef?: { name?: string } } }[] }
    | undefined;
  const names = [...(spec?.env ?? []), ...(spec?.headers ?? [])]
    .map((e) => e.valueFrom?.credentialRef?.name)
    .filter((n): n is string => typeof n === 'string');
  return [...new Set(names)];
}

/** The lookup of McpCredentials of `namespace` that children are built with. */
function credentialLookup(credentials: ObjectCache<KubernetesObject>, namespace: string): CredentialSecrets {
  return (name) => {
    const credential = credentials.get(name, namespace) as { spec?: { secretRef?: { name: string; keys?: string[] } } } | undefined;
    const ref = credential?.spec?.secretRef;
    return ref ? { secretName: ref.name, ...(ref.keys && { keys: ref.keys }) } : undefined;
  };
}

/** The Secrets whose change must reconcile `server` (directly referenced or behind its McpCredentials). */
export function serverSecretNames(server: KubernetesObject, credentials: ObjectCache<KubernetesObject>): string[] {
  const parsed = mcpServerSchema.safeParse(server);
  return parsed.success ? referencedSecretNames(parsed.data, credentialLookup(credentials, server.metadata!.namespace!)) : [];
}

/** The field of `server` that references Secret `secret` (directly or through McpCredential), for messages. */
function secretField(server: McpServer, secret: string, credentials: CredentialSecrets): string {
  const i = server.spec.env.findIndex(
    (e) =>
      e.valueFrom?.secretKeyRef?.name === secret ||
      (e.valueFrom?.credentialRef && credentials(e.valueFrom.credentialRef.name)?.secretName === secret),
  );
  if (i < 0) return 'spec.env';
  return server.spec.env[i]!.valueFrom!.secretKeyRef
    ? `spec.env[${i}].valueFrom.secretKeyRef.name`
    : `spec.env[${i}].valueFrom.credentialRef.name`;
}

/** Reconciles McpServer objects into children, the servers bucket and status. */
export class McpServerReconciler {
  constructor(
    private readonly context: ReconcileContext,
    private readonly bucket: KvStore,
    private readonly options: ServerReconcilerOptions,
  ) {}

  /** Brings server `namespace/name`'s children, bucket entry and status in line with the object. */
  async reconcile(namespace: string, name: string): Promise<ReconcileResult | undefined> {
    const object = this.context.caches.McpServer.get(name, namespace) as ServerObject | undefined;
    const key = kvKey(namespace, name);
    if (!object || object.metadata?.deletionTimestamp) {
      await this.bucket.delete(key);
      return;
    }
    const meta = object.metadata!;
    const generation = meta.generation ?? 0;
    const previous = conditionsOf(object);
    const published = await this.bucket.get(key);
    const hasPod = (object.spec as { url?: unknown } | undefined)?.url === undefined;
    // What runs now (the last applied generation, if any): the conditions describe it even when this generation cannot be applied.
    // Only a Deployment this McpServer controls (`<name>` may be another server's egress proxy, see foreignChild).
    let deployment = this.context.caches.Deployment.get(name, namespace) as V1Deployment | undefined;
    if (!deployment?.metadata?.ownerReferences?.some((ref) => ref.controller === true && ref.uid === meta.uid)) deployment = undefined;
    const pods = (this.context.caches.Pod.list(namespace) as V1Pod[]).filter((pod) => pod.metadata?.labels?.[SERVER_LABEL] === name);
    const kept = pick(object.status, ['endpoint', 'upstreamUrl', 'toolCount', 'tools']);
    const write = async (
      observed: Omit<ObservedServer, 'generation' | 'hasPod' | 'pods' | 'deployment'>,
      extra: Record<string, unknown>,
    ) => {
      const conditions = serverConditions(
        { generation, hasPod, pods, ...(deployment && { deployment }), ...observed },
        previous,
        this.context.now(),
      );
      const status = { ...extra, observedGeneration: generation, conditions };
      await writeStatus(
        this.context.clients,
        this.context.recorder,
        { kind: 'McpServer', metadata: { name, namespace, uid: meta.uid, resourceVersion: meta.resourceVersion }, status: object.status },
        status,
      );
    };
    const fail = (reason: string, message: string) => write({ problem: { reason, message } }, { ...kept, lastError: message });

    // Only the metadata the gateway and the children need (no managedFields, no last-applied annotation).
    const metadata = { name, namespace, uid: meta.uid, generation, ...(meta.labels && { labels: meta.labels }) };
    const parsed = mcpServerSchema.safeParse({ apiVersion: object.apiVersion, kind: object.kind, metadata, spec: object.spec });
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      await fail('InvalidSpec', `${fieldPath(issue.path) || '(object)'}: ${issue.message}`);
      return undefined;
    }
    const server = parsed.data;
    const credentials = credentialLookup(this.context.caches.McpCredential, namespace);
    const secrets: V1Secret[] = [];
    for (const secretName of referencedSecretNames(server, credentials)) {
      const secret = this.context.caches.Secret.get(secretName, namespace) as V1Secret | undefined;
      if (!secret) {
        await fail(
          'SecretMissing',
          `${secretField(server, secretName, credentials)}: Secret ${secretName} not found in namespace ${namespace}`,
        );
        return undefined;
      }
      secrets.push(secret);
    }

    let built: ReturnType<typeof buildServerChildren>;
    try {
      built = buildServerChildren(server, { ...this.options, credentialSecrets: credentials, secretChecksum: secretChecksum(secrets) });
    } catch (error) {
      if (!(error instanceof SpecError)) throw error;
      await fail(error.reason, error.message);
      return undefined;
    }

    try {
      // Nothing is applied while one child belongs to someone else: a partial apply would still take objects over.
      const conflict = await this.foreignChild(built.objects, meta.uid);
      if (conflict) {
        await fail('ChildConflict', conflict);
        return { requeueAfterMs: BLOCKED_RETRY_MS };
      }
      for (const child of built.objects) {
        const applied = await applyObject<V1Deployment>(this.context.clients, child as ApplyObject);
        if (child.kind === 'Deployment' && child.metadata?.name === name) deployment = applied;
      }
      // The wanted set shrinks only with a new generation (an egress proxy dropped with its hosts); a server still
      // Degraded may also have been left half-pruned by a failed run.
      const settled =
        object.status?.observedGeneration === generation && previous.some((c) => c.type === 'Degraded' && c.status === 'False');
      if (!settled) await this.prune(server, built.objects);
    } catch (error) {
      await fail('ApplyFailed', `applying the children failed: ${apiErrorMessage(error)}`);
      if (!isPermanentApiError(error)) throw error;
      this.context.log.warn(
        { server: `${namespace}/${name}`, err: apiErrorMessage(error) },
        'the children cannot be applied; retrying slowly',
      );
      return { requeueAfterMs: BLOCKED_RETRY_MS };
    }

    const runnable = !hasPod || (deployment?.status?.availableReplicas ?? 0) > 0;
    const entry = { server: built.served, generation };
    const publish = runnable && (!published || !isDeepStrictEqual(published.value, JSON.parse(JSON.stringify(entry))));
    if (publish) await this.bucket.put(key, entry);

    let tools: { name: string; sideEffectLevel?: number }[] | undefined;
    let listing: ObservedServer['listing'];
    let lastError: string | undefined;
    if (runnable) {
      try {
        tools = await this.listTools(namespace, name);
        listing = { ok: true, toolCount: tools.length };
      } catch (error) {
        lastError = `the gateway could not list the tools: ${errorMessage(error)}`;
        // A gateway that does not answer says nothing about the server: the listing stays pending.
        const gatewayDown = error instanceof PunkError && ['BusTimeout', 'BusNoResponders', 'BusUnavailable'].includes(error.code);
        if (!gatewayDown) listing = { ok: false, error: errorMessage(error) };
      }
    }
    await write(listing ? { listing } : {}, {
      endpoint: publicEndpoint(this.options.publicUrl, namespace, name),
      upstreamUrl: built.endpoint,
      ...(tools ? { toolCount: tools.length, tools } : pick(kept, ['toolCount', 'tools'])),
      ...(lastError !== undefined && { lastError }),
    });
    // Just published: the gateway picks the entry up within moments, so the first listing is retried soon.
    return tools || !runnable ? undefined : { requeueAfterMs: publish ? TOOLS_FIRST_RETRY_MS : TOOLS_RETRY_MS };
  }

  /**
   * The first of `children` that exists without McpServer `uid` as its controller (an ownerReference with
   * `controller: true` and that uid), as a message naming its kind and name; undefined when each is absent or
   * controlled by the McpServer. Server-side apply with force would otherwise take such an object over.
   * @throws the API server's error other than 404.
   */
  private async foreignChild(children: readonly KubernetesObject[], uid: string | undefined): Promise<string | undefined> {
    for (const child of children) {
      const { apiVersion, kind } = child;
      const { name, namespace } = child.metadata as { name: string; namespace: string };
      let existing: KubernetesObject;
      try {
        existing = await this.context.clients.objects.read({ apiVersion: apiVersion!, kind: kind!, metadata: { name, namespace } });
      } catch (error) {
        if (isNotFound(error)) continue;
        throw error;
      }
      if (existing.metadata?.ownerReferences?.some((ref) => ref.controller === true && ref.uid === uid)) continue;
      return `${kind} ${namespace}/${name} exists and is not owned by this McpServer; rename the McpServer or delete the ${kind}`;
    }
    return undefined;
  }

  /** The tools of the server as the gateway lists them (`servers.tools`), names and side-effect levels. */
  private async listTools(namespace: string, name: string): Promise<{ name: string; sideEffectLevel?: number }[]> {
    const reply = (await this.context.bus.request(
      subjects.gatewayAdmin,
      { op: 'servers.tools', tenant: namespace, id: name },
      { timeoutMs: TOOLS_TIMEOUT_MS },
    )) as { tools?: { name: string; sideEffectLevel?: unknown }[] };
    return (reply.tools ?? []).map((tool) => ({
      name: tool.name,
      ...(typeof tool.sideEffectLevel === 'number' && { sideEffectLevel: tool.sideEffectLevel }),
    }));
  }

  /** Deletes the children of `server` (controlled by it, labelled with its name) that `wanted` no longer holds. */
  private async prune(server: McpServer, wanted: readonly KubernetesObject[]): Promise<void> {
    const keep = new Set(wanted.map((o) => `${o.kind}/${o.metadata?.name}`));
    const { namespace, name, uid } = server.metadata;
    for (const { apiVersion, kind } of CHILD_KINDS) {
      const list = await this.context.clients.objects.list(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        `${SERVER_LABEL}=${name}`,
      );
      for (const child of list.items) {
        const owned = child.metadata?.ownerReferences?.some((ref) => ref.controller && ref.uid === uid);
        if (owned && !keep.has(`${kind}/${child.metadata?.name}`)) {
          await deleteObject(this.context.clients, { apiVersion, kind, metadata: { name: child.metadata!.name!, namespace: namespace! } });
          this.context.log.info(
            { server: `${namespace}/${name}`, child: `${kind}/${child.metadata?.name}` },
            'pruned a child no longer wanted',
          );
        }
      }
    }
  }
}

function pick(status: Record<string, unknown> | undefined, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => status?.[k] !== undefined).map((k) => [k, status![k]]));
}
