/**
 * The operator's manager, in controller-runtime's shape: informers (list + watch, one cache per kind) feed a
 * work queue with the keys of the objects to reconcile; only the leader's workers reconcile; every resync period
 * each object is queued again and the bucket entries no object backs are swept.
 *
 * Watches, and what an event queues:
 * - McpServer, McpCredential, McpPolicy, McpWorkflow: the object itself; an McpServer also queues the McpWorkflows whose
 *   nodes name it, and so does a change of its tool listing (ToolListings), so a workflow is checked again when a
 *   server it calls comes, goes or changes its tools;
 * - the children the operator makes (Deployments, Services, ServiceAccounts, NetworkPolicies, the egress proxy's among
 *   them): the McpServer of their controller owner reference, as controller-runtime's Owns() does, so a child deleted
 *   or edited by hand is put back within moments rather than at the next resync. Deployments labelled
 *   `mcp.punk.dev/server` are watched whole (their status makes the McpServer's conditions); Services,
 *   ServiceAccounts and NetworkPolicies, and every Deployment besides, are watched as metadata only and without a
 *   label filter (metadata-informer.ts), so which child names are taken is known without a read (foreignChild of
 *   mcpserver-reconciler.ts);
 * - Pods labelled `mcp.punk.dev/server` (their owner is a ReplicaSet): the server of the label;
 * - Secrets: each McpCredential whose `secretRef` names it, each McpServer whose children read it (directly or
 *   through an McpCredential);
 * - ConfigMaps: each McpServer whose `spec.openapi.configMapKeyRef` names it;
 * - McpCredentials also queue the McpServers that reference them.
 */
import { makeInformer, type KubeConfig, type KubernetesObject, type ListWatch } from '@kubernetes/client-node';
import { buckets, errorMessage, kvKey, type Bus, type KvStore, type Logger } from '@punk/lib/controller';
import { slimForCache } from './cache-slim.js';
import type { ReconcileContext, WatchCache, WatchedKind } from './context.js';
import { EventRecorder } from './events.js';
import { apiErrorMessage, kubeClients, type KubeClients } from './kube.js';
import { LeaderElector } from './leader-election.js';
import { IdleScaler } from './idle-scaler.js';
import { makeMetadataInformer } from './metadata-informer.js';
import { McpCredentialReconciler } from './mcpcredential-reconciler.js';
import { McpPolicyReconciler } from './mcppolicy-reconciler.js';
import { McpWorkflowReconciler, workflowServerNames } from './mcpworkflow-reconciler.js';
import {
  McpServerReconciler,
  serverConfigMapName,
  serverCredentialNames,
  serverSecretNames,
  type ServerReconcilerOptions,
} from './mcpserver-reconciler.js';
import { observeReconciles, watchManager } from './metrics.js';
import { WorkQueue } from './queue.js';
import { hasPods, MANAGED_BY, SERVER_LABEL } from './sandbox.js';
import { SERVER_SERVICE_ACCOUNT } from './shared-service-account.js';
import { ToolListings } from './tool-listings.js';

/** Options of the operator; durations in milliseconds. */
export interface ManagerOptions {
  /** The API server and credentials (in-cluster, KUBECONFIG, or a test's). */
  kubeConfig: KubeConfig;
  /** The bus (NATS) carrying the buckets and the gateway's admin requests. */
  bus: Bus;
  log: Logger;
  /** Namespaces to watch; empty: all of them. */
  namespaces: readonly string[];
  /** This process's identity in the Lease and in Events (unique per replica). */
  identity: string;
  /** Leader election's Lease and timing (defaults: client-go's 15 s / 10 s / 2 s). */
  lease: { namespace: string; name: string; durationMs?: number; renewDeadlineMs?: number; retryPeriodMs?: number };
  /** How often every object is queued again and orphaned bucket entries are swept. */
  resyncMs: number;
  /** Most reconciles at once. */
  workers: number;
  /** Deadline of one reconcile. */
  reconcileTimeoutMs: number;
  /** What the McpServer reconciler builds children with. */
  server: ServerReconcilerOptions;
  /** Longest delay between retries of a failing object (default 5 minutes). */
  maxRetryDelayMs?: number;
  /** How long a deleted McpCredential's finalizer waits for the gateway before it is released (default 5 minutes). */
  finalizerTimeoutMs?: number;
  /** How often the leader looks for McpServers idle past `spec.idle.scaleToZeroAfter` (default 10 s; idle-scaler.ts). */
  idleCheckMs?: number;
}

