/**
 * What every reconciler is given by the manager: the API clients, the informers' caches (reads come from
 * them, as controller-runtime's client reads from its cache), the Event recorder, the bus and a clock.
 */
import type { KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import type { Bus, Logger } from '@punk/lib/controller';
import type { EventRecorder } from './events.js';
import type { KubeClients } from './kube.js';

/**
 * The kinds the manager watches, each with its cache. `Deployment` holds the operator's Deployments (labelled
 * `mcp.punk.dev/server`), `DeploymentMetadata` the metadata of every Deployment; `Service`, `ServiceAccount` and
 * `NetworkPolicy` hold the metadata of every object of their kind (so which child names are taken is known without a
 * read).
 */
export type WatchedKind =
  'McpServer' | 'McpCredential' | 'McpPolicy' | 'McpWorkflow' | 'Secret' | 'ConfigMap' | ChildKind | 'DeploymentMetadata' | 'Pod';

/** The kinds of an McpServer's children (its own and its egress proxy's), each watched as controller-runtime's Owns() does. */
export type ChildKind = 'Deployment' | 'Service' | 'ServiceAccount' | 'NetworkPolicy';

/** An informer's cache (or several namespaces' informers' caches) and how far it has followed the API server. */
export interface WatchCache extends ObjectCache<KubernetesObject> {
  /** The resourceVersion the cache of `namespace` has caught up with (its list's, or its latest event's); '' before its list. */
  resourceVersion(namespace: string): string;
}

/** The shared dependencies of the reconcilers. */
export interface ReconcileContext {
  clients: KubeClients;
  caches: Record<WatchedKind, WatchCache>;
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
