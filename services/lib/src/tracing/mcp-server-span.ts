/**
 * The server span of one MCP request or notification at mcp-front, named and attributed as the OpenTelemetry
 * MCP semantic conventions say (docs/gen-ai/mcp.md, "Server"): name `{mcp.method.name} {target}`, kind SERVER,
 * parent taken from `params._meta` (`traceparent`, `tracestate`), else from the HTTP request's `traceparent`
 * header; when both are present and differ, the HTTP one is a link ("Context propagation").
 * The outcome is read from the JSON-RPC response the client receives (JSON body or SSE `data:` lines):
 * `error.type` is the JSON-RPC error code, or `tool_error` for a `CallToolResult` with `isError: true`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Link, type Span } from '@opentelemetry/api';
import { ATTR_CLIENT_ADDRESS, ATTR_CLIENT_PORT, ATTR_ERROR_TYPE, ATTR_NETWORK_PROTOCOL_NAME, ATTR_NETWORK_PROTOCOL_VERSION, ATTR_NETWORK_TRANSPORT } from '@opentelemetry/semantic-conventions';
import { ATTR_JSONRPC_REQUEST_ID, ATTR_MCP_PROTOCOL_VERSION, ATTR_MCP_SESSION_ID, ATTR_RPC_RESPONSE_STATUS_CODE } from '@opentelemetry/semantic-conventions/incubating';
import { withRequestLogFields } from './log-fields.js';
import { mcpTargetAttributes, PUNK_TENANT } from './mcp-attributes.js';
import { extractTraceContext } from './propagation.js';
import { punkTracer } from './spans.js';

/** Most response bytes read for the outcome; past it the outcome is left unknown rather than buffering a huge result. */
const MAX_CAPTURED_BYTES = 1 << 20;

/** `_meta` key of the protocol revision a 2026-07-28 request states (MCP 2026-07-28 basic, "Request metadata"). */
const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';

