/**
 * Server-to-client requests of a 2025-era upstream, bridged to a 2026-07-28
 * client as Multi Round-Trip Requests (MCP 2026-07-28 basic/patterns/mrtr).
 *
 * The 2026 client has no stream to receive a request on. When the upstream
 * sends `elicitation/create` (or `sampling/createMessage`, `roots/list`)
 * during a call, this gateway replica keeps the upstream call running, holds
 * the upstream's request as a pending request (the same bounds as 2025-era
 * ones: {@link PendingRequests}), and replies to the `punk.gateway.call`
 * request at once with an `input_required` result whose one `inputRequests`
 * key is the pending request id. The client's retry, on any front replica,
 * brings the answer on `punk.client-request.<id>.answer`, which only this
 * replica serves; the reply to that answer is the call's next outcome (its
 * final result, or the next `input_required` when the upstream asks again).
 * A request the client never answers expires under the pending bounds, or
 * sooner when the `requestState` minted for it expires (the channel's
 * `inputTtlMs`): the upstream gets a JSON-RPC error and the call ends on its own.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/client';
import {
  clientAnswerSchema,
  errorMessage,
  parseMessage,
  PunkError,
  subjects,
  type Bus,
  type CallChannel,
  type Logger,
  type Principal,
} from '@punk/lib';
import { CAPABILITY_OF, clientResult, type ClientLink, type PendingRequests } from './client-channel.js';

/**
 * The `input_required` result the gateway replies with (MCP 2026-07-28 basic/patterns/mrtr
 * "InputRequiredResult"), before the front adds its signed `requestState`: `inputRequests` holds one
 * entry, keyed by the pending request id (a UUID), whose value is the upstream's `{ method, params }`.
 */
export interface GatewayInputRequired {
  resultType: 'input_required';
  inputRequests: Record<string, { method: string; params?: Record<string, unknown> }>;
}

type Outcome = { ok: true; value: Record<string, unknown> } | { ok: false; error: unknown };

/** One-shot slot for the next outcome of a call. */
class Slot {
  readonly promise: Promise<Outcome>;
  settle!: (outcome: Outcome) => void;
  constructor() {
    this.promise = new Promise((resolve) => (this.settle = resolve));
  }
}

/** Time a retry may take to reach this replica after its `requestState` was verified at the front, in milliseconds. */
export const RETRY_TRANSIT_MS = 1_000;

/**
 * How long one round is held for the client's retry: the pending bound, or the lifetime of the `requestState`
 * the front mints for it (plus {@link RETRY_TRANSIT_MS}) when that is shorter: past it no retry can be accepted.
 */
export function roundBoundMs(pendingTimeoutMs: number, inputTtlMs: number | undefined): number {
  return inputTtlMs === undefined ? pendingTimeoutMs : Math.min(pendingTimeoutMs, inputTtlMs + RETRY_TRANSIT_MS);
}

/**
 * Runs one call for a 2026-07-28 client and resolves with its first outcome: the final result, or an
 * `input_required` result ({@link GatewayInputRequired}) as soon as the upstream asks the client
 * something. Later outcomes are the replies to the answers on `punk.client-request.<id>.answer`.
 *
 * @param run starts the call with the link the upstream's requests go through, and resolves with the
 *   call's result (the relay's reply); its rejection becomes the outcome's error.
 * @param caller the tenant and principal of the call; an answer from another caller is refused with
 *   `CallerMismatch` (the front checked its signed `requestState` already; this is a second lock).
 * @throws what `run` throws, when that is the first outcome.
 */
export async function runWithInputRequired(
  deps: { bus: Bus; log: Logger; pending: PendingRequests },
  channel: CallChannel,
  caller: Principal,
  run: (link: ClientLink) => Promise<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const { bus, log, pending } = deps;
  let next = new Slot();
  const emit = (outcome: Outcome) => {
    const slot = next;
    next = new Slot();
    slot.settle(outcome);
    return next;
  };
  const take = async (slot: Slot): Promise<Record<string, unknown>> => {
    const outcome = await slot.promise;
    if (outcome.ok) return outcome.value;
    throw outcome.error;
  };
  const first = next;

  const link: ClientLink = {
    sessionId: `call:${channel.callId}`,
    supports: (method) => {
      const capability = CAPABILITY_OF[method];
      return capability !== undefined && channel.clientCapabilities[capability] !== undefined;
    },
    // The front serving the call listens on its subject while the call's first reply is pending (progress).
    notify: (method, params) => {
      bus
        .publish(subjects.callOut(channel.front, channel.callId), { message: { jsonrpc: '2.0', method, params } })
        .catch((error: unknown) =>
          log.warn({ callId: channel.callId, method, err: errorMessage(error) }, 'could not forward a notification to the client'),
        );
    },
    unsupported: (method) => {
      const capability = CAPABILITY_OF[method] ?? method;
      emit({
        ok: false,
        error: new PunkError(
          'UpstreamError',
          `the call needs the client capability ${capability}, which the request's clientCapabilities do not declare`,
          {
            mcpCode: ProtocolErrorCode.MissingRequiredClientCapability,
            data: { requiredCapabilities: { [capability]: {} } },
          },
        ),
      });
    },
    request: async (method, params) => {
      pending.acquire(method);
      const id = randomUUID();
      const subject = subjects.clientAnswer(id);
      let settle!: (response: Record<string, unknown>) => void;
      const answered = new Promise<Record<string, unknown>>((resolve) => (settle = resolve));
      let after: Slot | undefined;
      const subscription = await bus.serve(subject, async (data) => {
        const answer = parseMessage(clientAnswerSchema, subject, data);
        if (answer.caller?.tenant !== caller.tenant || answer.caller.subject !== caller.subject) {
          throw new PunkError(
            'CallerMismatch',
            `request ${id} was sent to another caller than ${answer.caller ? `${answer.caller.tenant}/${answer.caller.subject}` : 'an unnamed one'}`,
          );
        }
        const reply = after!;
        settle(answer.response);
        return take(reply);
      });
      try {
        const inputRequired: GatewayInputRequired = {
          resultType: 'input_required',
          inputRequests: { [id]: { method, ...(params && { params }) } },
        };
        after = emit({ ok: true, value: inputRequired as unknown as Record<string, unknown> });
        const waitMs = roundBoundMs(pending.limits.timeoutMs, channel.inputTtlMs);
        return await clientResult(
          answered,
          method,
          waitMs,
          `the client did not retry with an answer to ${method} within ${String(waitMs)} ms`,
        );
      } catch (error) {
        if (error instanceof ProtocolError) throw error;
        throw new ProtocolError(ProtocolErrorCode.InternalError, `${method} could not be sent to the client: ${errorMessage(error)}`);
      } finally {
        pending.release();
        await subscription.unsubscribe().catch(() => undefined);
      }
    },
  };

  run(link).then(
    (value) => emit({ ok: true, value }),
    (error: unknown) => emit({ ok: false, error }),
  );
  return take(first);
}
