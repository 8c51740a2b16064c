/**
 * Cancellation of forwarded calls (MCP 2025-11-25 basic/utilities/cancellation; MCP 2026-07-28: closing a
 * response stream cancels its request). The front tells the gateway replica relaying a call on
 * `punk.call.<callId>.cancel`, and that replica cancels the upstream request (gateway relay.ts).
 *
 * - 2026-07-28: the handler's abort signal fires when the client closes the response stream
 *   ({@link cancelOnAbort}).
 * - 2025 era: the client sends `notifications/cancelled` with the request id in a POST of its own, which
 *   any replica may receive. The call id of a session's call is derived from the session id and the JSON-RPC
 *   request id ({@link sessionCallId}), so that replica names the call's subject without asking anyone.
 *   Closing a 2025 response stream is not a cancellation (2025-11-25 basic/transports). The gateway keeps a
 *   cancellation that overtook its call, so it is never lost; a call so cancelled answers PunkError `Cancelled`
 *   ({@link isCancelledCall}), and its request gets no response: its stream ends without one ("the receiver
 *   SHOULD NOT send a response for the cancelled request"; fast-path.ts, and legacy.ts for the SDK's streams).
 */
import { createHash } from 'node:crypto';
import { errorMessage, subjects, type Bus, type Logger } from '@punk/lib';

/**
 * The call id of request `requestId` of 2025 session `sessionId`: a UUID (RFC 9562 version 5 layout) of the
 * SHA-1 of the session id and the request id with its JSON type, so `1` and `"1"` differ. Request ids are
 * unique among a session's requests in flight (MCP 2025-11-25 basic "Requests"), so call ids are too.
 */
export function sessionCallId(sessionId: string, requestId: string | number): string {
  const bytes = createHash('sha1')
    .update(`${sessionId}\u0000${typeof requestId}\u0000${String(requestId)}`, 'utf8')
    .digest()
    .subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Asks the gateway replica relaying call `callId` to cancel it upstream; a failure to publish is logged. */
export async function cancelCall(bus: Bus, log: Logger, callId: string, reason: string): Promise<void> {
  await bus
    .publish(subjects.callCancel(callId), { reason })
    .catch((error: unknown) => log.warn({ callId, err: errorMessage(error) }, 'could not cancel a call upstream'));
}

/**
 * Cancels call `callId` when `signal` aborts (a 2026-07-28 client closed its response stream). Returns the
 * function that stops watching, to call once the call's reply has come.
 */
export function cancelOnAbort(bus: Bus, log: Logger, signal: AbortSignal, callId: string): () => void {
  const onAbort = () => void cancelCall(bus, log, callId, 'the client closed the response stream');
  if (signal.aborted) {
    onAbort();
    return () => undefined;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/** The request id a client's `notifications/cancelled` names, or undefined when `body` is not one. */
export function cancelledRequestOf(body: unknown): string | number | undefined {
  if (typeof body !== 'object' || body === null || 'id' in body) return undefined;
  const { method, params } = body as { method?: unknown; params?: { requestId?: unknown } };
  if (method !== 'notifications/cancelled') return undefined;
  const requestId = params?.requestId;
  return typeof requestId === 'string' || typeof requestId === 'number' ? requestId : undefined;
}

/**
 * Whether a forwarded call's error, thrown (a `ProtocolError`) or as its JSON-RPC `error` object, says the client
 * cancelled it (the gateway's PunkError `Cancelled`, as errors.ts maps it: `data.code`).
 */
export function isCancelledCall(error: unknown): boolean {
  const data = typeof error === 'object' && error !== null ? (error as { data?: unknown }).data : undefined;
  return typeof data === 'object' && data !== null && (data as { code?: unknown }).code === 'Cancelled';
}
