/**
 * Leader election on a coordination.k8s.io/v1 Lease, after client-go's leaderelection package: candidates try
 * to acquire the Lease every `retryPeriodMs`; the holder renews it, and steps down when it could not renew for
 * `renewDeadlineMs`; a Lease counts as expired `leaseDurationMs` after this process last saw it change (its own
 * clock, never the holder's timestamps, so clock skew between nodes does not matter); a graceful stop releases
 * it (empty holder, 1 s duration) so another candidate takes over at once. Writes carry the Lease's
 * resourceVersion: of two candidates racing for it, the API server lets exactly one write win.
 */
import { V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from '@punk/lib/controller';
import { apiErrorMessage, httpStatusOf, isNotFound, type KubeClients } from './kube.js';

/** Timing and identity of one candidate; durations in milliseconds (defaults: client-go's 15 s, 10 s, 2 s). */
export interface LeaderElectionOptions {
  clients: KubeClients;
  namespace: string;
  /** Name of the Lease. */
  name: string;
  /** This candidate's identity, written as `spec.holderIdentity` (unique per process). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Called when this candidate becomes the leader. */
  onStartedLeading: () => void;
  /** Called when it stops being the leader (lost, not renewed in time, or released). */
  onStoppedLeading: () => void;
  log: Logger;
}

/** One candidate for the Lease. */
export class LeaderElector {
  private leading = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private loop: Promise<void> | undefined;
  /** The Lease as last read or written, and when (this process's clock). */
  private observed: { lease: V1Lease; at: number } | undefined;
  private lastRenew = 0;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;

  constructor(private readonly options: LeaderElectionOptions) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!(this.leaseDurationMs > this.renewDeadlineMs && this.renewDeadlineMs > this.retryPeriodMs)) {
      throw new RangeError('leader election needs leaseDurationMs > renewDeadlineMs > retryPeriodMs');
    }
  }

  /** Whether this candidate holds the Lease now. */
  isLeader(): boolean {
    return this.leading;
  }

  /** Starts trying to acquire (and then renew) the Lease, every retry period. */
  start(): void {
    this.stopped = false;
    const tick = () => {
      this.loop = this.attempt().finally(() => {
        if (!this.stopped) this.timer = setTimeout(tick, this.retryPeriodMs);
      });
    };
    tick();
  }

  /** Stops competing; when leading, releases the Lease (best effort) and calls `onStoppedLeading`. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.loop;
    if (!this.leading) return;
    try {
      const lease = this.observed?.lease;
      if (lease?.spec?.holderIdentity === this.options.identity) {
        const released: V1Lease = {
          ...lease,
          spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1, renewTime: new V1MicroTime() },
        };
        await this.options.clients.coordination.replaceNamespacedLease({
          name: this.options.name,
          namespace: this.options.namespace,
          body: released,
        });
      }
    } catch (error) {
      this.options.log.warn(
        { err: apiErrorMessage(error) },
        'could not release the leader Lease; another operator takes over when it expires',
      );
    }
    this.setLeading(false);
  }

  private setLeading(leading: boolean): void {
    if (this.leading === leading) return;
    this.leading = leading;
    this.options.log.info(
      { identity: this.options.identity, lease: `${this.options.namespace}/${this.options.name}` },
      leading ? 'became the leader' : 'stopped leading',
    );
    if (leading) this.options.onStartedLeading();
    else this.options.onStoppedLeading();
  }

  private async attempt(): Promise<void> {
    try {
      const renewed = await this.tryAcquireOrRenew();
      if (renewed) {
        this.lastRenew = Date.now();
        this.setLeading(true);
        return;
      }
      this.setLeading(false);
    } catch (error) {
      // 409: another candidate wrote the Lease first, an ordinary outcome of the race.
      if (httpStatusOf(error) === 409) this.options.log.debug('leader election: another candidate wrote the Lease first');
      else this.options.log.warn({ err: apiErrorMessage(error) }, 'leader election: the Lease could not be read or written');
      // A leader that cannot renew within the deadline must stop acting: another may hold the Lease by now.
      if (this.leading && Date.now() - this.lastRenew > this.renewDeadlineMs) this.setLeading(false);
    }
  }

  /** One round: true when this candidate holds the Lease after it. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    const { coordination } = this.options.clients;
    const { name, namespace, identity } = this.options;
    const now = new V1MicroTime();
    const durationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    let current: V1Lease;
    try {
      current = await coordination.readNamespacedLease({ name, namespace });
    } catch (error) {
      if (!isNotFound(error)) throw error;
      const created = await coordination.createNamespacedLease({
        namespace,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds: durationSeconds, acquireTime: now, renewTime: now, leaseTransitions: 0 },
        },
      });
      this.observed = { lease: created, at: Date.now() };
      return true;
    }
    if (this.observed?.lease.metadata?.resourceVersion !== current.metadata?.resourceVersion)
      this.observed = { lease: current, at: Date.now() };
    const holder = current.spec?.holderIdentity;
    const heldByMe = holder === identity;
    const expiresAt = this.observed!.at + (current.spec?.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder && !heldByMe && Date.now() < expiresAt) return false;
    const spec = current.spec ?? {};
    const lease: V1Lease = {
      ...current,
      spec: {
        ...spec,
        holderIdentity: identity,
        leaseDurationSeconds: durationSeconds,
        renewTime: now,
        ...(!heldByMe && { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
      },
    };
    // resourceVersion is kept from the read: a concurrent writer makes this replace fail with 409.
    const written = await coordination.replaceNamespacedLease({ name, namespace, body: lease });
    this.observed = { lease: written, at: Date.now() };
    return true;
  }
}
