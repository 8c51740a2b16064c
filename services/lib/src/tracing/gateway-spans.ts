/**
 * The gateway's spans: one SERVER span per call it routes (a bus request from mcp-front, or from another
 * gateway replica forwarding to the owner of an upstream session), and one CLIENT span per request it sends
 * to an upstream MCP server, attributed per the OpenTelemetry MCP semantic conventions ("Client") and
 * propagated to the upstream in `params._meta` (`traceparent`, `tracestate`).
 */
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE } from '@opentelemetry/semantic-conventions';
import { ATTR_MCP_SESSION_ID, ATTR_RPC_RESPONSE_STATUS_CODE } from '@opentelemetry/semantic-conventions/incubating';
import type { RequestHandler } from '../bus/bus.js';
import { PunkError } from '../errors.js';
import { mcpTargetAttributes, PUNK_SERVER, PUNK_TENANT } from './mcp-attributes.js';
import { withTraceContext } from './propagation.js';
import { inSpan } from './spans.js';

/** The fields of a gateway message the route span reads (contracts.ts `GatewayRequest`; unchecked here). */
interface RoutedMessage {
  method?: unknown;
  tenant?: unknown;
  server?: unknown;
  runId?: unknown;
  sessionId?: unknown;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * Wraps the gateway's handler of `punk.gateway.call` (and of the per-replica subject): each message runs in a
 * SERVER span `route {mcp.method.name} {target}` (e.g. `route tools/call get_weather`, the upstream's tool
 * name), child of the context in the message headers, with `mcp.method.name`, `gen_ai.tool.name` /
 * `gen_ai.prompt.name` / `mcp.resource.uri`, `punk.server`, `punk.tenant`, `mcp.session.id` (the client's
 * session at the front); log lines inside carry `runId` and `tenant`.
 */
export function traceGatewayCalls(handler: RequestHandler): RequestHandler {
  return (data, info) => {
    const message = (typeof data === 'object' && data !== null ? data : {}) as RoutedMessage;
    const target = mcpTargetAttributes(text(message.method) ?? 'unknown', message);
    const [tenant, server, runId, sessionId] = [text(message.tenant), text(message.server), text(message.runId), text(message.sessionId)];
    const attributes = {
      ...target.attributes,
      ...(tenant && { [PUNK_TENANT]: tenant }),
      ...(server && { [PUNK_SERVER]: server }),
      ...(sessionId && { [ATTR_MCP_SESSION_ID]: sessionId }),
    };
    return inSpan(`route ${target.spanName}`, { kind: SpanKind.SERVER, attributes, logFields: { runId, tenant } }, () =>
      handler(data, info),
    );
  };
}

/** What an upstream call resolves with (the gateway's `CallOutcome`): a result, or a failure of some kind. */
export interface UpstreamOutcome {
  ok: boolean;
  /** Failure kind (`timeout`, `unavailable`, `exited`, `cancelled`, `refused`) when not ok. */
  kind?: string;
  result?: Record<string, unknown>;
}

/** Sets `error.type` from an upstream call's outcome: its failure kind, or `tool_error` for a result with `isError: true`. */
function recordOutcome(span: Span, outcome: UpstreamOutcome): void {
  const type = !outcome.ok ? (outcome.kind ?? '_OTHER') : outcome.result?.['isError'] === true ? 'tool_error' : undefined;
  if (type === undefined) return;
  span.setAttribute(ATTR_ERROR_TYPE, type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** The JSON-RPC error code an upstream answered with (`PunkError` `UpstreamError` details `mcpCode`). */
function jsonRpcCode(error: unknown): string | undefined {
  const code = error instanceof PunkError ? (error.details as { mcpCode?: unknown } | undefined)?.mcpCode : undefined;
  return typeof code === 'number' ? String(code) : undefined;
}

/**
 * Sends one request to upstream server `server` in a CLIENT span `{method} {target}` (MCP semantic
 * conventions "Client": `mcp.method.name`, `gen_ai.tool.name` and `gen_ai.operation.name=execute_tool` for
 * tools/call, `gen_ai.prompt.name`, `mcp.resource.uri`, `punk.server`; `error.type` = the JSON-RPC error code,
 * `tool_error`, or the failure kind). `send` gets the request's `_meta` with the span's `traceparent` (and
 * `tracestate`) written into it, replacing the client's.
 */
export function traceUpstreamCall<T extends UpstreamOutcome>(
  method: string,
  params: { name?: string; uri?: string },
  server: string,
  meta: Record<string, unknown> | undefined,
  send: (meta: Record<string, unknown> | undefined) => Promise<T>,
): Promise<T> {
  const target = mcpTargetAttributes(method, params);
  return inSpan(
    target.spanName,
    { kind: SpanKind.CLIENT, attributes: { ...target.attributes, [PUNK_SERVER]: server }, errorType: jsonRpcCode },
    async (span) => {
      try {
        const outcome = await send(withTraceContext(meta));
        recordOutcome(span, outcome);
        return outcome;
      } catch (error) {
        const code = jsonRpcCode(error);
        if (code !== undefined) span.setAttribute(ATTR_RPC_RESPONSE_STATUS_CODE, code);
        throw error;
      }
    },
  );
}
