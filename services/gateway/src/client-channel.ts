/**
 * The way back from an upstream server to the client of a call it is
 * serving (MCP 2025-11-25 basic/utilities/progress, client/elicitation,
 * client/sampling): messages for the client go on `punk.call.<callId>.out`,
 * which the front replica serving the call listens to; a server-to-client
 * request waits, held by this gateway replica, for the client's answer on
 * `punk.client-request.<id>.answer`, which only this replica serves, so the
 * answer finds it from whichever front replica received it.
 *
 * Pending requests are bounded in number and in time: past either bound the
 * upstream gets a JSON-RPC error instead of a wait without end.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import {
  callCancelSchema,
  callIdOfSubject,
  clientAnswerSchema,
  errorMessage,
  parseMessage,
  PunkError,
  subjects,
  type Bus,
  type BusSubscription,
  type CallChannel,
  type Logger,
  type RequestHandler,
} from '@punk/lib';

/** Bounds of the pending server-to-client requests of one gateway replica. */
export interface PendingLimits {
  /** Most requests waiting for a client answer at once; more are refused. */
  maxPending: number;
  /** How long one request waits for the client's answer, in milliseconds. */
  timeoutMs: number;
}

/** Default bounds: 1,000 pending requests, 5 minutes each (a person answers elicitations). */
export const DEFAULT_PENDING_LIMITS: PendingLimits = { maxPending: 1_000, timeoutMs: 5 * 60_000 };

/** JSON-RPC methods an upstream may send to the client during a call, with the client capability each needs. */
export const CAPABILITY_OF: Record<string, string> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/** The client of one call, as its upstream relay sees it. */
export interface ClientLink {
  /** The 2025-era session the call belongs to. */
  readonly sessionId: string;
  /** Whether the client declared the capability `method` needs (false for unknown methods). */
  supports(method: string): boolean;
  /** Sends a notification to the client; failures are logged, never thrown. */
  notify(method: string, params: Record<string, unknown>): void;
  /**
   * Sends a request to the client and resolves with its result.
   * @throws ProtocolError the client's JSON-RPC error, or -32603 when the bound on pending requests is reached,
   *   the client does not answer within the time bound, or the message cannot be sent.
   */
  request(method: string, params: Record<string, unknown> | undefined): Promise<Record<string, unknown>>;
  /**
   * Told that the upstream asked this client for `method`, which it did not declare: a 2026-07-28 call then
   * ends with -32021 MissingRequiredClientCapability (MCP 2026-07-28). Absent for 2025-era sessions.
   */
  unsupported?(method: string): void;
}

/** Counts this replica's pending requests against {@link PendingLimits}. */
export class PendingRequests {
  private count = 0;

  constructor(readonly limits: PendingLimits = DEFAULT_PENDING_LIMITS) {}

  /**
   * Takes a slot for a request `method` to a client.
   * @throws ProtocolError -32603 naming the bound when every slot is taken (the request is not sent).
   */
  acquire(method: string): void {
    if (this.count >= this.limits.maxPending) {
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `Punk holds ${this.limits.maxPending} requests waiting for clients already; ${method} was not sent to the client`,
      );
    }
    this.count++;
  }

  /** Gives a slot back. */
  release(): void {
    this.count--;
  }

  /** How many requests are waiting now. */
  get size(): number {
    return this.count;
  }
}

/** The bus side of a {@link ClientLink}: one per relayed call that has a channel. */
export function busClientLink(
  deps: { bus: Bus; log: Logger; pending: PendingRequests },
  sessionId: string,
  channel: CallChannel,
): ClientLink {
  const { bus, log } = deps;
  const out = subjects.callOut(channel.front, channel.callId);
  const publish = async (message: Record<string, unknown>) => bus.publish(out, { message });
  return {
    sessionId,
    supports: (method) => {
      const capability = CAPABILITY_OF[method];
      return capability !== undefined && channel.clientCapabilities[capability] !== undefined;
    },
    notify: (method, params) => {
      publish({ jsonrpc: '2.0', method, params }).catch((error: unknown) =>
        log.warn({ sessionId, method, err: errorMessage(error) }, 'could not forward a notification to the client'),
      );
    },
    request: (method, params) => requestClient(deps, sessionId, method, params, publish),
  };
}

