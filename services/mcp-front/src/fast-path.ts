/**
 * The fast path of forwarded requests: a POST carrying one `tools/call`, `resources/read` or `prompts/get` is served
 * without an SDK server or transport: its body, already parsed and checked by http.ts, is checked for what the
 * SDK's schemas would refuse (and goes to the SDK path whenever anything looks off, so refusals keep their exact
 * answers), forwarded as forward.ts does, and its answer written by hand in the bytes the SDK path writes
 * (wire-results.ts): one SSE event for a 2025-era session, JSON for a 2026-07-28 request, each in one write when the
 * answer comes before anything else.
 *
 * What takes it:
 * - 2025 era (legacy.ts decides, after the session's checks): a POST answered as a stream that is not resumable
 *   (response mode `auto`: no progress token in a session at 2025-11-25 or later that could take back requests);
 *   notifications and server-to-client requests of the call go out as SSE events before the answer.
 * - 2026-07-28 (endpoint.ts decides): a first request (no `requestState`, no `inputResponses`) whose envelope holds a
 *   protocol version, client info and capabilities and nothing else, whose `Mcp-Method` and `Mcp-Name` headers are
 *   the body's own; it answers JSON, switching to SSE when the call sends a notification first or runs longer than
 *   one keep-alive interval (as the SDK does in response mode `auto`). Closing the response cancels the call.
 *
 * A call that runs long gets a `: keepalive` comment every keep-alive interval, as on the SDK path.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  LOG_LEVEL_META_KEY,
  PROTOCOL_VERSION_META_KEY,
  type RequestId,
} from '@modelcontextprotocol/server';
import type { Principal } from '@punk/lib';
import type { Scope } from './aggregate.js';
import { isCancelledCall } from './cancellation.js';
import { callTool, getPrompt, readResource, type Caller, type ForwardContext, type ForwardDeps } from './forward.js';
import { MODERN_PROTOCOL_VERSIONS } from './http.js';
import { fastPathRequests, observeAnswer } from './metrics.js';
import type { SessionContext } from './session-context.js';
import { encodeErrorCode, encodeResult, projectToolResult, type ClientEra } from './wire-results.js';

/** What the fast path needs. */
export interface FastPathDeps extends ForwardDeps {
  /** Interval of SSE keep-alive comments, in milliseconds. */
  keepAliveMs: number;
}

/** A forwarded request the fast path takes, as its body says it. */
interface ForwardedCall {
  id: RequestId;
  method: 'tools/call' | 'resources/read' | 'prompts/get';
  params: Record<string, unknown>;
  /** `params._meta` without the envelope's keys; undefined when nothing is left. */
  meta: Record<string, unknown> | undefined;
  /** The envelope's keys of `params._meta`, when any. */
  envelope: Record<string, unknown> | undefined;
}

/** The 2026-07-28 envelope's `_meta` keys (MCP 2026-07-28 basic, "Request metadata"). */
const ENVELOPE_KEYS = [PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY];

/** The 2026-07-28 revision the fast path serves. */
const MODERN_VERSION = MODERN_PROTOCOL_VERSIONS[0];

/** Serves forwarded requests without an SDK server (see the module comment). */
export class FastPath {
  constructor(private readonly deps: FastPathDeps) {}

  /**
   * Serves a 2025-era session's POST whose answer is a plain SSE stream, when its body is one forwarded request the
   * SDK would take: resolves once it is answered; undefined (nothing written) when the SDK path must serve it.
   */
  serveSession(scope: Scope, session: SessionContext, res: ServerResponse, body: unknown): Promise<void> | undefined {
    const call = forwardedCallOf(body);
    if (!call || call.envelope !== undefined) return undefined;
    return this.serve({ scope, session, principal: session.principal }, 'legacy', session.protocolVersion, call, res);
  }