/** The label selector of what the operator makes: its children and their pods. */
const MANAGED = `app.kubernetes.io/managed-by=${MANAGED_BY},${SERVER_LABEL}`;

/**
 * Where each watched kind lives in the API, and which of its objects are watched: those `labelSelector` selects (all
 * when unset), whole or, with `metadataOnly`, their metadata alone.
 */
const watched: Record<WatchedKind, { apiVersion: string; kind: string; path: string; labelSelector?: string; metadataOnly?: true }> = {
  McpServer: { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', path: 'apis/mcp.punk.dev/v1alpha1/mcpservers' },
  McpCredential: { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpCredential', path: 'apis/mcp.punk.dev/v1alpha1/mcpcredentials' },
  McpPolicy: { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpPolicy', path: 'apis/mcp.punk.dev/v1alpha1/mcppolicies' },
  McpWorkflow: { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpWorkflow', path: 'apis/mcp.punk.dev/v1alpha1/mcpworkflows' },
  Secret: { apiVersion: 'v1', kind: 'Secret', path: 'api/v1/secrets' },
  ConfigMap: { apiVersion: 'v1', kind: 'ConfigMap', path: 'api/v1/configmaps' },
  Deployment: { apiVersion: 'apps/v1', kind: 'Deployment', path: 'apis/apps/v1/deployments', labelSelector: MANAGED },
  DeploymentMetadata: { apiVersion: 'apps/v1', kind: 'Deployment', path: 'apis/apps/v1/deployments', metadataOnly: true },
  Service: { apiVersion: 'v1', kind: 'Service', path: 'api/v1/services', metadataOnly: true },
  ServiceAccount: { apiVersion: 'v1', kind: 'ServiceAccount', path: 'api/v1/serviceaccounts', metadataOnly: true },
  NetworkPolicy: {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    path: 'apis/networking.k8s.io/v1/networkpolicies',
    metadataOnly: true,
  },
  Pod: { apiVersion: 'v1', kind: 'Pod', path: 'api/v1/pods', labelSelector: MANAGED },
};

/** Longest wait at stop for the Events still queued to be written, in milliseconds. */
const EVENT_FLUSH_MS = 5_000;

/** Delay before an informer whose list or watch failed lists and watches again. */
const INFORMER_RESTART_MS = 1_000;

/** Attempts at the first list of a kind before the operator gives up starting (a missing CRD, no RBAC). */
const FIRST_LIST_ATTEMPTS = 30;

/** One informer and whether its cache holds a complete first list. */
interface InformerEntry {
  kind: WatchedKind;
  namespace: string | undefined;
  informer: ListWatch<KubernetesObject>;
  synced: boolean;
  lastError?: unknown;
}

/** One cache over the informers of several namespaces (or the one informer of all of them). */
class NamespacedCache implements WatchCache {
  constructor(private readonly byNamespace: Map<string, ListWatch<KubernetesObject>>) {}
  resourceVersion(namespace: string): string {
    return (this.byNamespace.get(namespace) ?? this.byNamespace.get('*'))?.latestResourceVersion() ?? '';
  }
  get(name: string, namespace?: string): KubernetesObject | undefined {
    return (this.byNamespace.get(namespace ?? '') ?? this.byNamespace.get('*'))?.get(name, namespace);
  }
  list(namespace?: string): readonly KubernetesObject[] {
    if (namespace !== undefined) return (this.byNamespace.get(namespace) ?? this.byNamespace.get('*'))?.list(namespace) ?? [];
    return [...this.byNamespace.values()].flatMap((cache) => cache.list());
  }
}

/** The operator: informers, work queue, reconcilers and leader election. */
export class Manager {
  private readonly clients: KubeClients;
  private readonly informers: InformerEntry[] = [];
  private readonly caches: Record<WatchedKind, WatchCache>;
  private readonly queue: WorkQueue;
  private readonly elector: LeaderElector;
  private readonly log: Logger;
  private servers!: McpServerReconciler;
  private credentials!: McpCredentialReconciler;
  private policies!: McpPolicyReconciler;
  private workflows!: McpWorkflowReconciler;
  private serverBucket!: KvStore;
  private policyBucket!: KvStore;
  private workflowBucket!: KvStore;
  private recorder: EventRecorder | undefined;
  private idle: IdleScaler | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  /** What the last event showed of each custom resource beyond its status (see changedBeyondStatus). */
  private readonly seen = new Map<string, string>();
  private stopping = false;
  private leading = false;
  /** Stops showing this manager in the metrics (metrics.ts). */
  private readonly unwatch: () => void;

  constructor(private readonly options: ManagerOptions) {
    this.log = options.log;
    this.clients = kubeClients(options.kubeConfig);
    const namespaces = options.namespaces.length > 0 ? options.namespaces : ['*'];
    const caches = {} as Record<WatchedKind, WatchCache>;
    for (const kind of Object.keys(watched) as WatchedKind[]) {
      const byNamespace = new Map<string, InformerEntry['informer']>();
      for (const namespace of namespaces) {
        const entry = this.makeInformer(kind, namespace === '*' ? undefined : namespace);
        byNamespace.set(namespace, entry.informer);
        this.informers.push(entry);
      }
      caches[kind] = new NamespacedCache(byNamespace);
    }
    this.caches = caches;
    this.queue = new WorkQueue(
      observeReconciles((key) => this.reconcile(key)),
      {
        workers: options.workers,
        timeoutMs: options.reconcileTimeoutMs,
        ...(options.maxRetryDelayMs !== undefined && { maxDelayMs: options.maxRetryDelayMs }),
        onError: (key, error, retryInMs) =>
          this.log.warn({ object: key, retryInMs, err: apiErrorMessage(error) }, 'reconcile failed; retrying'),
      },
    );
    this.elector = new LeaderElector({
      clients: this.clients,
      namespace: options.lease.namespace,
      name: options.lease.name,
      identity: options.identity,
      ...(options.lease.durationMs !== undefined && { leaseDurationMs: options.lease.durationMs }),
      ...(options.lease.renewDeadlineMs !== undefined && { renewDeadlineMs: options.lease.renewDeadlineMs }),
      ...(options.lease.retryPeriodMs !== undefined && { retryPeriodMs: options.lease.retryPeriodMs }),
      onStartedLeading: () => this.startLeading(),
      onStoppedLeading: () => void this.stopLeading(),
      log: this.log,
    });
    this.unwatch = watchManager({ depth: () => this.queue.depth, leading: () => this.isLeader() });
  }

  /** Whether this instance holds the Lease (and so reconciles). */
  isLeader(): boolean {
    return this.elector.isLeader();
  }

  /**
   * Opens the buckets, fills every cache (list, then watch) and starts competing for the Lease; reconciling
   * starts once this instance leads.
   * @throws when a bucket cannot be opened or a first list fails (the CRDs are not installed, no permission).
   */
  async start(): Promise<void> {
    this.serverBucket = await this.options.bus.keyValue(buckets.mcpServers);
    this.policyBucket = await this.options.bus.keyValue(buckets.mcpPolicies);
    this.workflowBucket = await this.options.bus.keyValue(buckets.mcpWorkflows);
    this.recorder = new EventRecorder(this.clients, this.options.identity, this.log, () => this.queue.depth > 0);
    const context: ReconcileContext = {
      clients: this.clients,
      caches: this.caches,
      recorder: this.recorder,
      bus: this.options.bus,
      log: this.log,
      now: () => new Date(),
    };
    const listings = new ToolListings((namespace, name) => this.enqueueWorkflowsUsing(namespace, name));
    this.servers = new McpServerReconciler(context, this.serverBucket, this.options.server, listings);
    this.credentials = new McpCredentialReconciler(context, this.options.finalizerTimeoutMs);
    this.policies = new McpPolicyReconciler(context, this.policyBucket);
    this.workflows = new McpWorkflowReconciler(context, this.workflowBucket, listings);
    this.idle = new IdleScaler(context, this.options.idleCheckMs);
    await Promise.all(this.informers.map((entry) => this.sync(entry)));
    this.elector.start();
  }

  /** Stops reconciling (waiting for reconciles in flight), releases the Lease and stops the informers. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.elector.stop(); // stops leading (and the workers) when it led
    await this.queue.stop(); // the reconciles still in flight finish before the watches stop
    this.queue.clear();
    await this.recorder?.flush(EVENT_FLUSH_MS); // the Events they queued are written (an API server that hangs cannot hold the stop)
    await Promise.all(this.informers.map(({ informer }) => informer.stop()));
    this.unwatch();
  }

  private makeInformer(kind: WatchedKind, namespace: string | undefined): InformerEntry {
    const { apiVersion, kind: apiKind, path, labelSelector, metadataOnly } = watched[kind];
    const scoped = namespace === undefined ? `/${path}` : `/${path.replace(/\/([a-z]+)$/, `/namespaces/${namespace}/$1`)}`;
    const informer = metadataOnly
      ? makeMetadataInformer(this.options.kubeConfig, scoped, () => this.clients.objects.listMetadata(scoped))
      : (makeInformer<KubernetesObject>(
          this.options.kubeConfig,
          scoped,
          () => this.clients.objects.list(apiVersion, apiKind, namespace, undefined, undefined, undefined, undefined, labelSelector),
          labelSelector,
        ) as ListWatch<KubernetesObject>); // what makeInformer makes (informer.js), typed as its interfaces alone
    const entry: InformerEntry = { kind, namespace, informer, synced: false };
    const onEvent = (object: KubernetesObject, deleted = false) => this.enqueueFor(kind, object, deleted);
    // The cache keeps the object a handler is given: cut down to what the reconciles read (cache-slim.ts).
    const slim = (object: KubernetesObject) => slimForCache(kind, object);
    informer.on('add', slim);
    informer.on('update', slim);
    informer.on('add', (object) => {
      this.changedBeyondStatus(kind, object); // remembers what it showed
      onEvent(object);
    });
    informer.on('update', (object) => {
      if (this.changedBeyondStatus(kind, object)) onEvent(object);
    });
    informer.on('delete', (object) => {
      this.seen.delete(`${kind}/${object.metadata?.namespace}/${object.metadata?.name}`);
      onEvent(object, true);
    });
    informer.on('error', (error: unknown) => {
      entry.lastError = error;
      // Before the first complete list, sync() retries; afterwards the informer lists and watches again here.
      if (this.stopping || !entry.synced) return;
      this.log.warn({ kind, namespace: namespace ?? '(all)', err: apiErrorMessage(error) }, 'watch failed; listing and watching again');
      setTimeout(() => {
        if (!this.stopping) informer.start().catch(() => undefined);
      }, INFORMER_RESTART_MS).unref();
    });
    return entry;
  }

  /**
   * Starts an informer and resolves once its cache holds a complete list (the orphan sweep must never compare
   * the buckets with a cache that failed to fill, e.g. while a new CRD's storage is initializing: 429).
   * @throws Error naming the kind and the API server's answer after {@link FIRST_LIST_ATTEMPTS} failed lists.
   */
  private async sync(entry: InformerEntry): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      entry.lastError = undefined;
      await entry.informer.start().catch((error: unknown) => (entry.lastError = error));
      if (entry.lastError === undefined) {
        entry.synced = true;
        return;
      }
      if (this.stopping) return;
      if (attempt >= FIRST_LIST_ATTEMPTS)
        throw new Error(
          `cannot list ${entry.kind} objects${entry.namespace ? ` in namespace ${entry.namespace}` : ''}: ${apiErrorMessage(entry.lastError)}`,
        );
      this.log.debug({ kind: entry.kind, attempt, err: apiErrorMessage(entry.lastError) }, 'first list failed; trying again');
      await new Promise((resolve) => setTimeout(resolve, INFORMER_RESTART_MS));
    }
  }

  /**
   * Whether an update of a custom resource changed more than its status (its generation, labels, annotations,
   * finalizers or deletion), as controller-runtime's GenerationChanged and LabelChanged predicates decide: the
   * operator's own status writes would otherwise queue every object a second time. Other kinds always count.
   */
  private changedBeyondStatus(kind: WatchedKind, object: KubernetesObject): boolean {
    if (kind !== 'McpServer' && kind !== 'McpCredential' && kind !== 'McpPolicy' && kind !== 'McpWorkflow') return true;
    const meta = object.metadata ?? {};
    const key = `${kind}/${meta.namespace}/${meta.name}`;
    const signature = JSON.stringify([meta.generation, meta.labels, meta.annotations, meta.finalizers, meta.deletionTimestamp]);
    if (this.seen.get(key) === signature) return false;
    this.seen.set(key, signature);
    return true;
  }

  /**
   * Queues what an event about `object` of `kind` affects (`deleted`: a delete event). A child's add or update
   * showing the resourceVersion the operator's own apply returned is the echo of that apply and queues nothing: the
   * reconcile that applied it already saw the object as stored.
   */
  private enqueueFor(kind: WatchedKind, object: KubernetesObject, deleted: boolean): void {
    const namespace = object.metadata?.namespace;
    const name = object.metadata?.name;
    if (!namespace || !name) return;
    switch (kind) {
      case 'McpServer':
        this.queue.add(`McpServer/${namespace}/${name}`);
        this.enqueueWorkflowsUsing(namespace, name);
        return;
      case 'McpPolicy':
      case 'McpWorkflow':
        this.queue.add(`${kind}/${namespace}/${name}`);
        return;
      case 'McpCredential':
        this.queue.add(`McpCredential/${namespace}/${name}`);
        for (const server of this.caches.McpServer.list(namespace)) {
          if (serverCredentialNames(server).includes(name)) this.queue.add(`McpServer/${namespace}/${server.metadata!.name}`);
        }
        return;
      case 'Deployment':
      case 'Service':
      case 'ServiceAccount':
      case 'NetworkPolicy': {
        if (kind === 'ServiceAccount' && name === SERVER_SERVICE_ACCOUNT) {
          // The namespace's shared account, changed or deleted by someone: one of its pod servers applies it again.
          if (deleted) this.servers.serviceAccounts.forget(namespace);
          else if (this.servers.serviceAccounts.isOwnApply(object)) return;
          const server = this.caches.McpServer.list(namespace).find(hasPods);
          if (server) this.queue.add(`McpServer/${namespace}/${server.metadata!.name}`);
          return;
        }
        const owner = object.metadata?.ownerReferences?.find((ref) => ref.controller === true && ref.kind === 'McpServer');
        if (!owner) return;
        if (!deleted && this.servers.isOwnApply(namespace, owner.name, kind, object)) return;
        this.queue.add(`McpServer/${namespace}/${owner.name}`);
        return;
      }
      case 'DeploymentMetadata':
        return; // the names other objects hold; the whole Deployments' watch queues their McpServers
      case 'Pod': {
        const server = object.metadata?.labels?.[SERVER_LABEL];
        if (server) this.queue.add(`McpServer/${namespace}/${server}`);
        return;
      }
      case 'Secret':
        for (const credential of this.caches.McpCredential.list(namespace)) {
          if ((credential as { spec?: { secretRef?: { name?: string } } }).spec?.secretRef?.name === name)
            this.queue.add(`McpCredential/${namespace}/${credential.metadata!.name}`);
        }
        for (const server of this.caches.McpServer.list(namespace)) {
          if (serverSecretNames(server, this.caches.McpCredential).includes(name))
            this.queue.add(`McpServer/${namespace}/${server.metadata!.name}`);
        }
        return;
      case 'ConfigMap':
        for (const server of this.caches.McpServer.list(namespace)) {
          if (serverConfigMapName(server) === name) this.queue.add(`McpServer/${namespace}/${server.metadata!.name}`);
        }
        return;
    }
  }

  /** Queues the McpWorkflows of `namespace` whose nodes call McpServer `server`. */
  private enqueueWorkflowsUsing(namespace: string, server: string): void {
    for (const workflow of this.caches.McpWorkflow.list(namespace))
      if (workflowServerNames(workflow).includes(server)) this.queue.add(`McpWorkflow/${namespace}/${workflow.metadata!.name}`);
  }

  private async reconcile(key: string): Promise<{ requeueAfterMs?: number } | undefined> {
    const [kind, namespace, name] = key.split('/') as [string, string, string];
    switch (kind) {
      case 'McpServer':
        return this.servers.reconcile(namespace, name);
      case 'McpCredential':
        await this.credentials.reconcile(namespace, name);
        return undefined;
      case 'McpPolicy':
        await this.policies.reconcile(namespace, name);
        return undefined;
      case 'McpWorkflow':
        await this.workflows.reconcile(namespace, name);
        return undefined;
    }
    return undefined;
  }

  /** Queues every custom resource of the caches. */
  private enqueueAll(): void {
    for (const kind of ['McpServer', 'McpCredential', 'McpPolicy', 'McpWorkflow'] as const) {
      for (const object of this.caches[kind].list()) this.queue.add(`${kind}/${object.metadata!.namespace}/${object.metadata!.name}`);
    }
  }

  /**
   * Removes the bucket entries of servers, policies and workflows no object backs any more (a delete event missed while
   * no operator led, or an object deleted while its reconcile failed). Only keys of watched namespaces are
   * considered: another operator may own the others.
   */
  private async sweepOrphans(): Promise<void> {
    const watchesAll = this.options.namespaces.length === 0;
    const namespaces = new Set(this.options.namespaces.map((ns) => kvKey(ns)));
    for (const [bucket, kind] of [
      [this.serverBucket, 'McpServer'],
      [this.policyBucket, 'McpPolicy'],
      [this.workflowBucket, 'McpWorkflow'],
    ] as const) {
      const live = new Set(this.caches[kind].list().map((o) => kvKey(o.metadata!.namespace!, o.metadata!.name!)));
      for (const key of await bucket.keys()) {
        if (live.has(key)) continue;
        if (!watchesAll && !namespaces.has(key.split('.')[0]!)) continue;
        await bucket.delete(key);
        this.log.info({ kind, key }, 'removed a bucket entry no object backs');
      }
    }
  }

  private resync(): void {
    this.enqueueAll();
    this.sweepOrphans().catch((error: unknown) =>
      this.log.warn({ err: errorMessage(error) }, 'orphan sweep failed; retried at the next resync'),
    );
  }

  private startLeading(): void {
    if (this.stopping || this.leading) return;
    this.leading = true;
    this.resync();
    this.queue.start();
    const tick = () => {
      this.resync();
      this.resyncTimer = setTimeout(tick, this.options.resyncMs);
    };
    this.resyncTimer = setTimeout(tick, this.options.resyncMs);
    this.idle
      ?.start()
      .catch((error: unknown) =>
        this.log.error(
          { err: errorMessage(error) },
          'could not start scaling idle servers to zero (spec.idle); it is tried at the next lead',
        ),
      );
  }

  private async stopLeading(): Promise<void> {
    if (!this.leading) return;
    this.leading = false;
    clearTimeout(this.resyncTimer);
    await this.idle?.stop();
    await this.queue.stop();
  }
}
