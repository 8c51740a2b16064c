/**
 * The server span of one MCP request or notification at mcp-front, named and attributed as the OpenTelemetry
 * MCP semantic conventions say (docs/gen-ai/mcp.md, "Server"): name `{mcp.method.name} {target}`, kind SERVER,
 * parent taken from `params._meta` (`traceparent`, `tracestate`), else from the HTTP request's `traceparent`
 * header; when both are present and differ, the HTTP one is a link ("Context propagation").
 * The outcome comes from the JSON-RPC response sent to the request ({@link recordMcpResponse}): `error.type` is the
 * JSON-RPC error code, or `tool_error` for a `CallToolResult` with `isError: true`; without one, a 4xx/5xx status.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Link, type Span } from '@opentelemetry/api';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_CLIENT_PORT,
  ATTR_ERROR_TYPE,
  ATTR_NETWORK_PROTOCOL_NAME,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_NETWORK_TRANSPORT,
} from '@opentelemetry/semantic-conventions';
import {
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_RPC_RESPONSE_STATUS_CODE,
} from '@opentelemetry/semantic-conventions/incubating';
import { withRequestLogFields } from './log-fields.js';
import { mcpTargetAttributes, PUNK_TENANT } from './mcp-attributes.js';
import { extractTraceContext } from './propagation.js';
import { isTracingOn } from './setup.js';
import { punkTracer } from './spans.js';

/** The JSON-RPC id each MCP server span answers, so only the answer to its own request sets its outcome. */
const answersTo = new WeakMap<Span, unknown>();
/** Spans whose answer was seen by {@link recordMcpResponse}. */
const answered = new WeakSet<Span>();

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
  const stated =
    header(req, 'mcp-protocol-version') ??
    meta?.[PROTOCOL_VERSION_META_KEY] ??
    (message.method === 'initialize' ? message.params?.protocolVersion : undefined);
  return typeof stated === 'string' ? stated : undefined;
}

/**
 * Sets the outcome of the active MCP server span ({@link traceMcpRequest}) from the JSON-RPC response being sent to
 * its request: `error.type` and `rpc.response.status_code` are the error's code, or `error.type` is `tool_error` for
 * a result with `isError: true`. The front's transport calls it for every response it sends (mcp-front metrics.ts);
 * a response to another request, or with no span active, changes nothing.
 */
export function recordMcpResponse(response: { id?: unknown; result?: unknown; error?: unknown }): void {
  const span = trace.getActiveSpan();
  if (!span || !span.isRecording() || !answersTo.has(span) || answersTo.get(span) !== response.id) return;
  answered.add(span);
  const error = response.error as { code?: unknown; message?: unknown } | undefined;
  if (error && (typeof error.code === 'number' || typeof error.code === 'string')) {
    span.setAttribute(ATTR_ERROR_TYPE, String(error.code));
    span.setAttribute(ATTR_RPC_RESPONSE_STATUS_CODE, String(error.code));
    span.setStatus({ code: SpanStatusCode.ERROR, ...(typeof error.message === 'string' && { message: error.message }) });
    return;
  }
  if ((response.result as { isError?: unknown } | undefined)?.isError === true) {
    span.setAttribute(ATTR_ERROR_TYPE, 'tool_error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the tool returned isError: true' });
  }
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
export async function traceMcpRequest(
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  tenant: string,
  handle: () => Promise<void>,
): Promise<void> {
  const message = body as JsonRpcMessage | undefined;
  if (typeof message !== 'object' || message === null || Array.isArray(message) || typeof message.method !== 'string') return handle();
  const method = message.method;
  const isRequest = message.id !== undefined && message.id !== null;
  const requestId = isRequest ? String(message.id) : undefined;
  // Tracing off: no span to build (its attributes, the contexts of the headers and `_meta`), only the log fields.
  if (!isTracingOn())
    return context.with(withRequestLogFields({ ...(requestId !== undefined && { requestId }), tenant }, ROOT_CONTEXT), handle);
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
  if (isRequest) answersTo.set(span, message.id);
  res.once('close', () => {
    // No JSON-RPC answer (refused before the SDK saw it, or a notification): the HTTP status tells.
    if (span.isRecording() && !answered.has(span) && res.statusCode >= 400) {
      span.setAttribute(ATTR_ERROR_TYPE, String(res.statusCode));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  });
  return context.with(trace.setSpan(withRequestLogFields({ ...(requestId !== undefined && { requestId }), tenant }, parent), span), handle);
}