  /**
   * Serves a 2026-07-28 POST (the request's `Mcp-Param-*` headers already checked), when it is a first forwarded request
   * the SDK would take (see the module comment): resolves once it is answered; undefined (nothing written) otherwise.
   */
  serveModern(scope: Scope, principal: Principal, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> | undefined {
    const call = forwardedCallOf(body);
    if (!call || !isPlainEnvelope(call.envelope) || !headersMatch(req, call)) return undefined;
    return this.serve({ scope, principal }, 'modern', MODERN_VERSION, call, res);
  }

  private async serve(caller: Caller, era: ClientEra, protocolVersion: string | undefined, call: ForwardedCall, res: ServerResponse) {
    const startedAt = performance.now();
    fastPathRequests.inc({ mcp_method_name: call.method });
    const answer = new ForwardedAnswer(res, era, this.deps.keepAliveMs);
    const abort = new AbortController();
    res.once('close', () => {
      if (!answer.done) abort.abort();
    });
    const ctx: ForwardContext = {
      id: call.id,
      meta: call.meta,
      envelope: call.envelope,
      protocolVersion,
      signal: abort.signal,
      notify: async (message) => answer.event({ jsonrpc: '2.0', ...message }),
      sendRequest: async (message) => answer.event({ jsonrpc: '2.0', ...message }),
    };
    let response: Record<string, unknown>;
    try {
      const result = await this.dispatch(caller, era, ctx, call);
      response = { result: encodeResult(era, call.method, result, this.deps.serverInfo), jsonrpc: '2.0', id: call.id };
    } catch (thrown) {
      // A 2025 request its client cancelled gets no response (MCP 2025-11-25 basic/utilities/cancellation).
      if (era === 'legacy' && isCancelledCall(thrown)) {
        answer.finish(undefined);
        return;
      }
      // As the SDK answers a handler's throw: its code when it has an integer one, its message, its data.
      const error = thrown as { code?: unknown; message?: string; data?: unknown };
      const code = encodeErrorCode(era, typeof error.code === 'number' && Number.isSafeInteger(error.code) ? error.code : -32603);
      response = {
        jsonrpc: '2.0',
        id: call.id,
        error: { code, message: error.message ?? 'Internal error', ...(error.data !== undefined && { data: error.data }) },
      };
    }
    answer.finish(response);
    const tool = call.method === 'tools/call' ? (call.params['name'] as string) : undefined;
    observeAnswer({ method: call.method, tool, version: protocolVersion, startedAt }, response, this.deps.catalog, caller.scope);
  }

  private dispatch(caller: Caller, era: ClientEra, ctx: ForwardContext, call: ForwardedCall): Promise<Record<string, unknown>> {
    const { params } = call;
    switch (call.method) {
      case 'tools/call':
        return callTool(
          this.deps,
          caller,
          ctx,
          { name: params['name'] as string, arguments: params['arguments'] as Record<string, unknown> | undefined },
          (result, outputSchema) => projectToolResult(era, result, outputSchema),
        );
      case 'resources/read':
        return readResource(this.deps, caller, ctx, { uri: params['uri'] as string });
      case 'prompts/get':
        return getPrompt(this.deps, caller, ctx, {
          name: params['name'] as string,
          arguments: params['arguments'] as Record<string, string> | undefined,
        });
    }
  }
}

/**
 * The answer of one forwarded request on its HTTP response: SSE (always for a 2025-era session; for a 2026-07-28
 * request once something goes out before the answer, or the call runs past one keep-alive interval) or one JSON body.
 */
class ForwardedAnswer {
  /** True once the answer is written (a close after it is no cancellation). */
  done = false;
  private streaming = false;
  private timer: NodeJS.Timeout;

  constructor(
    private readonly res: ServerResponse,
    private readonly era: ClientEra,
    keepAliveMs: number,
  ) {
    this.timer = setInterval(() => this.keepAlive(), keepAliveMs);
    this.timer.unref();
  }

  /** Writes a message before the answer (a notification, a server-to-client request): an SSE event. */
  event(message: Record<string, unknown>): void {
    if (this.done || this.res.writableEnded) return;
    this.stream();
    this.res.write(sseEvent(message));
  }

