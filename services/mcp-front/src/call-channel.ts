/**
 * The front's end of its calls' channels (contracts: `punk.front.<front>.call.<callId>.out`): while a call is
 * forwarded to the gateway, what the gateway replica relaying it publishes for the client (progress notifications,
 * server-to-client requests) is written on the call's response, in the order it was published (MCP 2025-11-25
 * basic/transports "Sending Messages to the Server": the server may send requests and notifications before the
 * response), and its acceptance (which replica took the call) is handed to gateway-calls.ts.
 *
 * One subscription per front replica, made at start, for every call it serves (not one per call): each message is
 * dispatched by the call id its subject names; a message of a call no longer open is dropped.
 */
import { randomUUID } from 'node:crypto';
import {
  callIdOfSubject,
  callOutSchema,
  errorMessage,
  receivedMessage,
  subjects,
  type Bus,
  type BusSubscription,
  type CallChannel,
  type Logger,
} from '@punk/lib';

/** Where the channel's messages go: the POST's response stream. */
export interface CallSink {
  /** Writes a notification related to the request being served. */
  notify(message: Record<string, unknown>): Promise<void>;
  /** Writes a server-to-client request related to the request being served. */
  request(message: Record<string, unknown>): Promise<void>;
}

/** An open channel: its contract part for the gateway request, and how to close it. */
export interface OpenCallChannel {
  channel: CallChannel;
  /** Stops dispatching to this call once every message received so far is written. */
  close(): Promise<void>;
}

/** One open call: where its messages go, and who waits for its acceptance. */
interface Listener {
  sink: CallSink | undefined;
  onAccepted: ((instance: string) => void) | undefined;
  chain: Promise<void>;
}

/** The call channels of one front replica. */
export class CallChannels {
  /** This replica's id in the channels it opens (the gateway publishes to `subjects.callOut(front, callId)`). */
  readonly front = randomUUID();
  private readonly open = new Map<string, Listener>();
  private subscription: BusSubscription | undefined;

  private constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
  ) {}

  /**
   * Subscribes to `punk.front.<front>.call.*.out`.
   * @throws PunkError from the bus when the subscription cannot be made.
   */
  static async start(bus: Bus, log: Logger): Promise<CallChannels> {
    const channels = new CallChannels(bus, log);
    channels.subscription = await bus.subscribe(subjects.frontCallsOut(channels.front), (data, info) =>
      channels.receive(data, info.subject, info.local),
    );
    return channels;
  }

  private receive(data: unknown, subject: string, local: boolean | undefined): void {
    const callId = callIdOfSubject(subject);
    const listener = callId === undefined ? undefined : this.open.get(callId);
    if (listener) this.deliver(listener, data, subject, local);
  }

  private deliver(listener: Listener, data: unknown, subject: string, local?: boolean): void {
    const out = receivedMessage(callOutSchema, subject, data, local);
    if ('accepted' in out) {
      listener.onAccepted?.(out.accepted);
      return;
    }
    const { sink } = listener;
    if (!sink) return;
    const { message } = out;
    listener.chain = listener.chain.then(() =>
      ('id' in message ? sink.request(message) : sink.notify(message)).catch((error: unknown) =>
        this.log.warn({ subject, method: message.method, err: errorMessage(error) }, 'could not write a message of a call to its client'),
      ),
    );
  }

  /**
   * Opens the channel of call `callId` (a UUID naming the call: cancellation.ts), before the call is sent, so nothing
   * the gateway publishes is missed: `sink` receives the call's messages (none are kept without one), `onAccepted`
   * the `instanceId` of the gateway replica that took it. A message that cannot be written is logged and dropped
   * (the call itself goes on).
   */
  openChannel(
    callId: string,
    clientCapabilities: Record<string, unknown>,
    sink?: CallSink,
    onAccepted?: (instance: string) => void,
  ): OpenCallChannel {
    const listener: Listener = { sink, onAccepted, chain: Promise.resolve() };
    this.open.set(callId, listener);
    return {
      channel: { callId, front: this.front, clientCapabilities },
      close: async () => {
        if (this.open.get(callId) === listener) this.open.delete(callId);
        await listener.chain;
      },
    };
  }

  /**
   * Listens to the channel of call `callId` opened by front replica `front` (maybe another one: a 2026-07-28 retry
   * that continues a call reaches any replica, while the gateway replica holding the call still publishes where the
   * first request came from). A subscription of its own, for this rare path only; `sink` as for {@link openChannel}.
   * @throws PunkError from the bus when the subscription cannot be made.
   */
  async followChannel(front: string, callId: string, sink: CallSink): Promise<{ close(): Promise<void> }> {
    const listener: Listener = { sink, onAccepted: undefined, chain: Promise.resolve() };
    const subscription = await this.bus.subscribe(subjects.callOut(front, callId), (data, info) =>
      this.deliver(listener, data, info.subject, info.local),
    );
    return {
      close: async () => {
        await subscription.unsubscribe();
        await listener.chain;
      },
    };
  }

  /** Stops listening (the front's close). */
  async stop(): Promise<void> {
    this.open.clear();
    await this.subscription?.unsubscribe();
  }
}