/**
 * Sends one server-to-client request to a 2025-era client with `send` and waits, on
 * `punk.client-request.<id>.answer` (served by this replica meanwhile), for the answer from session
 * `sessionId`; `id` is a fresh UUID. Bounded by `pending`.
 * @throws ProtocolError the client's JSON-RPC error, or -32603 when the bound on pending requests is reached,
 *   the client does not answer within the time bound, or `send` fails.
 */
export async function requestClient(
  deps: { bus: Bus; pending: PendingRequests },
  sessionId: string,
  method: string,
  params: Record<string, unknown> | undefined,
  send: (message: Record<string, unknown>) => Promise<void>,
): Promise<Record<string, unknown>> {
  const { bus, pending } = deps;
  pending.acquire(method);
  const id = randomUUID();
  const subject = subjects.clientAnswer(id);
  let settle!: (answer: Record<string, unknown>) => void;
  const answered = new Promise<Record<string, unknown>>((resolve) => (settle = resolve));
  let subscription: BusSubscription | undefined;
  try {
    subscription = await bus.serve(subject, async (data) => {
      const answer = parseMessage(clientAnswerSchema, subject, data);
      if (answer.sessionId !== sessionId)
        throw new PunkError('SessionMismatch', `request ${id} was sent to another session than ${answer.sessionId}`);
      settle(answer.response);
      return {};
    });
    await send({ jsonrpc: '2.0', id, method, ...(params && { params }) });
    return await clientResult(
      answered,
      method,
      pending.limits.timeoutMs,
      `the client did not answer ${method} within ${pending.limits.timeoutMs} ms`,
    );
  } catch (error) {
    if (error instanceof ProtocolError) throw error;
    throw new ProtocolError(ProtocolErrorCode.InternalError, `${method} could not be sent to the client: ${errorMessage(error)}`);
  } finally {
    pending.release();
    await subscription?.unsubscribe().catch(() => undefined);
  }
}

/**
 * Waits at most `timeoutMs` for the client's JSON-RPC response to `method` and
 * returns its `result`.
 * @throws ProtocolError with the client's own error code and message, or
 *   InternalError (`lateMessage` past the deadline, or a response without a result).
 */
export async function clientResult(
  answered: Promise<Record<string, unknown>>,
  method: string,
  timeoutMs: number,
  lateMessage: string,
): Promise<Record<string, unknown>> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProtocolError(ProtocolErrorCode.InternalError, lateMessage)), timeoutMs);
  });
  try {
    const response = await Promise.race([answered, expired]);
    const error = response['error'] as { code?: unknown; message?: unknown; data?: unknown } | undefined;
    if (error)
      throw new ProtocolError(
        typeof error.code === 'number' ? error.code : ProtocolErrorCode.InternalError,
        typeof error.message === 'string' ? error.message : 'the client answered with an error',
        error.data,
      );
    const result = response['result'];
    if (typeof result !== 'object' || result === null)
      throw new ProtocolError(ProtocolErrorCode.InternalError, `the client answered ${method} without a result`);
    return result as Record<string, unknown>;
  } finally {
    clearTimeout(timer);
  }
}

/** How long a cancellation of a call not (yet) relayed here is kept for it, in milliseconds. */
const EARLY_CANCEL_MS = 60_000;

/** Most cancellations of calls not relayed here kept at once (the oldest is dropped past it). */
const MAX_EARLY_CANCELS = 10_000;

/**
 * The cancellations of the calls this gateway replica relays: one subscription to `punk.call.*.cancel` for the
 * whole replica (not one per call), dispatched by call id to the calls being watched. A cancellation may come before
 * its call (a 2025 client's `notifications/cancelled` travels in a POST of its own, which may overtake the call's):
 * one of a call not watched here is kept {@link EARLY_CANCEL_MS} (at most {@link MAX_EARLY_CANCELS}), and a call
 * watched meanwhile starts cancelled, so it never reaches its upstream.
 */
