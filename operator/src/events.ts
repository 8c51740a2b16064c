/**
 * Kubernetes Events (events.k8s.io/v1) about the operator's objects: one per status write that changes conditions
 * (naming each transition), so `kubectl describe` and `kubectl events` tell the story of an McpServer (Available,
 * then Degraded with CrashLoopBackOff, …). Recording is best effort: an Event that cannot be written is logged, never retried,
 * and never fails a reconcile. Events are written in the background, as client-go's broadcaster does: a reconcile
 * queues them and goes on. Reconciles go first: while objects wait in the work queue, Events are written one at a
 * time with {@link BUSY_EVENT_PAUSE_MS} between them (a cold start of a thousand new servers makes a thousand,
 * which would otherwise take API server time from the children and status), else
 * {@link EVENT_WRITERS} at a time. Past {@link MAX_PENDING_EVENTS} waiting, new ones are dropped and logged.
 */
import { randomBytes } from 'node:crypto';
import { V1MicroTime } from '@kubernetes/client-node';
import type { Logger } from '@punk/lib/controller';
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

/** Events written at once while no reconcile waits. */
export const EVENT_WRITERS = 2;

/** Pause after each Event written while reconciles wait, in milliseconds (at most 10 Events a second then). */
export const BUSY_EVENT_PAUSE_MS = 100;

/** Events waiting to be written beyond which new ones are dropped (client-go's broadcaster keeps 1,000). */
export const MAX_PENDING_EVENTS = 5000;

/** The conditions whose bad state leads an Event, most telling first. */
const BAD_ORDER = ['Degraded', 'Available', 'Ready'];

/** Whether condition `to` says something is wrong: Degraded=True, or Ready or Available False. */
function isBad(to: ConditionTransition['to']): boolean {
  return to.type === 'Degraded' ? to.status === 'True' : to.status === 'False' && (to.type === 'Ready' || to.type === 'Available');
}

/** Writes Events about objects, naming this operator instance as their reporter. */
export class EventRecorder {
  /** Events waiting for a writer, oldest first. */
  private readonly pending: { write: () => Promise<void>; done: () => void }[] = [];
  private writing = 0;
  /** Resolvers of {@link flush} calls, told when nothing is pending or being written. */
  private idle: (() => void)[] = [];
  /** Whether a pause after an Event written while reconciles wait is running. */
  private pausing = false;

  constructor(
    private readonly clients: KubeClients,
    /** `reportingInstance`: this operator process (its instance id). */
    private readonly instance: string,
    private readonly log: Logger,
    /** Whether reconciles wait (the work queue is not empty): Events are then written slowly. */
    private readonly busy: () => boolean = () => false,
  ) {}

  /**
   * Queues one Event about `subject`: `type` Normal or Warning, `reason` a CamelCase word, `action` what the
   * operator did or saw (`Reconcile`), `note` for people (cut to 1 kB).
   * @returns a promise settled once the Event is written, failed (logged) or dropped (the queue is full): it never rejects.
   */
  record(subject: EventSubject, type: 'Normal' | 'Warning', reason: string, action: string, note: string): Promise<void> {
    const { name, namespace } = subject.metadata;
    if (this.pending.length >= MAX_PENDING_EVENTS) {
      this.log.warn({ object: `${namespace}/${name}`, reason }, `dropped an Event: ${MAX_PENDING_EVENTS} are waiting to be written`);
      return Promise.resolve();
    }
    return new Promise((done) => {
      this.pending.push({ write: () => this.write(subject, type, reason, action, note), done });
      this.pump();
    });
  }

  /** Resolves once every Event queued so far is written (or failed), or after `timeoutMs` milliseconds. */
  flush(timeoutMs: number): Promise<void> {
    if (this.writing === 0 && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private pump(): void {
    while (!this.pausing && this.writing < (this.busy() ? 1 : EVENT_WRITERS) && this.pending.length > 0) {
      const { write, done } = this.pending.shift()!;
      this.writing++;
      void write().finally(() => {
        this.writing--;
        done();
        if (this.writing === 0 && this.pending.length === 0) for (const resolve of this.idle.splice(0)) resolve();
        if (!this.busy()) {
          this.pump();
          return;
        }
        this.pausing = true;
        setTimeout(() => {
          this.pausing = false;
          this.pump();
        }, BUSY_EVENT_PAUSE_MS);
      });
    }
  }

  private async write(subject: EventSubject, type: 'Normal' | 'Warning', reason: string, action: string, note: string): Promise<void> {
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
   * Queues one Event for the condition transitions of one status write (`transitions` of server-status.ts: a
   * condition new, or whose status or reason changed), as client-go's correlator folds like Events into one: a first
   * status makes one Event, not one per condition (a cold start of a thousand servers writes a thousand, not four
   * thousand). It leads with the most telling transition — the first bad one (Degraded=True, then Available=False,
   * Ready=False), else the first — whose reason is the Event's and whose `Type=Status: message` starts the note; the
   * others follow it (`; Available=False ReplicasUnavailable: …`). Warning when any transition is bad, Normal otherwise.
   * The note is cut to 1 kB (the conditions on the object keep every message whole).
   */
  recordTransitions(subject: EventSubject, changes: readonly ConditionTransition[]): void {
    if (changes.length === 0) return;
    const rank = ({ to }: ConditionTransition) => (isBad(to) ? BAD_ORDER.indexOf(to.type) : BAD_ORDER.length);
    const ordered = [...changes].sort((a, b) => rank(a) - rank(b)); // stable: the others keep the status's order
    const [lead, ...others] = ordered as [ConditionTransition, ...ConditionTransition[]];
    const note = [
      `${lead.to.type}=${lead.to.status}${lead.to.message ? `: ${lead.to.message}` : ''}`,
      ...others.map(({ to }) => `${to.type}=${to.status} ${to.reason}${to.message ? `: ${to.message}` : ''}`),
    ].join('; ');
    void this.record(subject, ordered.some(({ to }) => isBad(to)) ? 'Warning' : 'Normal', lead.to.reason, 'Reconcile', note);
  }
}
