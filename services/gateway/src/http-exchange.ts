/**
 * The forwarded requests of the call path on a Streamable HTTP connection, without the SDK client's request: each
 * goes out as one POST on the connection's pool (pool-fetch.ts, head and body in one write) with the headers the SDK
 * transport would send (the connection's own, the call's exchanged bearer, `Mcp-Session-Id`, `MCP-Protocol-Version`
 * and, on a 2026-07-28 connection, `Mcp-Method` / `Mcp-Name`, MCP 2026-07-28 basic/transports/streamable-http
 * "Standard Request Headers"), and its answer is read off the pool's response (a JSON body or an SSE stream, parsed
 * once) by {@link wireExchange}, which checks only its envelope. The other messages of the answer's stream (the
 * server's progress and log notifications, its elicitation and sampling requests during the call, MCP 2025-11-25
 * basic/transports "Sending Messages to the Server") go to the SDK client as its transport would hand them over, so
 * they are relayed as before and the client's answers go back on the SDK transport. A stream that ends after an
 * event id without the answer is resumed with a GET and `Last-Event-ID` (MCP 2025-11-25 "Resumability").
 *
 * Cancellation: a 2025-era request is cancelled with `notifications/cancelled`; a 2026-07-28 one by closing its
 * response stream (MCP 2026-07-28 basic/utilities/cancellation), as the SDK does. HTTP 401 and 404 (to a session) are
 * counted for the upstream's renewal and reconnect as the SDK transport's requests are (http-transport.ts).
 *
 * Cases left to the SDK client's request ({@link sdkExchange}), each for one call only: a 2026-07-28 `tools/call`
 * whose tool marks arguments with `x-mcp-header` (the `Mcp-Param-*` headers: the SDK's builder and scanner are not
 * exported, and Punk keeps their rules in one place, the SDK's); an `Mcp-Name` value that would need Base64; and a
 * redirect answer (the SDK transport follows the ones that stay within the origin).
 */
import type { Readable } from 'node:stream';
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import {
  SdkError,
  SdkErrorCode,
  SdkHttpError,
  parseJSONRPCMessage,
  type Client,
  type JSONRPCMessage,
  type StreamableHTTPClientTransport,
  type Tool,
} from '@modelcontextprotocol/client';
import { callBearer } from './call-bearer.js';
import type { HttpAnswers } from './http-transport.js';
import type { PoolRequest } from './pool-fetch.js';
import {
  sdkExchange,
  wireExchange,
  type ExchangedMethod,
  type ExchangeOptions,
  type RawAnswer,
  type UpstreamExchange,
} from './upstream-exchange.js';

/** What {@link httpExchange} sends with. */
export interface HttpExchangeOptions {
  url: URL;
  client: Client;
  /** The SDK client's transport: its session id, and its `onmessage` for the messages that are not the answer. */
  transport: StreamableHTTPClientTransport;
  /** The connection's own headers (the resolved `spec.headers`). */
  headers: Record<string, string>;
  /** Sends one request on the connection's pool. */
  request: PoolRequest;
  /** The connection's count of HTTP 401 and session-ending 404 answers. */
  seen: HttpAnswers;
  /** The capabilities and identity the connection declared (the 2026-07-28 envelope names them on every request). */
  capabilities: Record<string, unknown>;
  clientInfo: object;
}

/** A redirect answer: the request is sent again through the SDK client (see the module comment). */
class Redirected extends Error {}

/** How long a stream that ended without the answer waits before it is resumed when the server said no `retry`, in milliseconds (the SDK's default). */
const DEFAULT_RETRY_MS = 1_000;
/** Resumptions of one answer stream before the request fails. */
const MAX_RESUMPTIONS = 3;

