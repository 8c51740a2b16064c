/**
 * The exchange wire (upstream-exchange.ts) of a connection whose SDK transport carries the messages (Streamable HTTP,
 * HTTP+SSE): exchanged requests go out through the connected transport itself, so they carry what the transport adds
 * (the session id, the protocol-version and body-derived headers, auth), and the answers to them are taken off its
 * `onmessage` before the SDK client sees them, so no SDK request, result schema or output-schema check runs on the
 * call path. Every other message goes on to the SDK client as before.
 */
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { isExchangeId, type ExchangeWire, type RawAnswer } from './upstream-exchange.js';

/**
 * Wraps a transport the SDK client is already connected to (its `onmessage` set by `client.connect`).
 * @throws Error when the transport has no `onmessage` yet (it is not connected).
 */
export function transportWire(transport: Transport): ExchangeWire {
  const delivered = transport.onmessage;
  if (!delivered) throw new Error('the transport is not connected (it has no onmessage handler)');
  const answers = new Map<string, (answer: RawAnswer, text: string | undefined) => void>();
  transport.onmessage = (message, extra) => {
    if (!('method' in message) && 'id' in message && isExchangeId(message.id)) {
      const waiter = answers.get(message.id);
      if (waiter) {
        answers.delete(message.id);
        waiter(message as unknown as RawAnswer, undefined);
        return;
      }
    }
    delivered.call(transport, message, extra);
  };
  return {
    // Streamable HTTP opens one stream per request: on a 2026-07-28 connection aborting it is the cancellation.
    abortsRequests: (transport as { hasPerRequestStream?: boolean }).hasPerRequestStream === true,
    send: (message: JSONRPCMessage, signal?: AbortSignal) => transport.send(message, signal && { requestSignal: signal }),
    expect(id, onAnswer) {
      answers.set(id, onAnswer);
      return () => answers.delete(id);
    },
  };
}
