/**
 * A {@link Bus} wrapper that knows which requests its services are still
 * answering, so a shutdown can stop taking work, then wait for the work in
 * flight before anything is torn down.
 */
import type {
  AppendAck,
  BatchHandler,
  Bus,
  BusConsumer,
  BusHeaders,
  BusSubscription,
  ConsumeOptions,
  KvBucketConfig,
  KvStore,
  MessageHandler,
  ReadStreamOptions,
  RequestHandler,
  RequestOptions,
  ServeOptions,
  StreamConfig,
  StreamMessage,
} from '../bus/bus.js';
import { busAppendDuration, busRequestDuration, busServedInFlight, observeBusCall } from '../metrics/bus.js';

/** Delegates everything to `inner`; counts the request handlers running through `serve`; times requests and appends (metrics/bus.ts). */
export class TrackedBus implements Bus {
  private readonly served = new Set<BusSubscription>();
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly inner: Bus) {}

  /** Request handlers currently running (requests received and not yet answered). */
  get pending(): number {
    return this.inFlight;
  }

  /** Unsubscribes every responder started through this bus: no new request reaches this process. */
  async stopServing(): Promise<void> {
    const all = [...this.served];
    this.served.clear();
    await Promise.allSettled(all.map((s) => s.unsubscribe()));
  }

  /**
   * Resolves `true` once no request handler is running, or `false` when
   * `timeoutMs` (milliseconds) passes first.
   */
  async idle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return true;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  async serve(subject: string, handler: RequestHandler, options?: ServeOptions): Promise<BusSubscription> {
    const counted: RequestHandler = async (data, info) => {
      this.inFlight++;
      busServedInFlight.inc();
      try {
        return await handler(data, info);
      } finally {
        busServedInFlight.dec();
        if (--this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake();
      }
    };
    const subscription = await this.inner.serve(subject, counted, options);
    const tracked: BusSubscription = {
      unsubscribe: async () => {
        this.served.delete(tracked);
        await subscription.unsubscribe();
      },
    };
    this.served.add(tracked);
    return tracked;
  }

  request(subject: string, data: unknown, options: RequestOptions): Promise<unknown> {
    return observeBusCall(busRequestDuration, subject, this.inner.request(subject, data, options));
  }
  publish(subject: string, data: unknown, headers?: BusHeaders): Promise<void> {
    return this.inner.publish(subject, data, headers);
  }
  subscribe(subject: string, handler: MessageHandler, options?: ServeOptions): Promise<BusSubscription> {
    return this.inner.subscribe(subject, handler, options);
  }
  ensureStream(config: StreamConfig): Promise<void> {
    return this.inner.ensureStream(config);
  }
  append(subject: string, data: unknown, options: { msgId: string; headers?: BusHeaders; timeoutMs?: number }): Promise<AppendAck> {
    return observeBusCall(busAppendDuration, subject, this.inner.append(subject, data, options));
  }
  consume(stream: string, durable: string, handler: BatchHandler, options?: ConsumeOptions): Promise<BusConsumer> {
    return this.inner.consume(stream, durable, handler, options);
  }
  readStream(stream: string, options: ReadStreamOptions): Promise<StreamMessage[]> {
    return this.inner.readStream(stream, options);
  }
  keyValue(config: KvBucketConfig): Promise<KvStore> {
    return this.inner.keyValue(config);
  }
  isConnected(): boolean {
    return this.inner.isConnected();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
