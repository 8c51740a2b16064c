/**
 * `punk cluster` playing the operator's part for `spec.idle` (operator/src/idle-scaler.ts does it in a cluster):
 * every {@link CLUSTER_IDLE_CHECK_MS} each server with `spec.idle` unused for its `scaleToZeroAfter` (by the
 * gateways' entries of bucket `PUNK_SERVER_ACTIVITY`, lib server-idle.ts) is put to sleep: published at zero and its
 * process stopped; `punk.server.wake` starts its process again and publishes it once it listens. Each sleep and
 * wake is a ledger event (`server.slept`, `server.woken`, source `cluster`).
 */
import {
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
  kvKey,
  type Bus,
  type BusSubscription,
  type LedgerEvent,
  type Logger,
  type ServerWakeReply,
} from '@punk/lib';
import type { ClusterServers } from './cluster-servers.js';

/** How often the cluster looks for idle servers, in milliseconds (local: a few KV reads). */
export const CLUSTER_IDLE_CHECK_MS = 1_000;

/** The running idle scaler of a cluster. */
export interface ClusterIdle {
  stop(): Promise<void>;
}

/** Starts putting idle servers of `servers` to sleep and answering `punk.server.wake` (see the module comment). */
export async function startClusterIdle(options: { bus: Bus; log: Logger; servers: ClusterServers }): Promise<ClusterIdle> {
  const { bus, log, servers } = options;
  const activity = await bus.keyValue(buckets.serverActivity);
  /** When each server last became available (started, or woken), epoch milliseconds: the idle clock's start. */
  const since = new Map<string, number>();
  /** The wakes under way, by key, since when. */
  const waking = new Map<string, number>();
  /** Why the last wake of a server failed, as a condition. */
  const failed = new Map<string, string>();
  const record = (event: LedgerEvent) =>
    appendLedgerEvent(bus, event).catch((error: unknown) =>
      log.warn({ server: `${event.tenant}/${event.server}`, err: errorMessage(error) }, 'could not record a sleep or wake on the ledger'),
    );

  let checking = false;
  const check = async () => {
    if (checking) return;
    checking = true;
    try {
      const idle = servers.idle();
      if (idle.size === 0) return;
      const keys = await activity.keys();
      const now = Date.now();
      for (const [key, { server, asleep }] of idle) {
        if (asleep || waking.has(key)) continue;
        const { namespace = 'default', name } = server.metadata;
        const entries = await activityEntries(activity, keys, namespace, name);
        if (!since.has(key)) since.set(key, now);
        const idleMs = idleForMs(entries, since.get(key)!, now);
        if (idleMs === undefined || idleMs < durationMs(server.spec.idle!.scaleToZeroAfter)) continue;
        log.info({ server: key, idleMs }, `${namespace}/${name} is idle: stopping its process until a call wakes it`);
        await servers.sleep(key);
        since.delete(key);
        await record(idleEvent('server.slept', namespace, name, 'cluster', { idleForMs: idleMs, replicas: server.spec.replicas }));
      }
    } catch (error) {
      log.warn({ err: errorMessage(error) }, 'the idle check failed; it runs again in a second');
    } finally {
      checking = false;
    }
  };
  const timer = setInterval(() => void check(), CLUSTER_IDLE_CHECK_MS);

  const wake = (namespace: string, name: string): ServerWakeReply => {
    const key = kvKey(namespace, name);
    const found = servers.idle().get(key);
    if (!found) {
      throw new PunkError(
        'ServerNotIdle',
        `McpServer ${namespace}/${name} is not in the manifests directory with spec.idle, so it is not woken by calls`,
      );
    }
    const replicas = found.server.spec.replicas || 1;
    const started = waking.get(key);
    if (started !== undefined)
      return {
        replicas,
        condition: `Available=False (Waking): its process was started ${String(Math.round((Date.now() - started) / 1000))} s ago and does not listen yet`,
      };
    if (!found.asleep) return { replicas, condition: 'Available=True (Running): its process runs' };
    const failure = failed.get(key);
    failed.delete(key);
    waking.set(key, Date.now());
    void servers
      .wake(key)
      .then(async (listening) => {
        if (!listening) {
          failed.set(
            key,
            `Available=False (ProcessNotListening): the process of ${namespace}/${name} did not listen within its start timeout; see its lines in punk cluster's output`,
          );
          return;
        }
        since.set(key, Date.now());
        log.info({ server: key }, `${namespace}/${name} is awake`);
        await record(idleEvent('server.woken', namespace, name, 'cluster', { replicas }));
      })
      .catch((error: unknown) => log.error({ server: key, err: errorMessage(error) }, `could not wake ${namespace}/${name}`))
      .finally(() => waking.delete(key));
    return { replicas, condition: failure ? `${failure}; started again` : 'Available=False (Waking): its process is starting' };
  };
  const subscription: BusSubscription = await bus.serve(
    subjects.serverWake,
    async (data) => {
      const { namespace, name } = parseMessage(serverWakeRequestSchema, subjects.serverWake, data);
      return wake(namespace, name);
    },
    { queue: queues.operator },
  );
  return {
    async stop() {
      clearInterval(timer);
      await subscription.unsubscribe();
    },
  };
}
