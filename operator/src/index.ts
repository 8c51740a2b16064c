/**
 * @punk/operator: reconciles McpServer, McpCredential, McpPolicy and McpWorkflow custom resources (group
 * `mcp.punk.dev`, version `v1alpha1`) into sandboxed pods, the gateway's vault and the services' buckets.
 */
import { Manager, type ManagerOptions } from './manager.js';

export type { ManagerOptions as OperatorOptions } from './manager.js';
export type { ServerReconcilerOptions } from './mcpserver-reconciler.js';
export { operatorOptionsFromConfig } from './options.js';
export { VAULT_FINALIZER } from './mcpcredential-reconciler.js';
export { FIELD_MANAGER } from './kube.js';

/** A running operator. */
export interface RunningOperator {
  /** Stops reconciling (reconciles in flight finish), releases the leader Lease and stops the watches. */
  stop(): Promise<void>;
  /** Whether this instance holds the leader Lease, and so reconciles. */
  isLeader(): boolean;
}

/**
 * Starts the operator: opens the buckets, lists and watches its kinds, then competes for the leader Lease;
 * the leader reconciles.
 * @throws when a bucket cannot be opened or the first list of a kind fails (CRDs not installed, no RBAC).
 */
export async function startOperator(options: ManagerOptions): Promise<RunningOperator> {
  const manager = new Manager(options);
  await manager.start();
  return { stop: () => manager.stop(), isLeader: () => manager.isLeader() };
}