/** The exchange of a Streamable HTTP connection (see the module comment). */
export function httpExchange(options: HttpExchangeOptions): UpstreamExchange {
  const { client, transport, seen } = options;
  const modern = () => client.getProtocolEra() === 'modern';
  /** The answer callbacks of requests in flight, and the abort of each one's response stream. */
  const waiting = new Map<string, { onAnswer: (answer: RawAnswer, text: string | undefined) => void; abort: AbortController }>();

  const headersFor = (message: Record<string, unknown>): Record<string, string> => {
    const headers: Record<string, string> = {
      ...options.headers,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    };
    const bearer = callBearer();
    if (bearer !== undefined) headers['authorization'] = `Bearer ${bearer}`;
    if (transport.sessionId !== undefined) headers['mcp-session-id'] = transport.sessionId;
    const version = client.getNegotiatedProtocolVersion();
    if (version !== undefined) headers['mcp-protocol-version'] = version;
    const method = message['method'];
    if (modern() && typeof method === 'string' && message['id'] !== undefined) {
      headers['mcp-method'] = method;
      const name = nameOf(method, message['params']);
      if (name !== undefined) headers['mcp-name'] = name;
    }
    return headers;
  };

  /** Hands one message of an answer stream on: the answer to a request in flight, or the SDK client's. */
  const dispatch = (message: Record<string, unknown>, text: string): boolean => {
    const id = message['id'];
    if (message['method'] === undefined && typeof id === 'string') {
      const entry = waiting.get(id);
      if (entry) {
        waiting.delete(id);
        entry.onAnswer(message, text);
        return true;
      }
      return false;
    }
    let parsed: JSONRPCMessage;
    try {
      parsed = parseJSONRPCMessage(message);
    } catch (error) {
      transport.onerror?.(error as Error);
      return false;
    }
    transport.onmessage?.(parsed);
    return false;
  };

  const readStream = async (body: Readable, id: string): Promise<void> => {
    let lastEventId: string | undefined;
    let retryMs = DEFAULT_RETRY_MS;
    for (let resumptions = 0; ; resumptions++) {
      const ended = await readEvents(body, {
        onEvent: (event) => {
          if (event.id !== undefined) lastEventId = event.id;
          if (event.data === '' || (event.event !== undefined && event.event !== 'message')) return false;
          return dispatch(JSON.parse(event.data) as Record<string, unknown>, event.data);
        },
        onRetry: (ms) => (retryMs = ms),
      });
      if (ended === 'answered' || !waiting.has(id)) return;
      if (lastEventId === undefined || resumptions === MAX_RESUMPTIONS)
        throw new SdkError(SdkErrorCode.ConnectionClosed, 'the server closed the response stream without answering the request');
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      const entry = waiting.get(id);
      if (!entry) return;
      const headers = headersFor({});
      delete headers['content-type'];
      headers['accept'] = 'text/event-stream';
      headers['last-event-id'] = lastEventId;
      const answer = await options.request(options.url, { method: 'GET', headers, signal: entry.abort.signal });
      if (answer.statusCode !== 200) {
        const text = await answer.body.text();
        throw new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Failed to reopen SSE stream: ${text}`, {
          status: answer.statusCode,
          statusText: '',
          text,
        });
      }
      body = answer.body;
    }
  };

  const send = async (message: Record<string, unknown>): Promise<void> => {
    const id = message['id'];
    const entry = typeof id === 'string' ? waiting.get(id) : undefined;
    const headers = headersFor(message);
    const answer = await options.request(options.url, {
      method: 'POST',
      headers,
      body: JSON.stringify(message),
      ...(entry && { signal: entry.abort.signal }),
    });
    const status = answer.statusCode;
    if (status === 401) seen.unauthorized++;
    if (status === 404 && headers['mcp-session-id'] !== undefined) seen.sessionLost++;
    if (status >= 300 && status < 400) {
      answer.body.resume();
      throw new Redirected(`HTTP ${status}`);
    }
    if (status < 200 || status >= 300) {
      const text = await answer.body.text();
      // A 2026-07-28 server answers a refused request with its JSON-RPC error in a 400 (e.g. -32020 HeaderMismatch).
      if (status === 400 && typeof id === 'string' && modern()) {
        const error = parsedObject(text);
        if (error?.['id'] === id && error['error'] !== undefined && dispatch(error, text)) return;
      }
      throw new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${text}`, { status, statusText: '', text });
    }
    if (typeof id !== 'string' || status === 202) {
      answer.body.resume();
      if (typeof id === 'string')
        throw new SdkError(SdkErrorCode.ClientHttpUnexpectedContent, 'the server accepted the request without answering it (HTTP 202)');
      return;
    }
    const contentType = String(answer.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (contentType === 'text/event-stream') return readStream(answer.body, id);
    if (contentType === 'application/json') {
      const text = await answer.body.text();
      const parsed = JSON.parse(text) as unknown;
      for (const one of Array.isArray(parsed) ? parsed : [parsed])
        dispatch(one as Record<string, unknown>, Array.isArray(parsed) ? JSON.stringify(one) : text);
      return;
    }
    answer.body.resume();
    throw new SdkError(SdkErrorCode.ClientHttpUnexpectedContent, `Unexpected content type: ${contentType}`, { contentType });
  };

  const raw = wireExchange(
    {
      async send(message) {
        const sent = message as unknown as Record<string, unknown>;
        // 2026-07-28: closing the request's stream is the cancellation (done by expect's stop); there is no notification.
        if (sent['method'] === 'notifications/cancelled' && modern()) return;
        await send(sent);
      },
      expect(id, onAnswer) {
        const abort = new AbortController();
        waiting.set(id, { onAnswer, abort });
        return () => {
          // Not answered: the request was given up (timeout, the caller's cancellation).
          if (waiting.delete(id) && modern()) abort.abort();
        };
      },
    },
    client,
    options.capabilities,
    options.clientInfo,
  );

  return {
    async request(method, params, exchangeOptions) {
      const sdk = () => sdkExchange(client, exchangeOptions.toolDefinition ?? unknownTool).request(method, params, exchangeOptions);
      if (!fitsRaw(method, params, exchangeOptions, modern())) return sdk();
      try {
        return await raw.request(method, params, exchangeOptions);
      } catch (error) {
        if (error instanceof Redirected) return sdk();
        if (error instanceof SyntaxError)
          throw new SdkError(SdkErrorCode.InvalidResult, `the server's answer is not JSON: ${error.message}`);
        throw error;
      }
    },
  };
}

/** A tool Punk has no listing of (the SDK then scans nothing). */
function unknownTool(name: string): Tool {
  return { name, inputSchema: { type: 'object' } } as Tool;
}

/** Whether a request can go out raw (see the module comment for the cases that cannot). */
function fitsRaw(method: ExchangedMethod, params: Record<string, unknown>, options: ExchangeOptions, modern: boolean): boolean {
  if (!modern) return true;
  const name = method === 'resources/read' ? params['uri'] : params['name'];
  if (typeof name === 'string' && !plainHeaderValue(name)) return false;
  if (method !== 'tools/call' || !options.toolDefinition) return true;
  return !marksHeaders(options.toolDefinition(String(params['name'])).inputSchema);
}

/** Input schemas already looked at, to whether one of their properties carries `x-mcp-header`. */
const marked = new WeakMap<object, boolean>();

/** Whether an `inputSchema` marks any property with `x-mcp-header` (MCP 2026-07-28 "Custom Headers from Tool Parameters"). */
function marksHeaders(schema: unknown): boolean {
  if (typeof schema !== 'object' || schema === null) return false;
  let known = marked.get(schema);
  if (known === undefined) {
    known = JSON.stringify(schema).includes('"x-mcp-header"');
    marked.set(schema, known);
  }
  return known;
}

/** Whether a value goes in a header as it is (RFC 9110 §5.5; else MCP 2026-07-28 "Value Encoding" wants Base64). */
function plainHeaderValue(value: string): boolean {
  return value !== '' && value === value.trim() && !value.startsWith('=?base64?') && /^[\t\x20-\x7e]*$/.test(value);
}

/** The `Mcp-Name` of a request: `params.name`, or `params.uri` of `resources/read`. */
function nameOf(method: string, params: unknown): string | undefined {
  const field = method === 'resources/read' ? 'uri' : method === 'tools/call' || method === 'prompts/get' ? 'name' : undefined;
  const value = field && typeof params === 'object' && params !== null ? (params as Record<string, unknown>)[field] : undefined;
  return typeof value === 'string' ? value : undefined;
}

function parsedObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Reads the server-sent events of `body` (eventsource-parser, as the SDK's transport reads them), handing each event
 * to `onEvent` until it returns true (`answered`; the rest of the stream is dropped) or the stream ends (`ended`),
 * and each `retry` field to `onRetry`.
 */
async function readEvents(
  body: Readable,
  handlers: { onEvent: (event: EventSourceMessage) => boolean; onRetry: (retryMs: number) => void },
): Promise<'answered' | 'ended'> {
  // undici's body gives Buffers whatever setEncoding says; a character split across two chunks is decoded whole.
  const decoder = new TextDecoder();
  let answered = false;
  const parser = createParser({
    onEvent: (event) => {
      if (!answered) answered = handlers.onEvent(event);
    },
    onRetry: handlers.onRetry,
  });
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (answered) {
      body.destroy();
      return 'answered';
    }
  }
  return 'ended';
}
