/**
 * Kubernetes Events (events.k8s.io/v1) about the operator's objects: one per condition transition, so
 * `kubectl describe` and `kubectl events` tell the story of an McpServer (Available, then Degraded with
 * CrashLoopBackOff, …). Recording is best effort: an Event that cannot be written is logged, never retried,
 * and never fails a reconcile.
 */
import { randomBytes } from 'node:crypto';
import { V1MicroTime } from '@kubernetes/client-node';
import type { Logger } from '@punk/lib';
import type { ConditionTransition } from './server-status.js';
import { apiErrorMessage, type KubeClients } from './kube.js';

/** `reportingController` of every Event (events.k8s.io/v1 wants a `<domain>/<name>`). */
export const REPORTING_CONTROLLER = 'mcp.punk.dev/operator';

/** The object an Event is about. */
export interface EventSubject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid?: string | undefined; resourceVersion?: string | undefined };
}

/** Longest `note` the API server accepts (1 kB). */
const MAX_NOTE = 1024;

/** Writes Events about objects, naming this operator instance as their reporter. */
export class EventRecorder {
  constructor(
    private readonly clients: KubeClients,
    /** `reportingInstance`: this operator process (its instance id). */
    private readonly instance: string,
    private readonly log: Logger,
  ) {}

  /**
   * Records one Event about `subject`: `type` Normal or Warning, `reason` a CamelCase word, `action` what the
   * operator did or saw (`Reconcile`), `note` for people (cut to 1 kB).
   */
  async record(subject: EventSubject, type: 'Normal' | 'Warning', reason: string, action: string, note: string): Promise<void> {
    const { name, namespace, uid, resourceVersion } = subject.metadata;
    try {
      await this.clients.events.createNamespacedEvent({
        namespace,
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name: `${name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`, namespace },
          eventTime: new V1MicroTime(),
          type,
          reason,
          action,
          note: note.length > MAX_NOTE ? `${note.slice(0, MAX_NOTE - 1)}…` : note,
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: this.instance,
          regarding: {
            apiVersion: subject.apiVersion,
            kind: subject.kind,
            name,
            namespace,
            ...(uid !== undefined && { uid }),
            ...(resourceVersion !== undefined && { resourceVersion }),
          },
        },
      });
    } catch (error) {
      this.log.warn({ object: `${namespace}/${name}`, reason, err: apiErrorMessage(error) }, 'could not record an Event');
    }
  }

  /**
   * Records one Event per condition transition (`transitions` of server-status.ts: a condition new, or whose
   * status or reason changed): Warning for Degraded=True and for Ready/Available=False, Normal otherwise. The
   * reason is the condition's own; the note starts with its type and status.
   */
  async recordTransitions(subject: EventSubject, changes: readonly ConditionTransition[]): Promise<void> {
    for (const { to } of changes) {
      const bad = to.type === 'Degraded' ? to.status === 'True' : to.status === 'False' && (to.type === 'Ready' || to.type === 'Available');
      const note = `${to.type}=${to.status}${to.message ? `: ${to.message}` : ''}`;
      await this.record(subject, bad ? 'Warning' : 'Normal', to.reason, 'Reconcile', note);
    }
  }
}
