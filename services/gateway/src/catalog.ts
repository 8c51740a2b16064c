/**
 * The catalog of one server as the gateway serves it: the upstream listings
 * with `spec.tools.allow/deny` applied (hidden tools are neither listed nor
 * callable) and `spec.tools.overrides` applied (annotations replaced, declared
 * side-effect levels recorded). Pure functions.
 */
import { durationMs, type McpServer, type ServerCatalog, type SideEffectLevel } from '@punk/lib';

/** A listed MCP item (tool, resource, template, prompt), kept as the server sent it. */
export type McpItem = Record<string, unknown>;

/** What the upstream listed, before filtering. */
export interface Listings {
  tools: McpItem[];
  resources: McpItem[];
  resourceTemplates: McpItem[];
  prompts: McpItem[];
}

/** Empty listings. */
export function emptyListings(): Listings {
  return { tools: [], resources: [], resourceTemplates: [], prompts: [] };
}

/** True when `spec.tools.allow` (if set) names the tool and `spec.tools.deny` does not. */
export function isToolVisible(server: McpServer, name: string): boolean {
  const tools = server.spec.tools;
  if (!tools) return true;
  if (tools.allow && !tools.allow.includes(name)) return false;
  if (tools.deny && tools.deny.includes(name)) return false;
  return true;
}

/** The side-effect level declared for a tool in `spec.tools.overrides`, if any. */
export function declaredLevelOf(server: McpServer, name: string): SideEffectLevel | undefined {
  return server.spec.tools?.overrides.find((o) => o.name === name)?.sideEffectLevel;
}

/** The visible tools, with override annotations applied, and the declared levels by tool name. */
export function visibleTools(server: McpServer, tools: McpItem[]): { tools: McpItem[]; sideEffectLevels: Record<string, SideEffectLevel> } {
  const sideEffectLevels: Record<string, SideEffectLevel> = {};
  const visible: McpItem[] = [];
  for (const tool of tools) {
    const name = String(tool.name);
    if (!isToolVisible(server, name)) continue;
    const override = server.spec.tools?.overrides.find((o) => o.name === name);
    visible.push(override?.annotations ? { ...tool, annotations: override.annotations } : tool);
    if (override?.sideEffectLevel !== undefined) sideEffectLevels[name] = override.sideEffectLevel;
  }
  return { tools: visible, sideEffectLevels };
}

/** What the gateway learnt from the handshake. */
export interface ServerIdentity {
  protocolVersion?: string;
  serverInfo?: Record<string, unknown>;
  instructions?: string;
  capabilities?: Record<string, unknown>;
}

/**
 * Builds the catalog entry of one server. The last listings are reported in
 * every state, so a server that is restarting keeps its tools listed (clients
 * see no flapping and no list_changed storm) and calls to them get a clear
 * "unavailable" tool error instead of "unknown tool".
 */
export function buildCatalog(
  server: McpServer,
  state: ServerCatalog['state'],
  lastError: string | undefined,
  identity: ServerIdentity,
  listings: Listings,
): ServerCatalog {
  const { tools, sideEffectLevels } = visibleTools(server, listings.tools);
  return {
    name: server.metadata.name,
    namespace: server.metadata.namespace ?? 'default',
    state,
    ...(lastError !== undefined && { lastError }),
    ...(identity.protocolVersion !== undefined && { protocolVersion: identity.protocolVersion }),
    ...(identity.serverInfo !== undefined && { serverInfo: identity.serverInfo }),
    ...(identity.instructions !== undefined && { instructions: identity.instructions }),
    capabilities: identity.capabilities ?? {},
    tools: tools as ServerCatalog['tools'],
    resources: listings.resources as ServerCatalog['resources'],
    resourceTemplates: listings.resourceTemplates as ServerCatalog['resourceTemplates'],
    prompts: listings.prompts as ServerCatalog['prompts'],
    sideEffectLevels,
    ...(server.spec.timeout !== undefined && { timeoutMs: durationMs(server.spec.timeout) }),
  };
}
