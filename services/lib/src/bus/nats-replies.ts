/**
 * Request/reply over one NATS connection through one inbox subscription of the bus's own (`<inbox>.<token>`), the
 * way nats.js's own request mux works, without what that mux costs on every request of the call path: nats.js builds
 * an Error (a stack capture) when a request it has answered is cleaned up (`RequestOne.cancel`), whether or not
 * anything failed, and races two promises per request. Here a request is a publish with a reply subject, one map
 * entry and one timer. Used for bus requests (`punk.gateway.call`, …) and JetStream appends (whose acknowledgement
 * is the reply of the stream's server).
 */
import { createInbox, type Msg, type MsgHdrs, type NatsConnection, type Subscription } from '@nats-io/transport-node';

/** Why a request got no reply: nobody listens on the subject (NATS status 503), the deadline passed, or the bus closed. */
export type NoReply = 'no-responders' | 'timeout' | 'closed';

/** A request that ended without a reply; `reason` says why. */
export class NoReplyError extends Error {
  constructor(
    readonly reason: NoReply,
    subject: string,
  ) {
    super(`request on ${subject}: ${reason}`);
    this.name = 'NoReplyError';
  }
}

interface Waiter {
  subject: string;
  resolve(msg: Msg): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

/** The requests of one NATS connection, answered on one inbox subscription. */
export class NatsReplies {
  private readonly waiting = new Map<string, Waiter>();
  private readonly prefix: string;
  private sub: Subscription | undefined;
  private next = 0;

  constructor(private readonly nc: NatsConnection) {
    this.prefix = `${createInbox()}.`;
  }

  /**
   * Publishes `payload` on `subject` with a reply subject of this inbox and resolves with the first reply.
   * @throws NoReplyError `no-responders` when NATS says nobody listens, `timeout` past `timeoutMs`, `closed` when the
   *   bus closes first; and nats.js's own errors when the publish itself is refused (a closed connection, a bad subject).
   */
  request(subject: string, payload: Uint8Array, timeoutMs: number, headers?: MsgHdrs): Promise<Msg> {
    this.sub ??= this.nc.subscribe(`${this.prefix}*`, {
      callback: (error, msg) => {
        if (error === null) this.receive(msg);
        else this.fail(error);
      },
    });
    const token = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(token);
        reject(new NoReplyError('timeout', subject));
      }, timeoutMs);
      this.waiting.set(token, { subject, resolve, reject, timer });
      try {
        this.nc.publish(subject, payload, { reply: this.prefix + token, ...(headers && { headers }) });
      } catch (error) {
        clearTimeout(timer);
        this.waiting.delete(token);
        reject(error as Error);
      }
    });
  }

  /** Ends every request waiting with `closed` (the bus's close). */
  close(): void {
    this.rejectAll((waiter) => new NoReplyError('closed', waiter.subject));
  }

  /** The inbox subscription failed (a permission violation): its requests can get no reply, so they fail now. */
  private fail(error: Error): void {
    this.sub = undefined;
    this.rejectAll(() => error);
  }

  private rejectAll(errorOf: (waiter: Waiter) => Error): void {
    for (const [token, waiter] of this.waiting) {
      clearTimeout(waiter.timer);
      this.waiting.delete(token);
      waiter.reject(errorOf(waiter));
    }
  }

  private receive(msg: Msg): void {
    const token = msg.subject.slice(this.prefix.length);
    const waiter = this.waiting.get(token);
    if (!waiter) return;
    this.waiting.delete(token);
    clearTimeout(waiter.timer);
    // NATS answers a request nobody subscribes to with an empty status message 503 (no responders).
    if (msg.data.length === 0 && msg.headers?.code === 503) waiter.reject(new NoReplyError('no-responders', waiter.subject));
    else waiter.resolve(msg);
  }
}
