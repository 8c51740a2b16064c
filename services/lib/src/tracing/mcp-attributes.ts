/**
 * Span names and target attributes of MCP operations, shared by the server span (mcp-front) and the client
 * span (gateway to upstream), per the OpenTelemetry MCP semantic conventions (docs/gen-ai/mcp.md): name
 * `{mcp.method.name} {target}` where the target is the tool or prompt name; a resource URI is an attribute,
 * never part of the name (high cardinality).
 */
import type { Attributes } from '@opentelemetry/api';
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROMPT_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_RESOURCE_URI,
} from '@opentelemetry/semantic-conventions/incubating';

/** Punk's own attribute: the tenant (Kubernetes namespace) the request belongs to. */
export const PUNK_TENANT = 'punk.tenant';
/** Punk's own attribute: the McpServer a request is routed to. */
export const PUNK_SERVER = 'punk.server';

/** `gen_ai.operation.name` of a tool call (semconv: SHOULD be set for tools/call only). */
const EXECUTE_TOOL = 'execute_tool';

const RESOURCE_METHODS = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe', 'notifications/resources/updated']);

/** The span name and target attributes of MCP `method` with `params` (as received; anything may be in it). */
export function mcpTargetAttributes(method: string, params: unknown): { spanName: string; attributes: Attributes } {
  const p = (typeof params === 'object' && params !== null ? params : {}) as { name?: unknown; uri?: unknown };
  const name = typeof p.name === 'string' ? p.name : undefined;
  const attributes: Attributes = { [ATTR_MCP_METHOD_NAME]: method };
  if (method === 'tools/call' && name !== undefined) {
    attributes[ATTR_GEN_AI_TOOL_NAME] = name;
    attributes[ATTR_GEN_AI_OPERATION_NAME] = EXECUTE_TOOL;
    return { spanName: `${method} ${name}`, attributes };
  }
  if (method === 'prompts/get' && name !== undefined) {
    attributes[ATTR_GEN_AI_PROMPT_NAME] = name;
    return { spanName: `${method} ${name}`, attributes };
  }
  if (RESOURCE_METHODS.has(method) && typeof p.uri === 'string') attributes[ATTR_MCP_RESOURCE_URI] = p.uri;
  return { spanName: method, attributes };
}
