/**
 * Forwarded calls that survive a lost gateway replica (issue: a SIGKILLed gateway cost its callers the whole
 * deadline, blamed on the upstream). Every gateway replica acknowledges a call it takes (`{ accepted: instanceId }` on
 * the call's channel, before anything reaches the upstream) and publishes a heartbeat every `GATEWAY_HEARTBEAT_MS`;
 * this front watches the heartbeats of every replica (one subscription) and, while calls are in flight, checks them
 * every heartbeat interval.
 *
 * A replica silent for {@link PROBE_AFTER_MS} is probed with a request to its own subject
 * (`punk.gateway.instance.<id>.call`, a `catalog/list`): NATS answers "no responders" at once when the replica's
 * connection is gone (a dead process's socket closes), so the replica is *lost*; a replica that answers was only slow
 * and counts as alive again; one that neither answers nor is refused (a host cut off without its connection closing)
 * is lost after {@link SURE_AFTER_MS} of silence. Then:
 *
 * - a call accepted by a lost replica is answered at once with `GatewayLost`, naming the
 *   replica and saying the call may have run; a tool annotated `readOnlyHint` or `idempotentHint` (and
 *   `resources/read`, `prompts/get`, reads by MCP's definition) is sent again instead, to whichever replica the queue
 *   group picks;
 * - a call no replica accepted within {@link LOST_AFTER_MS}, sent while a replica now lost was still beating (up to
 *   {@link LOST_AFTER_MS} after its last beat), was most likely sent to that replica as it died (NATS delivered it to a
 *   connection about to close): it never reached an upstream, so it is sent again, up to {@link MAX_ATTEMPTS} times in all, then answered with `GatewayLost`.
 *
 * While this front's own bus connection is down, no replica is judged (no heartbeat can arrive); calls in flight
 * for longer than {@link LOST_AFTER_MS} of it are answered with `BusUnavailable`.
 *
 * A replica that stops on purpose says so (`stopping`) and drains its calls: it is not lost. When this front's own
 * event loop was blocked past a check (heartbeats unread), that check judges nothing. A call without acceptance on a
 * live but stalled replica for longer than {@link LOST_AFTER_MS} while another replica dies could run twice; that
 * takes a replica blocked for a second exactly then, and the gateway's acceptance is the first thing it does with a call.
 */
import { gatewayHeartbeatSchema, GATEWAY_HEARTBEAT_MS, parseMessage, PunkError, requestGateway, subjects } from '@punk/lib';
import type { Bus, BusSubscription, CallChannel, GatewayRequest, Logger } from '@punk/lib';
import type { CallChannels, CallSink } from './call-channel.js';

/** Silence after which a gateway replica is probed, in milliseconds (two heartbeats): only a refusal makes it lost. */
export const PROBE_AFTER_MS = 2 * GATEWAY_HEARTBEAT_MS;

/**
 * How long a call may go unaccepted before it counts as lost with a replica that died as it was sent, and how long
 * after its last heartbeat a replica may still have been sent calls, in milliseconds (four heartbeats).
 */
export const LOST_AFTER_MS = 4 * GATEWAY_HEARTBEAT_MS;

/** Silence after which a replica that neither answers its probe nor is refused is lost, in milliseconds. */
export const SURE_AFTER_MS = 5_000;

/** Deadline of a probe of a silent replica, in milliseconds. */
const PROBE_TIMEOUT_MS = 2_000;

/** Most times one call is sent to a gateway replica. */
export const MAX_ATTEMPTS = 3;

/** How long a silent replica is remembered (a replica gone longer than this no longer holds anything in flight). */
const FORGET_AFTER_MS = 10 * 60_000;

/** What {@link GatewayCalls.call} needs besides the request. */
export interface CallOptions {
  callId: string;
  /** Capabilities the client declared; the channel carries them. */
  clientCapabilities: Record<string, unknown>;
  /** The rest of the channel (era, input TTL). */
  channel?: Omit<CallChannel, 'callId' | 'front' | 'clientCapabilities'>;
  /** Where the call's messages go (progress, server-to-client requests); none are kept without one. */
  sink?: CallSink;
  /** Deadline of one attempt, in milliseconds. */
  waitMs: number;
  /** Whether running the call twice is harmless (a read, an idempotent tool): it is then sent again after its replica is lost. */
  retrySafe: boolean;
  /** Sends to this gateway replica alone (`subjects.gatewayInstanceCall`), never again elsewhere. */
  instanceId?: string;
  /** What the call is, for the error: `tools/call echo on server "ev"`. */
  what: string;
}