export class CallCancellations {
  private constructor(
    private readonly subscription: BusSubscription,
    private readonly watched: Map<string, AbortController>,
    private readonly early: Map<string, { reason: string; until: number }>,
  ) {}

  /**
   * Subscribes to `punk.call.*.cancel`.
   * @throws PunkError from the bus when the subscription cannot be made.
   */
  static async start(bus: Bus, log: Logger): Promise<CallCancellations> {
    const watched = new Map<string, AbortController>();
    const early = new Map<string, { reason: string; until: number }>();
    const subscription = await bus.subscribe(subjects.callsCancel, (data, info) => {
      const callId = callIdOfSubject(info.subject);
      if (callId === undefined) return;
      const { reason = 'cancelled by the client' } = parseMessage(callCancelSchema, info.subject, data);
      const controller = watched.get(callId);
      if (!controller) {
        early.delete(callId);
        early.set(callId, { reason, until: Date.now() + EARLY_CANCEL_MS });
        // Oldest first: drop the expired ones, and the oldest past the bound.
        for (const [id, kept] of early) {
          if (kept.until > Date.now() && early.size <= MAX_EARLY_CANCELS) break;
          early.delete(id);
        }
        return;
      }
      log.debug({ callId, reason }, 'the client cancelled a call');
      controller.abort(reason);
    });
    return new CallCancellations(subscription, watched, early);
  }

  /**
   * Watches call `callId` (`punk.call.<callId>.cancel`, published by the front serving it): `signal` aborts when its
   * cancellation comes, at once when it came already, and when `also` (the caller's own signal) aborts. Call `close`
   * once the call has ended.
   */
  watch(callId: string, also?: AbortSignal): { signal: AbortSignal; close(): void } {
    const controller = new AbortController();
    const kept = this.early.get(callId);
    this.early.delete(callId);
    if (kept && kept.until > Date.now()) controller.abort(kept.reason);
    this.watched.set(callId, controller);
    return {
      signal: also ? AbortSignal.any([also, controller.signal]) : controller.signal,
      close: () => {
        if (this.watched.get(callId) === controller) this.watched.delete(callId);
      },
    };
  }

  /** Stops listening (the gateway's stop). */
  async stop(): Promise<void> {
    this.watched.clear();
    this.early.clear();
    await this.subscription.unsubscribe();
  }
}

/** Methods whose acceptance a front waits for (the calls it forwards for its clients). */
const ACCEPTED_METHODS = new Set(['tools/call', 'resources/read', 'prompts/get']);

/** A call id fit for a subject token (the request is validated in full later, by the relay). */
const CALL_ID = /^[0-9a-f-]{36}$/i;

/**
 * Wraps the handler of `punk.gateway.call` (or `punk.gateway.instance.<id>.call`): a call with a channel is first
 * acknowledged to the front serving it, as taken by this replica (`punk.front.<front>.call.<callId>.out`,
 * `{ accepted: instanceId }`), before anything of the call is done. The publish is queued on the bus connection
 * ahead of everything the call sends later (governance, ledger) and so of any upstream request: a call the front
 * never saw accepted never reached an upstream. A failed publish is logged.
 */
export function acceptingCalls(bus: Bus, log: Logger, instanceId: string, handler: RequestHandler): RequestHandler {
  return (data, info) => {
    const { method, channel } = data as { method?: unknown; channel?: { callId?: unknown; front?: unknown } };
    if (
      typeof method === 'string' &&
      ACCEPTED_METHODS.has(method) &&
      typeof channel?.front === 'string' &&
      typeof channel.callId === 'string' &&
      CALL_ID.test(channel.callId)
    ) {
      bus
        .publish(subjects.callOut(channel.front, channel.callId), { accepted: instanceId })
        .catch((error: unknown) =>
          log.warn({ callId: channel.callId, err: errorMessage(error) }, 'could not tell the front that a call was taken'),
        );
    }
    return handler(data, info);
  };
}
