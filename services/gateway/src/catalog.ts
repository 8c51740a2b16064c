/**
 * The catalog of one server as the gateway serves it: the upstream listings
 * with `spec.tools.allow/deny` applied (denied tools are neither listed nor
 * callable: they are `withheldTools`, and a call answers which rule) and
 * `spec.tools.overrides` applied (annotations replaced, declared side-effect
 * levels recorded); tools hidden by pinning are withheld the same way. Pure functions.
 */
import { durationMs, type McpServer, type ServerCatalog, type SideEffectLevel, type WithheldTool } from '@punk/lib';
import { openApiLevelOf } from './openapi/tools.js';

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
  return denialOf(server, name) === undefined;
}

/** Why the manifest's `spec.tools.allow`/`deny` keeps a tool from being served (a sentence naming the rule), or undefined when it does not. */
export function denialOf(server: McpServer, name: string): string | undefined {
  const tools = server.spec.tools;
  const what = `tool ${name} of server ${server.metadata.name} is not served`;
  if (tools?.allow && !tools.allow.includes(name)) return `${what}: the server's spec.tools.allow does not list it`;
  if (tools?.deny?.includes(name)) return `${what}: the server's spec.tools.deny lists it`;
  return undefined;
}

/**
 * What a call to a tool hidden by pinning answers: its definition changed and waits for an admin, with the routes to
 * review and accept it.
 */
export function awaitingReviewMessage(tool: string, server: string): string {
  const base = `/api/v1/mcp/servers/${encodeURIComponent(server)}/tools`;
  return (
    `tool ${tool} of server ${server} is hidden: its definition changed since it was pinned and awaits an admin's review ` +
    `(GET ${base}); an admin accepts the new definition with POST ${base}/${encodeURIComponent(tool)}/accept`
  );
}

/** The catalog without the tools hidden by pinning (`hidden`, by name), each listed in `withheldTools` as `awaiting-review`. */
export function withholdTools(catalog: ServerCatalog, hidden: readonly string[]): ServerCatalog {
  if (hidden.length === 0) return catalog;
  const names = new Set(hidden);
  const awaiting: WithheldTool[] = hidden.map((name) => ({
    name,
    reason: 'awaiting-review',
    message: awaitingReviewMessage(name, catalog.name),
  }));
  return {
    ...catalog,
    tools: catalog.tools.filter((tool) => !names.has(tool.name)),
    withheldTools: [...catalog.withheldTools.filter((tool) => !names.has(tool.name)), ...awaiting],
  };
}

/**
 * The side-effect level declared for a tool in `spec.tools.overrides`, else, for a tool of an `openapi` server (`tool`
 * as listed), the level of its HTTP method (openapi/tools.ts); undefined otherwise. Only an openapi server's `_meta`
 * is read: it is Punk's own, while any other upstream could claim a level there.
 */
export function declaredLevelOf(server: McpServer, name: string, tool?: McpItem): SideEffectLevel | undefined {
  const declared = server.spec.tools?.overrides.find((o) => o.name === name)?.sideEffectLevel;
  if (declared !== undefined || server.spec.openapi === undefined || tool === undefined) return declared;
  return openApiLevelOf(tool);
}

/** The visible tools, with override annotations applied, the declared levels by tool name, and the tools the manifest denies. */
export function visibleTools(
  server: McpServer,
  tools: McpItem[],
): { tools: McpItem[]; sideEffectLevels: Record<string, SideEffectLevel>; denied: WithheldTool[] } {
  const sideEffectLevels: Record<string, SideEffectLevel> = {};
  const visible: McpItem[] = [];
  const denied: WithheldTool[] = [];
  for (const tool of tools) {
    const name = String(tool.name);
    const denial = denialOf(server, name);
    if (denial !== undefined) {
      denied.push({ name, reason: 'denied', message: denial });
      continue;
    }
    const override = server.spec.tools?.overrides.find((o) => o.name === name);
    visible.push(override?.annotations ? { ...tool, annotations: override.annotations } : tool);
    const level = override?.sideEffectLevel ?? (server.spec.openapi !== undefined ? openApiLevelOf(tool) : undefined);
    if (level !== undefined) sideEffectLevels[name] = level;
  }
  return { tools: visible, sideEffectLevels, denied };
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
  const { tools, sideEffectLevels, denied } = visibleTools(server, listings.tools);
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
    withheldTools: denied,
    ...(server.spec.timeout !== undefined && { timeoutMs: durationMs(server.spec.timeout) }),
    ...(server.spec.auth?.tokenExchange && { tokenExchange: server.spec.auth.tokenExchange }),
    ...(server.spec.auth?.perUser && { perUser: { provider: server.spec.auth.perUser.provider, scopes: server.spec.auth.perUser.scopes } }),
  };
}