/** One call in flight. */
interface InFlight {
  sentAt: number;
  accepted: string | undefined;
  options: CallOptions;
  lost(error: PunkError | 'retry'): void;
}

/** The gateway calls of one front replica, and the liveness of the gateway replicas. */
export class GatewayCalls {
  private readonly lastBeat = new Map<string, number>();
  /** Silent replicas being probed, and those the probe found gone. */
  private readonly probes = new Map<string, 'probing' | 'gone'>();
  private readonly inFlight = new Set<InFlight>();
  private timer: NodeJS.Timeout | undefined;
  private lastCheck = 0;
  /** When this front's bus connection was found down (no heartbeats can arrive meanwhile). */
  private disconnectedAt: number | undefined;
  private subscription: BusSubscription | undefined;

  private constructor(
    private readonly bus: Bus,
    private readonly log: Logger,
    private readonly channels: CallChannels,
    private readonly tenant: string,
  ) {}

  /**
   * Subscribes to `punk.gateway.heartbeat`.
   * @throws PunkError from the bus when the subscription cannot be made.
   */
  static async start(bus: Bus, log: Logger, channels: CallChannels, tenant: string): Promise<GatewayCalls> {
    const calls = new GatewayCalls(bus, log, channels, tenant);
    calls.subscription = await bus.subscribe(subjects.gatewayHeartbeat, (data, info) => {
      const beat = parseMessage(gatewayHeartbeatSchema, info.subject, data);
      calls.probes.delete(beat.instance);
      if (beat.stopping) calls.lastBeat.delete(beat.instance);
      else calls.lastBeat.set(beat.instance, Date.now());
    });
    return calls;
  }

  /**
   * Sends `request` (its channel added) to the gateway and resolves with the reply; see the module comment for a lost
   * replica.
   * @throws PunkError `GatewayLost` naming the replica (see the module comment), or the gateway's and bus's errors.
   */
  async call(request: GatewayRequest, options: CallOptions): Promise<unknown> {
    const call: InFlight = { sentAt: 0, accepted: undefined, options, lost: () => undefined };
    const open = this.channels.openChannel(options.callId, options.clientCapabilities, options.sink, (instance) => {
      call.accepted = instance;
      // A replica not heard from yet is alive as of its acceptance.
      if (!this.lastBeat.has(instance)) this.lastBeat.set(instance, Date.now());
    });
    const message = { ...request, channel: { ...options.channel, ...open.channel } } as GatewayRequest;
    this.inFlight.add(call);
    this.tick();
    try {
      for (let attempt = 1; ; attempt++) {
        call.sentAt = Date.now();
        call.accepted = undefined;
        const lost = new Promise<PunkError | 'retry'>((resolve) => (call.lost = resolve));
        const reply = requestGateway(this.bus, message, options.waitMs, undefined, options.instanceId);
        const outcome = await Promise.race([reply.then((value) => ({ value })), lost.then((reason) => ({ reason }))]);
        if ('value' in outcome) return outcome.value;
        reply.catch(() => undefined); // the lost attempt's own timeout, later, is no news
        if (outcome.reason !== 'retry') throw outcome.reason;
        if (attempt >= MAX_ATTEMPTS)
          throw new PunkError(
            'GatewayLost',
            `no gateway replica took ${options.what} after ${MAX_ATTEMPTS} attempts while a replica was lost; it did not run`,
          );
        this.log.warn({ callId: options.callId, attempt }, 'a gateway replica was lost before it took a call; sending it again');
      }
    } finally {
      this.inFlight.delete(call);
      await open.close();
    }
  }

  /** Runs {@link check} every heartbeat interval while calls are in flight. */
  private tick(): void {
    if (this.timer) return;
    this.lastCheck = Date.now();
    this.timer = setInterval(() => {
      if (this.inFlight.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
        return;
      }
      this.check();
    }, GATEWAY_HEARTBEAT_MS);
    this.timer.unref();
  }

