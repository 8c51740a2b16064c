/**
 * Scale to zero when idle, and wake on the first call (`spec.idle`), on the leader:
 * - every `checkIntervalMs` each McpServer with `spec.idle`, replicas above zero and Available=True is judged by the
 *   gateway replicas' entries of bucket `PUNK_SERVER_ACTIVITY` (lib server-idle.ts): unused for
 *   `spec.idle.scaleToZeroAfter` (the clock starts at its last call, or when it last became Available) with no call
 *   in flight and no stream open, it is scaled to zero through its scale subresource, its replicas remembered in
 *   annotation `mcp.punk.dev/wake-replicas` first (a merge patch on the resourceVersion judged, so a change made
 *   meanwhile wins);
 * - `punk.server.wake` (a gateway holding a call) scales it back to the remembered replicas (1 when none is
 *   remembered) and drops the annotation; the reconciler publishes it running once its pods are ready, and the
 *   gateway forwards the held calls then. A wake of a server up already answers its replicas and condition. Wakes
 *   of one server asked by several gateway replicas at once make one.
 * Each sleep and wake is an Event on the McpServer (reasons Slept and Woken), a ledger event (`server.slept`,
 * `server.woken`) and a count in the operator's metrics.
 */
import { PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import {
  API_GROUP,
  appendLedgerEvent,
  buckets,
  durationMs,
  errorMessage,
  idleEvent,
  activityEntries,
  idleForMs,
  parseMessage,
  PunkError,
  queues,
  serverWakeRequestSchema,
  subjects,
  WAKE_REPLICAS_ANNOTATION,
  type BusSubscription,
  type KvStore,
  type LedgerEvent,
  type ServerWakeReply,
} from '@punk/lib/controller';
import type { ReconcileContext } from './context.js';
import { apiErrorMessage, API_VERSION_NAME } from './kube.js';
import { serverSleeps, serverWakes } from './metrics.js';
import { conditionsOf } from './status.js';

/** Default period of the idle check, in milliseconds. */
export const DEFAULT_IDLE_CHECK_MS = 10_000;

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type ServerObject = KubernetesObject & { spec?: { replicas?: number; idle?: { scaleToZeroAfter?: string } }; status?: unknown };

/** The McpServer's Available condition as people read it (`Available=False (ScaledToZero): …`), Ready's when absent. */
export function conditionText(object: { status?: unknown }): string {
  const conditions = conditionsOf(object);
  const c = conditions.find((x) => x.type === 'Available') ?? conditions.find((x) => x.type === 'Ready');
  return c ? `${c.type}=${c.status} (${c.reason}): ${c.message}` : 'no condition written yet';
}

/** The leader's idle scaler (see the module comment). */
export class IdleScaler {
  private timer: NodeJS.Timeout | undefined;
  private subscription: BusSubscription | undefined;
  private bucket: KvStore | undefined;
  /** Wakes being made, by `namespace/name`: a second request joins the first. */
  private readonly waking = new Map<string, Promise<ServerWakeReply>>();
  /** Servers woken to these replicas whose scale the cache may not show yet (cleared once it does). */
  private readonly woken = new Map<string, number>();
  private checking = false;

  constructor(
    private readonly context: ReconcileContext,
    private readonly checkIntervalMs = DEFAULT_IDLE_CHECK_MS,
  ) {}

  /** Starts checking and answering `punk.server.wake` (the manager's start of leading). */
  async start(): Promise<void> {
    this.bucket ??= await this.context.bus.keyValue(buckets.serverActivity);
    this.subscription ??= await this.context.bus.serve(
      subjects.serverWake,
      (data) => {
        const { namespace, name } = parseMessage(serverWakeRequestSchema, subjects.serverWake, data);
        return this.wake(namespace, name);
      },
      { queue: queues.operator },
    );
    const tick = () => {
      void this.check().finally(() => {
        if (this.subscription) this.timer = setTimeout(tick, this.checkIntervalMs);
      });
    };
    this.timer = setTimeout(tick, this.checkIntervalMs);
  }

  /** Stops checking and answering (the manager's end of leading). */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.unsubscribe();
  }

  /** One pass over the McpServers with `spec.idle`: scales the idle ones to zero. Failures are logged. */
  async check(): Promise<void> {
    if (this.checking || !this.bucket) return;
    this.checking = true;
    try {
      const candidates = (this.context.caches.McpServer.list() as ServerObject[]).filter(
        (o) => o.spec?.idle?.scaleToZeroAfter !== undefined && (o.spec.replicas ?? 1) > 0 && !o.metadata?.deletionTimestamp,
      );
      if (candidates.length === 0) return;
      const keys = await this.bucket.keys();
      const now = this.context.now().getTime();
      for (const object of candidates) {
        const { namespace, name } = object.metadata as { namespace: string; name: string };
        const available = conditionsOf(object).find((c) => c.type === 'Available');
        if (available?.status !== 'True') continue;
        const afterMs = durationMs(object.spec!.idle!.scaleToZeroAfter!);
        const entries = await activityEntries(this.bucket, keys, namespace, name);
        const idle = idleForMs(entries, Date.parse(available.lastTransitionTime), now);
        if (idle !== undefined && idle >= afterMs) await this.sleep(object, idle);
      }
    } catch (error) {
      this.context.log.warn({ err: apiErrorMessage(error) }, 'the idle check failed; it runs again at the next period');
    } finally {
      this.checking = false;
    }
  }

  /** Scales `object` to zero, remembering its replicas; a change of the McpServer meanwhile (409) skips it. */
  private async sleep(object: ServerObject, idleMs: number): Promise<void> {
    const { namespace, name, resourceVersion } = object.metadata as { namespace: string; name: string; resourceVersion?: string };
    const replicas = object.spec?.replicas ?? 1;
    const target = { group: API_GROUP, version: API_VERSION_NAME, namespace, plural: 'mcpservers', name };
    try {
      await this.context.clients.custom.patchNamespacedCustomObject(
        { ...target, body: { metadata: { resourceVersion, annotations: { [WAKE_REPLICAS_ANNOTATION]: String(replicas) } } } },
        merge,
      );
      await this.context.clients.custom.patchNamespacedCustomObjectScale({ ...target, body: { spec: { replicas: 0 } } }, merge);
    } catch (error) {
      this.context.log.info({ server: `${namespace}/${name}`, err: apiErrorMessage(error) }, 'an idle server was not scaled to zero');
      return;
    }
    this.woken.delete(`${namespace}/${name}`);
    const idleFor = `${String(Math.round(idleMs / 1000))} s`;
    this.context.log.info({ server: `${namespace}/${name}`, idleMs, replicas }, `scaled idle server ${namespace}/${name} to zero`);
    serverSleeps.inc();
    this.announce(
      object,
      'Slept',
      'ScaleToZero',
      `no call for ${idleFor} (spec.idle.scaleToZeroAfter ${object.spec!.idle!.scaleToZeroAfter!}): scaled to zero; the first call wakes it to ${String(replicas)} replicas`,
      idleEvent('server.slept', namespace, name, 'operator', { idleForMs: idleMs, replicas }),
    );
  }

  /**
   * Answers one wake request: scales McpServer `namespace/name` back to its remembered replicas when it is at zero.
   * @throws PunkError `ServerNotFound` (no such McpServer watched), `ServerNotIdle` (no spec.idle: scaled to zero by
   *   hand, it stays there), or the API server's error.
   */
  async wake(namespace: string, name: string): Promise<ServerWakeReply> {
    const key = `${namespace}/${name}`;
    const object = this.context.caches.McpServer.get(name, namespace) as ServerObject | undefined;
    if (!object) throw new PunkError('ServerNotFound', `McpServer ${key} does not exist (or is not watched by this operator)`);
    if (!object.spec?.idle) {
      throw new PunkError(
        'ServerNotIdle',
        `McpServer ${key} has no spec.idle, so it is not woken by calls; scale it up (kubectl scale mcpserver ${name} -n ${namespace} --replicas=1)`,
      );
    }
    const cached = object.spec.replicas ?? 1;
    if (cached > 0) this.woken.delete(key);
    const replicas = cached > 0 ? cached : this.woken.get(key);
    if (replicas !== undefined) return { replicas, condition: conditionText(object) };
    let pending = this.waking.get(key);
    if (!pending) {
      pending = this.scaleUp(object).finally(() => this.waking.delete(key));
      this.waking.set(key, pending);
    }
    return pending;
  }

  private async scaleUp(object: ServerObject): Promise<ServerWakeReply> {
    const { namespace, name } = object.metadata as { namespace: string; name: string };
    const remembered = Number(object.metadata?.annotations?.[WAKE_REPLICAS_ANNOTATION]);
    const replicas = Number.isInteger(remembered) && remembered > 0 ? remembered : 1;
    const target = { group: API_GROUP, version: API_VERSION_NAME, namespace, plural: 'mcpservers', name };
    await this.context.clients.custom.patchNamespacedCustomObjectScale({ ...target, body: { spec: { replicas } } }, merge);
    this.woken.set(`${namespace}/${name}`, replicas);
    await this.context.clients.custom
      .patchNamespacedCustomObject({ ...target, body: { metadata: { annotations: { [WAKE_REPLICAS_ANNOTATION]: null } } } }, merge)
      .catch((error: unknown) =>
        this.context.log.warn(
          { server: `${namespace}/${name}`, err: apiErrorMessage(error) },
          'could not drop the wake-replicas annotation',
        ),
      );
    this.context.log.info({ server: `${namespace}/${name}`, replicas }, `woke server ${namespace}/${name} for a call`);
    serverWakes.inc();
    this.announce(
      object,
      'Woken',
      'ScaleUp',
      `a call came while scaled to zero by spec.idle: scaled back to ${String(replicas)} replicas`,
      idleEvent('server.woken', namespace, name, 'operator', { replicas }),
    );
    return { replicas, condition: conditionText(object) };
  }

  /** Records a sleep or wake of `object`: a Normal Event (`reason`, `action`, `note`) and `event` on the ledger (logged when it fails). */
  private announce(object: ServerObject, reason: string, action: string, note: string, event: LedgerEvent): void {
    const { name, namespace, uid, resourceVersion } = object.metadata as {
      name: string;
      namespace: string;
      uid?: string;
      resourceVersion?: string;
    };
    const subject = {
      apiVersion: `${API_GROUP}/${API_VERSION_NAME}`,
      kind: 'McpServer',
      metadata: { name, namespace, uid, resourceVersion },
    };
    void this.context.recorder.record(subject, 'Normal', reason, action, note);
    appendLedgerEvent(this.context.bus, event).catch((error: unknown) =>
      this.context.log.warn(
        { server: `${namespace}/${name}`, type: event.type, err: errorMessage(error) },
        'could not record a sleep or wake on the ledger',
      ),
    );
  }
}