  /** Writes the answer and ends the response; without one (a cancelled request), ends the stream as it stands. */
  finish(response: Record<string, unknown> | undefined): void {
    this.done = true;
    clearInterval(this.timer);
    if (this.res.writableEnded || this.res.destroyed) return;
    if (response === undefined) {
      this.stream();
      this.res.end();
      return;
    }
    if (this.era === 'modern' && !this.streaming) {
      const code = (response['error'] as { code?: unknown } | undefined)?.code;
      // In-band errors are HTTP 200, but a missing client capability (-32021), which the spec answers with 400.
      const json = JSON.stringify(response);
      // With its length known, the head and the body go out in one write.
      this.res.writeHead(code === -32021 ? 400 : 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
      this.res.end(json);
      return;
    }
    const event = sseEvent(response);
    if (!this.streaming) this.res.setHeader('Content-Length', Buffer.byteLength(event));
    this.stream();
    this.res.end(event);
  }

  private keepAlive(): void {
    if (this.done || this.res.writableEnded) return;
    this.stream();
    this.res.write(': keepalive\n\n');
  }

  /** Opens the SSE stream, once (the headers go out with its first write). */
  private stream(): void {
    if (this.streaming) return;
    this.streaming = true;
    this.res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
  }
}

/** One SSE event carrying a JSON-RPC message, as the SDK's transports write it. */
function sseEvent(message: Record<string, unknown>): string {
  return `event: message\ndata: ${JSON.stringify(message)}\n\n`;
}

/**
 * The forwarded request a body holds when the SDK would take it as such (a single JSON-RPC 2.0 request, its params
 * of the method's shape, no task, no retry of an input round): undefined for anything else.
 */
function forwardedCallOf(body: unknown): ForwardedCall | undefined {
  if (!isPlainObject(body) || body['jsonrpc'] !== '2.0') return undefined;
  const { id, method, params } = body;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)))) return undefined;
  if (method !== 'tools/call' && method !== 'resources/read' && method !== 'prompts/get') return undefined;
  if (!isPlainObject(params) || 'task' in params || 'requestState' in params || 'inputResponses' in params) return undefined;
  if (method === 'resources/read' ? typeof params['uri'] !== 'string' : typeof params['name'] !== 'string') return undefined;
  const args = params['arguments'];
  if (method !== 'resources/read' && args !== undefined && !isPlainObject(args)) return undefined;
  if (method === 'prompts/get' && isPlainObject(args) && Object.values(args).some((value) => typeof value !== 'string')) return undefined;
  const rawMeta = params['_meta'];
  if (rawMeta !== undefined && !isPlainObject(rawMeta)) return undefined;
  if (rawMeta === undefined || !ENVELOPE_KEYS.some((key) => key in rawMeta))
    return { id, method, params, meta: rawMeta, envelope: undefined };
  // The envelope's keys are lifted out of `_meta`, as the SDK lifts them before its handlers run.
  const entries = Object.entries(rawMeta);
  const envelope = Object.fromEntries(entries.filter(([key]) => ENVELOPE_KEYS.includes(key)));
  const rest = entries.filter(([key]) => !ENVELOPE_KEYS.includes(key));
  return { id, method, params, meta: rest.length > 0 ? Object.fromEntries(rest) : undefined, envelope };
}

/** A 2026-07-28 envelope the SDK would accept without a word: the revision, a client name and version, capabilities. */
function isPlainEnvelope(envelope: Record<string, unknown> | undefined): boolean {
  if (envelope === undefined || envelope[PROTOCOL_VERSION_META_KEY] !== MODERN_VERSION || LOG_LEVEL_META_KEY in envelope) return false;
  const info = envelope[CLIENT_INFO_META_KEY];
  return (
    isPlainObject(info) &&
    typeof info['name'] === 'string' &&
    typeof info['version'] === 'string' &&
    isPlainObject(envelope[CLIENT_CAPABILITIES_META_KEY])
  );
}

/** Whether a 2026-07-28 request's `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers are exactly the body's. */
function headersMatch(req: IncomingMessage, call: ForwardedCall): boolean {
  const name = call.method === 'resources/read' ? call.params['uri'] : call.params['name'];
  return (
    req.headers['mcp-protocol-version'] === MODERN_VERSION && req.headers['mcp-method'] === call.method && req.headers['mcp-name'] === name
  );
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