  private check(): void {
    const now = Date.now();
    const late = now - this.lastCheck > 2 * GATEWAY_HEARTBEAT_MS;
    this.lastCheck = now;
    // This loop was blocked: heartbeats may wait unread in the socket, so nothing is judged from them now.
    if (late) return;
    if (!this.bus.isConnected()) {
      this.disconnectedAt ??= now;
      if (now - this.disconnectedAt > LOST_AFTER_MS) {
        for (const call of this.inFlight)
          call.lost(
            new PunkError(
              'BusUnavailable',
              `mcp-front lost its connection to the message bus (NATS) while ${call.options.what} ran; the call may have reached the upstream server`,
            ),
          );
      }
      return;
    }
    if (this.disconnectedAt !== undefined) {
      // Back on the bus: every replica gets a fresh allowance of silence before it counts as lost.
      this.disconnectedAt = undefined;
      for (const instance of this.lastBeat.keys()) this.lastBeat.set(instance, now);
      return;
    }
    const lost = new Set<string>();
    for (const [instance, at] of this.lastBeat) {
      if (now - at > FORGET_AFTER_MS) {
        this.lastBeat.delete(instance);
        this.probes.delete(instance);
      } else if (now - at > PROBE_AFTER_MS) {
        if (this.probes.get(instance) === 'gone' || now - at > SURE_AFTER_MS) lost.add(instance);
        else if (!this.probes.has(instance)) this.probe(instance);
      }
    }
    if (lost.size === 0) return;
    for (const call of this.inFlight) {
      const { accepted, options } = call;
      if (accepted !== undefined) {
        if (!lost.has(accepted)) continue;
        const silence = now - (this.lastBeat.get(accepted) ?? now);
        if (options.retrySafe && options.instanceId === undefined) {
          this.log.warn(
            { callId: options.callId, gateway: accepted },
            'the gateway replica running a call was lost; sending the call again',
          );
          call.lost('retry');
        } else
          call.lost(
            new PunkError(
              'GatewayLost',
              `gateway replica ${accepted} was lost (no heartbeat for ${silence} ms) while it ran ${options.what}; the call may have reached the upstream server, so it was not sent again (the tool is not annotated readOnlyHint or idempotentHint)`,
              { gateway: accepted },
            ),
          );
      } else if (now - call.sentAt > LOST_AFTER_MS && options.instanceId === undefined && this.diedAround(lost, call.sentAt)) {
        // No replica took it while one fell silent: it went to that one as it died, and never reached an upstream.
        call.lost('retry');
      } else if (now - call.sentAt > LOST_AFTER_MS && lost.has(options.instanceId!)) {
        call.lost(
          new PunkError('GatewayLost', `gateway replica ${options.instanceId} was lost before it took ${options.what}; it did not run`, {
            gateway: options.instanceId,
          }),
        );
      }
    }
  }

  /**
   * Asks replica `instance` for nothing much on its own subject: "no responders" means its connection is gone (the
   * replica is lost); an answer, or an error of its own, means it is alive (only its heartbeats were late); a timeout
   * or this front's own bus failure tells nothing.
   */
  private probe(instance: string): void {
    this.probes.set(instance, 'probing');
    const alive = () => {
      this.probes.delete(instance);
      if (this.lastBeat.has(instance)) this.lastBeat.set(instance, Date.now());
    };
    requestGateway(this.bus, { method: 'catalog/list', tenant: this.tenant }, PROBE_TIMEOUT_MS, undefined, instance).then(
      alive,
      (error: unknown) => {
        if (this.probes.get(instance) !== 'probing') return;
        const code = error instanceof PunkError ? error.code : undefined;
        if (code === 'BusNoResponders') {
          this.log.warn({ gateway: instance }, 'a gateway replica is gone: its heartbeats stopped and nothing serves its subject');
          this.probes.set(instance, 'gone');
        } else if (code === 'BusTimeout' || code === 'BusUnavailable' || code === 'BusClosed') this.probes.delete(instance);
        // Any other error is the replica's own answer: it is alive.
        else alive();
      },
    );
  }

  /** Whether a lost replica was still beating shortly before `sentAt`, so a call sent then may have gone to it. */
  private diedAround(lost: Set<string>, sentAt: number): boolean {
    for (const instance of lost) if ((this.lastBeat.get(instance) ?? 0) > sentAt - LOST_AFTER_MS) return true;
    return false;
  }

  /** Stops watching heartbeats (the front's close). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.subscription?.unsubscribe();
  }
}
