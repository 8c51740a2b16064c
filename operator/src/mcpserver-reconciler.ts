/**
 * Reconciles one McpServer: reads it with the Secrets and McpCredentials it references, builds its children
 * (`buildServerChildren`), applies them, prunes the children it no longer wants, publishes the server to bucket
 * `PUNK_MCP_SERVERS` for the gateway, reads its tools through the gateway and writes status.
 *
 * When the server is published: a url server at once (there is nothing to wait for: the gateway's own
 * connection tells whether it answers); a pod server once its Deployment is Available, so the gateway never
 * connects to a Service without ready endpoints. A published entry is kept while a later generation is not
 * runnable (a missing Secret, an invalid spec) and while the pods are down (the gateway reconnects): the pods of
 * the last good generation still run, and the gateway keeps serving them. At spec.replicas 0 it is published as
 * scaled to zero (the gateways refuse its calls at once, naming the McpServer) and its tools are not listed. The entry is removed when the McpServer is deleted (this reconcile finds it gone, and the
 * manager's orphan sweep catches a missed delete); the children go by their owner references.
 *
 * A Deployment another field manager loosened in a field the operator does not set (hostNetwork, a hostPath volume, an
 * added container, a securityContext: sandbox-drift.ts) is Degraded with reason SandboxDrift naming the field and
 * the manager, until that change is undone.
 *
 * A spec that cannot be run (SpecError: a port clash, an unknown McpCredential, a missing Secret) makes the
 * server Degraded with the field named; for a new server nothing is applied. A child that exists without this
 * McpServer as its controller (a user's ServiceAccount of the same name, another McpServer's egress proxy) is never
 * taken over: nothing of the server is applied and it is Degraded with reason ChildConflict. An API failure a retry
 * cannot fix (403, 422, …) is Degraded with the API server's message and retried slowly; other failures (API
 * server, gateway) are written to status and thrown, so the queue retries with back-off.
 */
