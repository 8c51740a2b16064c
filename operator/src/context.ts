/**
 * What every reconciler is given by the manager: the API clients, the informers' caches (reads come from
 * them, as controller-runtime's client reads from its cache), the Event recorder, the bus and a clock.
 */
import type { KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { Bus, Logger } from '@punk/lib';
import type { EventRecorder } from './events.js';
import type { KubeClients } from './kube.js';

/** The kinds the manager watches, each with its cache. */
export type WatchedKind = 'McpServer' | 'McpCredential' | 'McpPolicy' | 'Secret' | 'Deployment' | 'Pod';

/** The shared dependencies of the reconcilers. */
export interface ReconcileContext {
  clients: KubeClients;
  caches: Record<WatchedKind, ObjectCache<KubernetesObject>>;
  recorder: EventRecorder;
  bus: Bus;
  log: Logger;
  /** The time conditions are stamped with. */
  now: () => Date;
}

/** The principal the operator's admin requests to the gateway are made as (audited under it). */
export function operatorPrincipal(tenant: string): { subject: string; tenant: string; groups: string[] } {
  return { subject: 'system:punk-operator', tenant, groups: [] };
}
