/**
 * The front's end of a call's channel (contracts: `punk.call.<callId>.out`):
 * while a 2025-era session's call is forwarded to the gateway, the front
 * replica serving its POST listens on the call's subject and writes what the
 * upstream sends for the client (progress notifications, server-to-client
 * requests) on the POST's SSE response, in the order they were published
 * (MCP 2025-11-25 basic/transports "Sending Messages to the Server": the
 * server may send requests and notifications before the response).
 */
import { callOutSchema, errorMessage, parseMessage, subjects, type Bus, type CallChannel, type Logger } from '@punk/lib';

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
  /** Stops listening once every message received so far is written. */
  close(): Promise<void>;
}

/**
 * Listens on the subject of call `callId` (a UUID naming the call: cancellation.ts) before the call is sent, so nothing the
 * gateway publishes is missed. A message that cannot be written is logged
 * and dropped (the call itself goes on).
 * @throws PunkError from the bus when the subscription cannot be made.
 */
export async function openCallChannel(
  bus: Bus,
  log: Logger,
  callId: string,
  clientCapabilities: Record<string, unknown>,
  sink: CallSink,
): Promise<OpenCallChannel> {
  const subject = subjects.callOut(callId);
  let chain = Promise.resolve();
  const subscription = await bus.subscribe(subject, (data) => {
    const { message } = parseMessage(callOutSchema, subject, data);
    chain = chain.then(() =>
      ('id' in message ? sink.request(message) : sink.notify(message)).catch((error: unknown) =>
        log.warn({ callId, method: message.method, err: errorMessage(error) }, 'could not write a message of a call to its client'),
      ),
    );
  });
  return {
    channel: { callId, clientCapabilities },
    close: async () => {
      await subscription.unsubscribe();
      await chain;
    },
  };
}