interface JsonRpcMessage {
  method?: unknown;
  id?: unknown;
  params?: { _meta?: unknown; protocolVersion?: unknown };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function protocolVersionOf(req: IncomingMessage, message: JsonRpcMessage): string | undefined {
  const meta = message.params?._meta as Record<string, unknown> | undefined;
  const stated = header(req, 'mcp-protocol-version') ?? meta?.[PROTOCOL_VERSION_META_KEY] ?? (message.method === 'initialize' ? message.params?.protocolVersion : undefined);
  return typeof stated === 'string' ? stated : undefined;
}

/** The JSON-RPC messages of a response body: one JSON value (or a batch), or the `data:` lines of an SSE stream. */
function responseMessages(body: string, contentType: string): unknown[] {
  const parse = (text: string): unknown[] => {
    try {
      const value: unknown = JSON.parse(text);
      return Array.isArray(value) ? value : [value];
    } catch {
      return [];
    }
  };
  if (contentType.startsWith('text/event-stream')) {
    return body.split('\n').flatMap(line => (line.startsWith('data:') ? parse(line.slice(5).trim()) : []));
  }
  return parse(body);
}

/**
 * Sets `error.type` (and status) when the response says the request failed: the answer to request `id` (none
 * for a notification) is a JSON-RPC error or a tool error, or there is no answer and the HTTP status is 4xx/5xx.
 */
function recordOutcome(span: Span, res: ServerResponse, body: string | undefined, id: unknown): void {
  const contentType = String(res.getHeader('content-type') ?? '');
  const answer = body === undefined || id === undefined ? undefined : responseMessages(body, contentType).find(m => typeof m === 'object' && m !== null && (m as { id?: unknown }).id === id);
  const error = (answer as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (error && (typeof error.code === 'number' || typeof error.code === 'string')) {
    span.setAttribute(ATTR_ERROR_TYPE, String(error.code));
    span.setAttribute(ATTR_RPC_RESPONSE_STATUS_CODE, String(error.code));
    span.setStatus({ code: SpanStatusCode.ERROR, ...(typeof error.message === 'string' && { message: error.message }) });
    return;
  }
  if ((answer as { result?: { isError?: unknown } } | undefined)?.result?.isError === true) {
    span.setAttribute(ATTR_ERROR_TYPE, 'tool_error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool returned isError: true' });
    return;
  }
  if (answer === undefined && res.statusCode >= 400) {
    span.setAttribute(ATTR_ERROR_TYPE, String(res.statusCode));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** Keeps a copy of what is written to `res` (up to {@link MAX_CAPTURED_BYTES}); undefined once that is passed. */
function captureBody(res: ServerResponse): () => string | undefined {
  const chunks: Buffer[] = [];
  let size = 0;
  const keep = (chunk: unknown, encoding: unknown) => {
    if (size > MAX_CAPTURED_BYTES || chunk === undefined || chunk === null || typeof chunk === 'function') return;
    const buffer = Buffer.isBuffer(chunk) ? chunk : typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8') : Buffer.from(chunk as Uint8Array);
    size += buffer.length;
    if (size <= MAX_CAPTURED_BYTES) chunks.push(buffer);
  };
  const write = res.write;
  const end = res.end;
  res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    keep(chunk, rest[0]);
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof res.write;
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    keep(chunk, rest[0]);
    return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as typeof res.end;
  return () => (size > MAX_CAPTURED_BYTES ? undefined : Buffer.concat(chunks).toString('utf8'));
}

/**
 * Serves one HTTP request of the MCP endpoint with `handle`. When `body` is a JSON-RPC request or notification,
 * `handle` runs inside its MCP server span (active, so the gateway call over the bus joins the trace, and log
 * lines carry `trace_id`, `span_id`, `requestId` and `tenant`); the span ends when the response is closed.
 * Other requests (GET streams, DELETE, responses, batches) run without a span. Nothing here throws: `handle`'s
 * own error is passed on.
 *
 * Attributes: `mcp.method.name`, `jsonrpc.request.id`, `mcp.session.id` (`Mcp-Session-Id`),
 * `mcp.protocol.version`, `gen_ai.tool.name` and `gen_ai.operation.name=execute_tool` (tools/call),
 * `gen_ai.prompt.name` (prompts/get), `mcp.resource.uri` (resources/*), `network.transport=tcp`,
 * `network.protocol.name=http`, `network.protocol.version`, `client.address`, `client.port`, `punk.tenant`,
 * and on failure `error.type` and `rpc.response.status_code`.
 */
export async function traceMcpRequest(req: IncomingMessage, res: ServerResponse, body: unknown, tenant: string, handle: () => Promise<void>): Promise<void> {
  const message = body as JsonRpcMessage | undefined;
  if (typeof message !== 'object' || message === null || Array.isArray(message) || typeof message.method !== 'string') return handle();
  const method = message.method;
  const isRequest = message.id !== undefined && message.id !== null;
  const requestId = isRequest ? String(message.id) : undefined;
  const fromHttp = extractTraceContext(req.headers);
  const fromMeta = extractTraceContext(message.params?._meta);
  const metaSpan = trace.getSpanContext(fromMeta);
  const httpSpan = trace.getSpanContext(fromHttp);
  const links: Link[] = metaSpan && httpSpan && httpSpan.spanId !== metaSpan.spanId ? [{ context: httpSpan }] : [];
  const target = mcpTargetAttributes(method, message.params);
  const protocolVersion = protocolVersionOf(req, message);
  const sessionId = header(req, 'mcp-session-id');
  const attributes: Attributes = {
    ...target.attributes,
    ...(requestId !== undefined && { [ATTR_JSONRPC_REQUEST_ID]: requestId }),
    ...(sessionId && { [ATTR_MCP_SESSION_ID]: sessionId }),
    ...(protocolVersion && { [ATTR_MCP_PROTOCOL_VERSION]: protocolVersion }),
    [ATTR_NETWORK_TRANSPORT]: 'tcp',
    [ATTR_NETWORK_PROTOCOL_NAME]: 'http',
    [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
    ...(req.socket.remoteAddress && { [ATTR_CLIENT_ADDRESS]: req.socket.remoteAddress }),
    ...(req.socket.remotePort !== undefined && { [ATTR_CLIENT_PORT]: req.socket.remotePort }),
    [PUNK_TENANT]: tenant,
  };
  const parent = metaSpan ? fromMeta : fromHttp;
  const span = punkTracer().startSpan(target.spanName, { kind: SpanKind.SERVER, attributes, links }, parent);
  const captured = span.isRecording() ? captureBody(res) : () => undefined;
  res.once('close', () => {
    if (span.isRecording()) recordOutcome(span, res, captured(), isRequest ? message.id : undefined);
    span.end();
  });
  return context.with(trace.setSpan(withRequestLogFields({ ...(requestId !== undefined && { requestId }), tenant }, parent), span), handle);
}
