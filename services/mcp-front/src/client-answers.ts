/**
 * A 2025-era client's answers to server-to-client requests (MCP 2025-11-25
 * basic/transports "Sending Messages to the Server": a POST whose body is a
 * JSON-RPC response answers 202). The answer may reach any front replica; it
 * is sent over the bus to the gateway replica holding the upstream's pending
 * request (`punk.client-request.<id>.answer`), named by the request id Punk
 * gave the client.
 */
import type { ServerResponse } from 'node:http';
import { isJSONRPCErrorResponse, isJSONRPCResultResponse } from '@modelcontextprotocol/server';
import { errorMessage, PunkError, sendClientAnswer, type Bus, type Logger } from '@punk/lib';
import { sendJsonRpcError } from './errors.js';
import { isMintedId } from './sessions.js';

/** Whether a POST body is a single JSON-RPC response (a client's answer), not a request or notification. */
export function isClientAnswer(body: unknown): body is { jsonrpc: '2.0'; id: string | number } {
  // A message with a method is a request or a notification: no schema needs to say so (the hot path asks this first).
  if (typeof body !== 'object' || body === null || 'method' in body) return false;
  return isJSONRPCResultResponse(body) || isJSONRPCErrorResponse(body);
}

/**
 * Routes one answer and writes the HTTP response: 202 once the holder took
 * it; 400 for an id Punk never issued; 404 (-32602 in the body) when no
 * gateway replica holds the request any more (answered, expired, or its
 * replica gone); 502 when the bus could not deliver it.
 */
export async function routeClientAnswer(
  deps: { bus: Bus; log: Logger },
  sessionId: string,
  answer: { id: string | number },
  res: ServerResponse,
): Promise<void> {
  const id = String(answer.id);
  if (!isMintedId(id)) {
    sendJsonRpcError(res, 400, -32600, `Bad Request: no request with id ${JSON.stringify(answer.id)} was sent to this session`);
    return;
  }
  try {
    await sendClientAnswer(deps.bus, id, { sessionId, response: answer as Record<string, unknown> as { jsonrpc: '2.0'; id: string } });
    res.writeHead(202).end();
  } catch (error) {
    if (error instanceof PunkError && (error.code === 'BusNoResponders' || error.code === 'SessionMismatch')) {
      sendJsonRpcError(
        res,
        404,
        -32602,
        `request ${id} is no longer waiting for an answer (answered, expired, or not sent to this session)`,
      );
      return;
    }
    deps.log.warn({ sessionId, requestId: id, err: errorMessage(error) }, 'could not deliver a client answer');
    sendJsonRpcError(res, 502, -32603, `the answer to request ${id} could not be delivered: ${errorMessage(error)}`);
  }
}
