/**
 * The ServiceAccount the pods of every image and package McpServer of a namespace run as, one per namespace: a pod
 * server gets no Kubernetes token (automountServiceAccountToken false, pod-template-merge.ts refuses one), so one
 * account serves them all and a cold start applies one per namespace rather than one per server. It is labelled
 * `app.kubernetes.io/managed-by=punk-operator` and owned by no McpServer, so deleting one server leaves it to the
 * others; the operator deletes it when the namespace's last pod server goes.
 */
import type { KubernetesObject, V1ServiceAccount } from '@kubernetes/client-node';
import { applyObject, deleteObject, type ApplyObject } from './apply.js';
import type { ReconcileContext } from './context.js';
import { hasPods, MANAGED_BY } from './sandbox.js';

/** Name of the namespace's shared ServiceAccount of McpServer pods (and their egress proxies). */
export const SERVER_SERVICE_ACCOUNT = 'punk-mcp-server';

const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';

/** The shared ServiceAccount of `namespace`: no token, Punk's labels, no owner. */
export function sharedServiceAccount(namespace: string): V1ServiceAccount & ApplyObject {
  return {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: {
      name: SERVER_SERVICE_ACCOUNT,
      namespace,
      labels: { 'app.kubernetes.io/component': 'mcp-server', [MANAGED_BY_LABEL]: MANAGED_BY },
    },
    automountServiceAccountToken: false,
  };
}

/** Keeps the shared ServiceAccount of each namespace applied, once per namespace, from the informers' caches. */
export class SharedServiceAccounts {
  /** Per namespace: the resourceVersion the operator's last apply of the account got. */
  private readonly applied = new Map<string, string>();
  /** Per namespace: the apply under way, which concurrent reconciles of the namespace's servers wait for. */
  private readonly applying = new Map<string, Promise<void>>();

  constructor(private readonly context: ReconcileContext) {}

  /**
   * Applies the shared ServiceAccount of `namespace` unless this operator applied it and the cache shows it
   * unchanged since (or has not yet seen that apply's echo).
   * @returns a message naming the account when one of its name exists without the operator's label (a user's,
   *   never taken over), else undefined.
   * @throws the API server's error.
   */
  async ensure(namespace: string): Promise<string | undefined> {
    const cached = this.context.caches.ServiceAccount.get(SERVER_SERVICE_ACCOUNT, namespace);
    if (cached && cached.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) {
      return `ServiceAccount ${namespace}/${SERVER_SERVICE_ACCOUNT} exists and is not managed by the operator (no label ${MANAGED_BY_LABEL}=${MANAGED_BY}); the pods of the namespace's McpServers run as it: delete it, or label it to hand it to the operator`;
    }
    const memo = this.applied.get(namespace);
    if (memo !== undefined && (cached === undefined || cached.metadata?.resourceVersion === memo)) return undefined;
    let pending = this.applying.get(namespace);
    if (!pending) {
      pending = applyObject<KubernetesObject>(this.context.clients, sharedServiceAccount(namespace))
        .then((stored) => void this.applied.set(namespace, stored.metadata?.resourceVersion ?? ''))
        .finally(() => this.applying.delete(namespace));
      this.applying.set(namespace, pending);
    }
    await pending;
    return undefined;
  }

  /** Whether `account` (a watch event's) is the echo of this operator's last apply, or an apply is under way in its namespace. */
  isOwnApply(account: KubernetesObject): boolean {
    const namespace = account.metadata?.namespace ?? '';
    return this.applying.has(namespace) || this.applied.get(namespace) === account.metadata?.resourceVersion;
  }

  /** Forgets the apply of `namespace`'s account (it was deleted): the next {@link ensure} applies it again. */
  forget(namespace: string): void {
    this.applied.delete(namespace);
  }

  /**
   * Deletes the shared ServiceAccount of `namespace` when no McpServer with pods (neither `url` nor `openapi`) is
   * left there, the cache shows it and it carries the operator's label.
   * @throws the API server's error other than 404.
   */
  async release(namespace: string): Promise<void> {
    const remaining = this.context.caches.McpServer.list(namespace).some(
      (server) => !server.metadata?.deletionTimestamp && hasPods(server),
    );
    const cached = this.context.caches.ServiceAccount.get(SERVER_SERVICE_ACCOUNT, namespace);
    if (remaining || cached?.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY) return;
    this.forget(namespace);
    await deleteObject(this.context.clients, sharedServiceAccount(namespace));
  }
}
