/**
 * The forwarded requests of the call path (`tools/call`, `resources/read`, `prompts/get`) as one JSON-RPC exchange
 * on the upstream's own wire, beside the SDK client that owns the connection (handshake, listings, notifications,
 * server-to-client requests): the request goes out as the SDK client would send it (its `_meta` envelope on a
 * 2026-07-28 connection), with a string id of its own (`punk-<n>`, never one of the SDK client's numeric ids), and
 * its answer is matched by that id before the SDK client sees it. Only the answer's envelope is checked (a
 * JSON-RPC result object or error, a 2026-07-28 `resultType`); the result itself goes on as the server sent it,
 * unvalidated and uncopied (validation once, at the edge that needs it: mcp-front checks arguments and
 * `outputSchema`). Deadlines and cancellation follow MCP 2025-11-25 basic/utilities/cancellation: past the
 * deadline, or when the caller's signal aborts, the upstream is sent `notifications/cancelled`.
 *
 * Streamable HTTP connections give {@link wireExchange} a wire of POSTs on their pool (http-exchange.ts). A wire that
 * cannot carry a request of its own (HTTP+SSE, OpenAPI servers served in process) takes the SDK client's request
 * instead ({@link sdkExchange}): same outcomes, the SDK's costs.
 */
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  SdkError,
  SdkErrorCode,
  type Client,
  type JSONRPCMessage,
  type Tool,
} from '@modelcontextprotocol/client';

/** The requests relayed on an exchange. */
export type ExchangedMethod = 'tools/call' | 'resources/read' | 'prompts/get';

/** How one exchanged request runs. */
export interface ExchangeOptions {
  /** Deadline, in milliseconds: then the upstream is told the request is cancelled and it rejects with `SdkError` `RequestTimeout`. */
  timeout: number;
  /** Aborting cancels the request upstream; it then rejects with the signal's reason (an `SdkError` when it is one). */
  signal?: AbortSignal;
  /** 2026-07-28: an `input_required` result resolves as such (`resultType: 'input_required'`) instead of failing. */
  allowInputRequired?: boolean;
  /** The definition of a tool as its server listed it, without `outputSchema` (an HTTP exchange reads its `inputSchema`'s `x-mcp-header`s). */
  toolDefinition?: (name: string) => Tool;
}

/** The answer to one exchanged request. */
export interface ExchangeAnswer {
  /**
   * The result: as the server sent it on a 2025-era connection; on a 2026-07-28 one without `resultType` when it is
   * `complete`, or as `{ resultType: 'input_required', inputRequests, requestState?, _meta? }`.
   */
  result: Record<string, unknown>;
  /** The answer's JSON text as it came off the wire, when the wire had it (its length bounds the result's JSON). */
  text?: string;
}

/** One upstream connection's forwarded requests. */
export interface UpstreamExchange {
  /**
   * Sends one request and resolves with its answer ({@link ExchangeAnswer}).
   * @throws ProtocolError for a JSON-RPC error answer (code, message and data as sent); SdkError `RequestTimeout` at
   *   the deadline, `InvalidResult` for an answer that is no result object, `UnsupportedResultType` for another
   *   `resultType`; the wire's error when the request cannot be sent (the process is gone).
   */
  request(method: ExchangedMethod, params: Record<string, unknown>, options: ExchangeOptions): Promise<ExchangeAnswer>;
}

/** A JSON-RPC answer as it came off the wire (already parsed, not yet checked). */
export type RawAnswer = Record<string, unknown>;

/** The part of a transport an exchange needs: send a message, and be handed the answer to an id of ours. */
export interface ExchangeWire {
  /**
   * Writes one message (a request, with its exchange's options, or `notifications/cancelled`); on HTTP it resolves
   * once the request's answer stream is read. @throws when the wire is closed or the request is refused.
   */
  send(message: JSONRPCMessage, options?: ExchangeOptions): Promise<void>;
  /** Hands the answer to `id`, and its JSON text, to `onAnswer` (once) instead of the SDK client; returns how to stop waiting for it. */
  expect(id: string, onAnswer: (answer: RawAnswer, text: string | undefined) => void): () => void;
}

/** Prefix of the ids of exchanged requests. */
const ID_PREFIX = 'punk-';

/** Whether an answer's id is one an exchange sent (a string id the SDK client never uses). */
export function isExchangeId(id: unknown): id is string {
  return typeof id === 'string' && id.startsWith(ID_PREFIX);
}

/**
 * The exchange of a wire whose SDK client is connected: the client's negotiated era decides the envelope.
 * `capabilities` are those the client declared (the 2026-07-28 envelope names them on every request).
 */