import type { KubernetesObject, ObjectCache, V1ConfigMap, V1Deployment, V1Pod, V1Secret } from '@kubernetes/client-node';
import { errorMessage, kvKey, mcpServerSchema, PunkError, subjects, type KvStore, type McpServer } from '@punk/lib/controller';
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { applyObject, deleteObject, type ApplyObject } from './apply.js';
import type { ChildKind, ReconcileContext } from './context.js';
import { egressProxyName } from './egress-proxy-children.js';
import { checkSecretKeys } from './server-env.js';
import {
  buildServerChildren,
  CLUSTER_IP_ANNOTATION,
  referencedSecretNames,
  secretChecksum,
  SpecError,
  type CredentialSecrets,
  type ServerChildrenOptions,
} from './server-children.js';
import { driftMessage, sandboxDrift, type DriftedField } from './sandbox-drift.js';
import { serverConditions, type ObservedServer } from './server-status.js';
import { hasPods, SERVER_LABEL } from './sandbox.js';
import { SharedServiceAccounts } from './shared-service-account.js';
import { conditionsOf, fieldPath, writeStatus, WrittenStatuses } from './status.js';
import { apiErrorMessage, isNotFound, isPermanentApiError } from './kube.js';
import type { ReconcileResult } from './queue.js';
import type { ToolListings } from './tool-listings.js';

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
const CHILD_KINDS: readonly { apiVersion: string; kind: ChildKind }[] = [
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

/**
 * How soon a server blocked by a child name someone else holds is reconciled again, in milliseconds: such an object
 * carries none of the operator's labels, so no watch sees it go, and the server has no children meanwhile.
 */
const CONFLICT_RETRY_MS = 10_000;

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

/** The ConfigMap holding `server`'s OpenAPI document (`spec.openapi.configMapKeyRef.name`), if any: its change must reconcile `server`. */
export function serverConfigMapName(server: KubernetesObject): string | undefined {
  return (server as { spec?: { openapi?: { configMapKeyRef?: { name?: string } } } }).spec?.openapi?.configMapKeyRef?.name;
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

/** What the operator last applied of one child: the desired object (its digest) and the resourceVersion it got. */
interface AppliedMemo {
  /** SHA-256 (base64) of the desired object's JSON: a digest, so thousands of servers' memos stay small. */
  desired: string;
  resourceVersion: string;
  /** The sandbox drift of the object as that apply returned it (Deployments; empty for the other kinds). */
  drifted: DriftedField[];
}

/** Reconciles McpServer objects into children, the servers bucket and status. */
export class McpServerReconciler {
  /** Per server (`namespace/name`), per child (`kind/name`): what was applied last (see applyChild). */
  private readonly applied = new Map<string, Map<string, AppliedMemo>>();
  /** The statuses written whose echo the McpServer cache has not shown yet. */
  private readonly statuses = new WrittenStatuses();
  /** The namespaces' shared ServiceAccount of server pods (shared-service-account.ts). */
  readonly serviceAccounts: SharedServiceAccounts;

  constructor(
    private readonly context: ReconcileContext,
    private readonly bucket: KvStore,
    private readonly options: ServerReconcilerOptions,
    private readonly listings: ToolListings,
  ) {
    this.serviceAccounts = new SharedServiceAccounts(context);
  }

  /** Brings server `namespace/name`'s children, bucket entry and status in line with the object. */
  async reconcile(namespace: string, name: string): Promise<ReconcileResult | undefined> {
    const object = this.context.caches.McpServer.get(name, namespace) as ServerObject | undefined;
    const key = kvKey(namespace, name);
    if (!object || object.metadata?.deletionTimestamp) {
      this.statuses.forget(object?.metadata?.uid);
      this.applied.delete(`${namespace}/${name}`);
      this.listings.delete(namespace, name);
      await this.bucket.delete(key);
      await this.serviceAccounts.release(namespace);
      return;
    }
    const meta = object.metadata!;
    const generation = meta.generation ?? 0;
    // The status as last written: the cache may not show this operator's last write yet.
    const subject = { kind: 'McpServer' as const, metadata: { name, namespace, uid: meta.uid, resourceVersion: meta.resourceVersion } };
    const known = this.statuses.current({ ...subject, status: object.status }) as ServerObject['status'];
    const previous = conditionsOf({ status: known });
    const published = await this.bucket.get(key);
    const hasPod = hasPods(object);
    // spec.replicas 0 (kubectl scale, an HPA): published as scaled to zero, so the gateways answer calls at once.
    const scaledToZero = (object.spec as { replicas?: unknown } | undefined)?.replicas === 0;
    // What runs now (the last applied generation, if any): the conditions describe it even when this generation cannot be applied.
    // Only a Deployment this McpServer controls (`<name>` may be another server's egress proxy, see foreignChild).
    let deployment = this.context.caches.Deployment.get(name, namespace) as V1Deployment | undefined;
    if (!deployment?.metadata?.ownerReferences?.some((ref) => ref.controller === true && ref.uid === meta.uid)) deployment = undefined;
    const pods = (this.context.caches.Pod.list(namespace) as V1Pod[]).filter((pod) => pod.metadata?.labels?.[SERVER_LABEL] === name);
    const kept = pick(known, ['endpoint', 'upstreamUrl', 'toolCount', 'tools', 'warnings']);
    const write = async (
      observed: Omit<ObservedServer, 'generation' | 'hasPod' | 'pods' | 'deployment' | 'published' | 'scaledToZero'>,
      extra: Record<string, unknown>,
      isPublished = published !== undefined,
    ) => {
      const conditions = serverConditions(
        { generation, hasPod, pods, ...(deployment && { deployment }), published: isPublished, scaledToZero, ...observed },
        previous,
        this.context.now(),
      );
      // The scale subresource's status: the pods there are now and how to select them (HPA metrics).
      const scale = hasPod
        ? { replicas: deployment?.status?.replicas ?? 0, selector: `${SERVER_LABEL}=${name},app.kubernetes.io/component=mcp-server` }
        : {};
      const status = { ...extra, ...scale, observedGeneration: generation, conditions };
      await writeStatus(this.context.clients, this.context.recorder, { ...subject, status: object.status }, status, this.statuses);
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

    // A ConfigMap-held document is published as `content`: the gateway reads no ConfigMaps, and an edited
    // document is a changed entry, so it is published again (and its changed tools are reviewed, see pinning).
    const ref = server.spec.openapi?.configMapKeyRef;
    let served = server;
    if (ref) {
      const configMap = this.context.caches.ConfigMap.get(ref.name, namespace) as V1ConfigMap | undefined;
      const content = configMap?.data?.[ref.key];
      if (content === undefined || content === '') {
        await fail(
          'ConfigMapMissing',
          configMap
            ? `spec.openapi.configMapKeyRef.key: ConfigMap ${ref.name} in namespace ${namespace} has no key ${ref.key} (or it is empty)`
            : `spec.openapi.configMapKeyRef.name: ConfigMap ${ref.name} not found in namespace ${namespace}`,
        );
        return undefined;
      }
      const { configMapKeyRef: _ref, ...openapi } = server.spec.openapi!;
      served = { ...server, spec: { ...server.spec, openapi: { ...openapi, content } } };
    }

    let built: ReturnType<typeof buildServerChildren>;
    try {
      if (hasPod) checkSecretKeys(server, credentials, new Map(secrets.map((s) => [s.metadata!.name!, s])));
      built = buildServerChildren(served, { ...this.options, credentialSecrets: credentials, secretChecksum: secretChecksum(secrets) });
    } catch (error) {
      if (!(error instanceof SpecError)) throw error;
      await fail(error.reason, error.message);
      return undefined;
    }

    // What other field managers added to the Deployments that loosens the sandbox (no apply of the operator undoes it).
    const drift: string[] = [];
    try {
      // Nothing is applied while one child belongs to someone else: a partial apply would still take objects over.
      const conflict = await this.foreignChild(built.objects, meta.uid, meta.resourceVersion);
      // The namespace's shared ServiceAccount, which the pods run as, comes first; a user's of its name is not taken over either.
      const blocked = conflict ?? (built.objects.length > 0 ? await this.serviceAccounts.ensure(namespace) : undefined);
      if (blocked) {
        await fail('ChildConflict', blocked);
        return { requeueAfterMs: CONFLICT_RETRY_MS };
      }
      const firstRun = !this.applied.has(`${namespace}/${name}`);
      const memos = this.applied.get(`${namespace}/${name}`) ?? new Map<string, AppliedMemo>();
      this.applied.set(`${namespace}/${name}`, memos);
      for (const child of built.objects) {
        const { stored, drifted } = await this.applyChild(child as ApplyObject, memos);
        if (child.kind === 'Deployment' && child.metadata?.name === name) deployment = stored as V1Deployment;
        if (drifted.length > 0) drift.push(driftMessage(namespace, child.metadata!.name!, drifted));
      }
      // The wanted set shrinks only with a new generation (an egress proxy dropped with its hosts); a server still
      // Degraded may also have been left half-pruned by a failed run, and an older operator may have made children this
      // one does not (a ServiceAccount per server): pruned at this process's first reconcile of the server.
      const settled = known?.observedGeneration === generation && previous.some((c) => c.type === 'Degraded' && c.status === 'False');
      if (!settled || firstRun) await this.prune(server, built.objects);
    } catch (error) {
      await fail('ApplyFailed', `applying the children failed: ${apiErrorMessage(error)}`);
      if (!isPermanentApiError(error)) throw error;
      this.context.log.warn(
        { server: `${namespace}/${name}`, err: apiErrorMessage(error) },
        'the children cannot be applied; retrying slowly',
      );
      return { requeueAfterMs: BLOCKED_RETRY_MS };
    }

    const runnable = !scaledToZero && (!hasPod || (deployment?.status?.availableReplicas ?? 0) > 0);
    const entry = { server: built.served, generation };
    const publish = (runnable || scaledToZero) && (!published || !isDeepStrictEqual(published.value, JSON.parse(JSON.stringify(entry))));
    if (publish) await this.bucket.put(key, entry);

    let tools: { name: string; sideEffectLevel?: number }[] | undefined;
    let warnings: string[] | undefined;
    let listing: ObservedServer['listing'];
    let lastError: string | undefined;
    if (runnable) {
      try {
        ({ tools, warnings } = await this.listTools(namespace, name));
        listing = { ok: true, toolCount: tools.length };
      } catch (error) {
        lastError = `the gateway could not list the tools: ${errorMessage(error)}`;
        // A gateway that does not answer says nothing about the server: the listing stays pending.
        const gatewayDown = error instanceof PunkError && ['BusTimeout', 'BusNoResponders', 'BusUnavailable'].includes(error.code);
        if (!gatewayDown) listing = { ok: false, error: errorMessage(error) };
      }
    }
    if (drift.length > 0) lastError = drift.join('; ');
    await write(
      { ...(listing && { listing }), ...(drift.length > 0 && { problem: { reason: 'SandboxDrift', message: drift.join('; ') } }) },
      {
        endpoint: publicEndpoint(this.options.publicUrl, namespace, name),
        upstreamUrl: built.endpoint,
        ...(tools ? { toolCount: tools.length, tools, ...(warnings && { warnings }) } : pick(kept, ['toolCount', 'tools', 'warnings'])),
        ...(lastError !== undefined && { lastError }),
      },
      publish || published !== undefined,
    );
    // Just published: the gateway picks the entry up within moments, so the first listing is retried soon.
    return tools || !runnable ? undefined : { requeueAfterMs: publish ? TOOLS_FIRST_RETRY_MS : TOOLS_RETRY_MS };
  }

  /**
   * Whether `child` (of `kind`, controlled by server `namespace/server`) is as this operator's last apply of it
   * returned it (the same resourceVersion): a watch event showing it is the echo of that apply, with nothing new.
   */
  isOwnApply(namespace: string, server: string, kind: ChildKind, child: KubernetesObject): boolean {
    const memo = this.applied.get(`${namespace}/${server}`)?.get(`${kind}/${child.metadata?.name}`);
    return memo !== undefined && memo.resourceVersion === child.metadata?.resourceVersion;
  }

  /**
   * Applies `child` unless the informer's cache shows it unchanged since this operator last applied the same
   * desired object (same resourceVersion as the apply returned): an unchanged server then costs no API request at
   * a resync, and any change by anyone (a new resourceVersion) or a new desired object applies again.
   * A Service whose {@link CLUSTER_IP_ANNOTATION} differs from the desired one (headless against a cluster IP, which
   * cannot change once set) is deleted first, so the apply makes it anew.
   * A Deployment's sandbox drift is computed from the apply's answer, which carries `managedFields` (the caches
   * drop them: they are as large as the objects) to name who set each field, and kept with the memo.
   * @returns the child as stored (the apply's answer, or the cached object when nothing was sent) and its drift.
   */
  private async applyChild(
    child: ApplyObject,
    memos: Map<string, AppliedMemo>,
  ): Promise<{ stored: KubernetesObject; drifted: DriftedField[] }> {
    const { kind, metadata } = child;
    const cached = this.context.caches[kind as ChildKind].get(metadata.name, metadata.namespace);
    const desired = createHash('sha256').update(JSON.stringify(child)).digest('base64');
    const memo = memos.get(`${kind}/${metadata.name}`);
    if (cached && memo && memo.desired === desired && memo.resourceVersion === cached.metadata?.resourceVersion)
      return { stored: cached, drifted: memo.drifted };
    const wantedClusterIP = child.metadata.annotations?.[CLUSTER_IP_ANNOTATION];
    // A Service of an older operator has no annotation and a cluster IP.
    if (kind === 'Service' && cached && (cached.metadata?.annotations?.[CLUSTER_IP_ANNOTATION] ?? 'true') !== wantedClusterIP)
      await deleteObject(this.context.clients, child);
    const applied = await applyObject<V1Deployment>(this.context.clients, child);
    const drifted = kind === 'Deployment' ? sandboxDrift(child as V1Deployment, applied) : [];
    memos.set(`${kind}/${metadata.name}`, { desired, resourceVersion: applied.metadata?.resourceVersion ?? '', drifted });
    return { stored: applied, drifted };
  }

  /**
   * The first of `children` that exists without McpServer `uid` as its controller (an ownerReference with
   * `controller: true` and that uid), as a message naming its kind and name; undefined when each is absent or
   * controlled by the McpServer. Server-side apply with force would otherwise take such an object over.
   * The caches hold the metadata of every object of the children's kinds (manager.ts), so a name they hold is judged
   * from them, and a name they lack is free once they have followed the API server past the McpServer's own
   * resourceVersion `serverVersion` (an object made before the McpServer's last change is then in them: a cold start
   * reads nothing); else, e.g. for an McpServer just created, the API is read for it (all at once).
   * @throws the API server's error other than 404.
   */
  private async foreignChild(
    children: readonly KubernetesObject[],
    uid: string | undefined,
    serverVersion: string | undefined,
  ): Promise<string | undefined> {
    const { caches } = this.context;
    const found = await Promise.all(
      children.map(async (child) => {
        const { apiVersion, kind } = child as { apiVersion: string; kind: ChildKind };
        const { name, namespace } = child.metadata as { name: string; namespace: string };
        const all = kind === 'Deployment' ? caches.DeploymentMetadata : caches[kind];
        const cached = caches[kind].get(name, namespace) ?? all.get(name, namespace);
        if (cached || caughtUp(all.resourceVersion(namespace), serverVersion)) return cached;
        try {
          return await this.context.clients.objects.read({ apiVersion, kind, metadata: { name, namespace } });
        } catch (error) {
          if (isNotFound(error)) return undefined;
          throw error;
        }
      }),
    );
    const i = found.findIndex(
      (existing) => existing && !existing.metadata?.ownerReferences?.some((ref) => ref.controller === true && ref.uid === uid),
    );
    if (i < 0) return undefined;
    const { kind, metadata } = children[i]!;
    return `${kind} ${metadata!.namespace}/${metadata!.name} exists and is not owned by this McpServer; rename the McpServer or delete the ${kind}`;
  }

  /**
   * The tools of the server as the gateway lists them (`servers.tools`), names and side-effect levels, and its
   * warnings; the listing with the tools' schemas is recorded in {@link ToolListings} for the McpWorkflow checks.
   */
  private async listTools(
    namespace: string,
    name: string,
  ): Promise<{ tools: { name: string; sideEffectLevel?: number }[]; warnings?: string[] }> {
    const reply = (await this.context.bus.request(
      subjects.gatewayAdmin,
      { op: 'servers.tools', tenant: namespace, id: name },
      { timeoutMs: TOOLS_TIMEOUT_MS },
    )) as { tools?: { name: string; sideEffectLevel?: unknown; inputSchema?: unknown }[]; warnings?: unknown };
    this.listings.set(namespace, name, reply.tools ?? []);
    const tools = (reply.tools ?? []).map((tool) => ({
      name: tool.name,
      ...(typeof tool.sideEffectLevel === 'number' && { sideEffectLevel: tool.sideEffectLevel }),
    }));
    const warnings = Array.isArray(reply.warnings) ? reply.warnings.filter((w): w is string => typeof w === 'string') : [];
    return { tools, ...(warnings.length > 0 && { warnings }) };
  }

  /**
   * Deletes the children of `server` (controlled by it, labelled with its name) that `wanted` no longer holds. A
   * server's children are named `<name>` or `<name>-egress` (its egress proxy's), so only those names are looked up
   * in the caches (listing a namespace's children for each of its servers costs time in the square of their number).
   */
  private async prune(server: McpServer, wanted: readonly KubernetesObject[]): Promise<void> {
    const keep = new Set(wanted.map((o) => `${o.kind}/${o.metadata?.name}`));
    const { namespace, name, uid } = server.metadata;
    for (const { apiVersion, kind } of CHILD_KINDS) {
      const children = [name, egressProxyName(server)]
        .map((candidate) => this.context.caches[kind].get(candidate, namespace))
        .filter((o): o is KubernetesObject => o?.metadata?.labels?.[SERVER_LABEL] === name);
      for (const child of children) {
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

/**
 * Whether a cache that has followed the API server up to resourceVersion `cache` holds every object made before
 * `object`'s resourceVersion. resourceVersions are etcd revisions, one counter across kinds, in every API server
 * this runs against; one that is not a decimal number (another storage) is never taken as caught up.
 */
function caughtUp(cache: string, object: string | undefined): boolean {
  if (!/^\d+$/.test(cache) || !/^\d+$/.test(object ?? '')) return false;
  return BigInt(cache) >= BigInt(object!);
}

function pick(status: Record<string, unknown> | undefined, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => status?.[k] !== undefined).map((k) => [k, status![k]]));
}