export function wireExchange(
  wire: ExchangeWire,
  client: Client,
  capabilities: Record<string, unknown>,
  clientInfo: object,
): UpstreamExchange {
  let next = 0;
  const envelope = (): Record<string, unknown> | undefined => {
    if (client.getProtocolEra() !== 'modern') return undefined;
    return {
      [PROTOCOL_VERSION_META_KEY]: client.getNegotiatedProtocolVersion(),
      [CLIENT_INFO_META_KEY]: clientInfo,
      [CLIENT_CAPABILITIES_META_KEY]: capabilities,
    };
  };
  const withEnvelope = (params: Record<string, unknown>, outer: Record<string, unknown> | undefined): Record<string, unknown> =>
    outer === undefined ? params : { ...params, _meta: { ...outer, ...(params['_meta'] as Record<string, unknown> | undefined) } };
  return {
    request(method, params, options) {
      const id = `${ID_PREFIX}${++next}`;
      const outer = envelope();
      return new Promise<ExchangeAnswer>((resolve, reject) => {
        let settled = false;
        let stopExpecting = () => {};
        const finish = () => {
          settled = true;
          clearTimeout(timer);
          options.signal?.removeEventListener('abort', onAbort);
          stopExpecting();
        };
        const cancel = (reason: unknown) => {
          if (settled) return;
          finish();
          const cancelled = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: String(reason) } };
          wire.send({ ...cancelled, params: withEnvelope(cancelled.params, outer) } as JSONRPCMessage).catch(() => undefined);
          reject(reason instanceof SdkError ? reason : new SdkError(SdkErrorCode.RequestTimeout, String(reason)));
        };
        const onAbort = () => cancel(options.signal?.reason);
        const timer = setTimeout(
          () => cancel(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out', { timeout: options.timeout })),
          options.timeout,
        );
        if (options.signal?.aborted) {
          onAbort();
          return;
        }
        options.signal?.addEventListener('abort', onAbort, { once: true });
        stopExpecting = wire.expect(id, (answer, text) => {
          if (settled) return;
          finish();
          try {
            const result = decodeAnswer(method, answer, outer !== undefined, options.allowInputRequired === true);
            resolve(text === undefined ? { result } : { result, text });
          } catch (error) {
            reject(error as Error);
          }
        });
        wire
          .send({ jsonrpc: '2.0', id, method, params: withEnvelope(params, outer) } as JSONRPCMessage, options)
          .catch((error: unknown) => {
            if (settled) return;
            finish();
            reject(error as Error);
          });
      });
    },
  };
}

/**
 * The result of an answer, as the SDK client would decode it: an error answer throws its ProtocolError; a 2026-07-28
 * result loses its `resultType: 'complete'`, or comes as input_required.
 */
function decodeAnswer(method: ExchangedMethod, answer: RawAnswer, modern: boolean, allowInputRequired: boolean): Record<string, unknown> {
  const error = answer['error'];
  if (error !== undefined) {
    const { code, message, data } = (typeof error === 'object' && error !== null ? error : {}) as Record<string, unknown>;
    throw ProtocolError.fromError(
      typeof code === 'number' ? code : -32603,
      typeof message === 'string' ? message : 'the server answered an error without a message',
      data,
    );
  }
  const result = answer['result'];
  if (typeof result !== 'object' || result === null || Array.isArray(result))
    throw new SdkError(SdkErrorCode.InvalidResult, `Invalid result for ${method}: not an object`, { method });
  if (!modern) return withContent(method, result as Record<string, unknown>);
  const { resultType, ...rest } = result as Record<string, unknown>;
  if (resultType === 'complete') return withContent(method, rest);
  if (resultType === 'input_required' && allowInputRequired) {
    const { inputRequests, requestState, _meta } = rest;
    return {
      resultType: 'input_required',
      inputRequests,
      ...(typeof requestState === 'string' && { requestState }),
      ...(_meta !== undefined && { _meta }),
    };
  }
  throw new SdkError(
    resultType === undefined ? SdkErrorCode.InvalidResult : SdkErrorCode.UnsupportedResultType,
    resultType === undefined
      ? `Invalid result for ${method}: missing required resultType — servers implementing protocol revision 2026-07-28 MUST include it`
      : `Unsupported result type ${JSON.stringify(resultType)} for ${method}`,
    { method, resultType },
  );
}

/** Keys of results that are not tool results, though a `tools/call` may answer them (a task, an input request). */
const FOREIGN_RESULT_KEYS = ['task', 'inputRequests', 'requestState'];

/**
 * A tool result with `content`, which MCP requires (2025-11-25 server/tools `CallToolResult`): `[]` when the server
 * sent only `structuredContent` (or nothing), as the SDK client makes it; other results as they are.
 */
function withContent(method: ExchangedMethod, result: Record<string, unknown>): Record<string, unknown> {
  if (method !== 'tools/call' || result['content'] !== undefined || FOREIGN_RESULT_KEYS.some((key) => key in result)) return result;
  return { content: [], ...result };
}

/**
 * The exchange of a connection whose wire carries no request of Punk's own: the SDK client's requests. A `tools/call`
 * gives the SDK the tool's definition without its `outputSchema` (mcp-front checks `structuredContent` against it
 * and answers a mismatch as a tool error, so the SDK must not turn it into an error here).
 */
export function sdkExchange(client: Client, toolDefinition: (name: string) => Tool): UpstreamExchange {
  return {
    async request(method, params, options) {
      const sdkOptions = { ...options, ...(method === 'resources/read' && { cacheMode: 'bypass' as const }) };
      switch (method) {
        case 'tools/call': {
          const tool = toolDefinition(String(params['name']));
          return {
            result: (await client.callTool(params as Parameters<Client['callTool']>[0], { ...sdkOptions, toolDefinition: tool })) as Record<
              string,
              unknown
            >,
          };
        }
        case 'resources/read':
          return {
            result: (await client.readResource(params as Parameters<Client['readResource']>[0], sdkOptions)) as Record<string, unknown>,
          };
        case 'prompts/get':
          return { result: (await client.getPrompt(params as Parameters<Client['getPrompt']>[0], sdkOptions)) as Record<string, unknown> };
      }
    },
  };
}
