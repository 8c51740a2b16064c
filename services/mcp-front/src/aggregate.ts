/**
 * The catalog one MCP endpoint exposes, built from the gateway's catalog of
 * the tenant: the union of every server (`/mcp`) or one server
 * (`/servers/<name>/mcp`). Pure functions: catalog in, view out.
 */
import { UriTemplate } from '@modelcontextprotocol/server';
import { NameMap, namespacedName, WORKFLOW_SERVER, type ServerCatalog, type WithheldTool } from '@punk/lib';

/** Which servers an endpoint exposes. */
export type Scope = { kind: 'aggregate' } | { kind: 'server'; server: string; namespace?: string };

/** A stable key of a scope (`*`, `name` or `namespace/name`), used to bind sessions and handlers to an endpoint. */
export function scopeKey(scope: Scope): string {
  if (scope.kind === 'aggregate') return '*';
  return scope.namespace ? `${scope.namespace}/${scope.server}` : scope.server;
}

type Tool = ServerCatalog['tools'][number];
type Prompt = ServerCatalog['prompts'][number];
type Resource = ServerCatalog['resources'][number];
type ResourceTemplate = ServerCatalog['resourceTemplates'][number];

/** Where an exposed tool goes: the server and the tool's upstream definition. */
export interface ToolRoute {
  server: string;
  name: string;
  tool: Tool;
}

/** Where an exposed prompt goes. */
export interface PromptRoute {
  server: string;
  name: string;
  prompt: Prompt;
}

/** The capabilities an endpoint advertises (MCP 2025-11-25 basic/lifecycle "Capability Negotiation"). */
export interface AdvertisedCapabilities {
  tools: { listChanged: true };
  resources?: { listChanged: true };
  prompts?: { listChanged: true };
  /** When any server in scope offers `completion/complete` (MCP 2025-11-25 server/utilities/completion). */
  completions?: Record<string, never>;
}

/** What one endpoint exposes, with the routing maps back to upstream servers. */
export interface CatalogView {
  /** The servers in scope (ready or not). */
  servers: ServerCatalog[];
  tools: NameMap<ToolRoute>;
  prompts: NameMap<PromptRoute>;
  /** Listed resources by URI; the first server (by name) listing a URI owns it. */
  resources: Map<string, { server: string; resource: Resource }>;
  /** Listed templates; the first server (by name) listing a URI template owns it. */
  templates: { server: string; template: ResourceTemplate; matcher: UriTemplate | undefined }[];
  capabilities: AdvertisedCapabilities;
}

/** The scope a `scopeKey` names (its inverse). */
export function scopeFromKey(key: string): Scope {
  if (key === '*') return { kind: 'aggregate' };
  const slash = key.indexOf('/');
  return slash === -1 ? { kind: 'server', server: key } : { kind: 'server', namespace: key.slice(0, slash), server: key.slice(slash + 1) };
}

/** Whether the endpoint with this scope key exposes `server`. */
export function scopeIncludes(key: string, server: string): boolean {
  return key === '*' || key === server || key.endsWith(`/${server}`);
}

/** The servers a scope selects among the tenant's catalog (a server's scope never selects the workflows' entry, `WORKFLOW_SERVER`). */
export function serversInScope(servers: ServerCatalog[], scope: Scope): ServerCatalog[] {
  if (scope.kind === 'aggregate') return servers;
  // The workflows' entry is no server: its tools are on /mcp only.
  return servers.filter(
    (s) => s.name !== WORKFLOW_SERVER && s.name === scope.server && (scope.namespace === undefined || s.namespace === scope.namespace),
  );
}

/**
 * Builds the view of one endpoint. Every server contributes the listings the
 * gateway last saw, whatever its state: a restarting server keeps its tools
 * listed, and a call to one gets the gateway's "unavailable" tool error. Capabilities: `tools` always (the list may
 * fill once servers become ready, and `list_changed` tells the client);
 * `resources` and `prompts` when any server in scope offers them. `listChanged`
 * is always true: Punk sends the notifications on registry changes. `completions` when any server in
 * scope offers them. Every list is in a deterministic order (servers by name; see cursor.ts for pages).
 */
export function buildView(all: ServerCatalog[], scope: Scope): CatalogView {
  const servers = serversInScope(all, scope).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const namespaced = scope.kind === 'aggregate';
  const tools = new NameMap<ToolRoute>(
    servers.flatMap((s) => s.tools.map((tool) => ({ server: s.name, name: tool.name, tool }))),
    namespaced,
  );
  const prompts = new NameMap<PromptRoute>(
    servers.flatMap((s) => s.prompts.map((prompt) => ({ server: s.name, name: prompt.name, prompt }))),
    namespaced,
  );
  const resources = new Map<string, { server: string; resource: Resource }>();
  for (const s of servers) {
    for (const resource of s.resources) if (!resources.has(resource.uri)) resources.set(resource.uri, { server: s.name, resource });
  }
  // Like a URI, a URI template belongs to the first server (by name) listing it: reads matching it go there.
  const owned = new Set<string>();
  const templates = servers.flatMap((s) =>
    s.resourceTemplates
      .filter((template) => !owned.has(template.uriTemplate) && owned.add(template.uriTemplate))
      .map((template) => ({ server: s.name, template, matcher: compileTemplate(template.uriTemplate) })),
  );
  const capabilities: AdvertisedCapabilities = { tools: { listChanged: true } };
  if (servers.some((s) => s.capabilities['resources'] !== undefined || s.resources.length > 0 || s.resourceTemplates.length > 0)) {
    capabilities.resources = { listChanged: true };
  }
  if (servers.some((s) => s.capabilities['prompts'] !== undefined || s.prompts.length > 0)) capabilities.prompts = { listChanged: true };
  if (servers.some((s) => s.capabilities['completions'] !== undefined)) capabilities.completions = {};
  return { servers, tools, prompts, resources, templates, capabilities };
}

function compileTemplate(uriTemplate: string): UriTemplate | undefined {
  try {
    return new UriTemplate(uriTemplate);
  } catch {
    return undefined;
  }
}

/**
 * The server a `resources/read` of `uri` goes to: the server that listed the
 * URI, else the first server (by name) whose resource template matches it
 * (RFC 6570 matching, MCP 2025-11-25 server/resources "Resource Templates").
 * Undefined when none does.
 */
export function routeResource(view: CatalogView, uri: string): string | undefined {
  const listed = view.resources.get(uri);
  if (listed) return listed.server;
  for (const { server, matcher } of view.templates) {
    if (matcher?.match(uri)) return server;
  }
  return undefined;
}

/**
 * The server owning the resource template `uriTemplate` (as `resources/templates/list` showed it): the first
 * server (by name) listing that template, else the server a `resources/read` of that string would go to.
 * Undefined when none does. Used for `completion/complete` with a `ref/resource` (MCP 2025-11-25 server/utilities/completion).
 */
export function routeTemplate(view: CatalogView, uriTemplate: string): string | undefined {
  return view.templates.find((t) => t.template.uriTemplate === uriTemplate)?.server ?? routeResource(view, uriTemplate);
}

/**
 * The tool withheld by the gateway (`ServerCatalog.withheldTools`: denied by its manifest, or hidden until an admin
 * reviews its changed definition) that the name `exposed` means on this endpoint, if any.
 */
export function withheldTool(view: CatalogView, exposed: string): WithheldTool | undefined {
  const { namespaced } = view.tools;
  for (const server of view.servers) {
    const found = server.withheldTools.find((tool) => (namespaced ? namespacedName(server.name, tool.name) : tool.name) === exposed);
    if (found) return found;
  }
  return undefined;
}

/**
 * The server in `view` that would serve tool `exposed` but is not running (state `failed`, `stopped` or
 * `starting`), and a sentence saying so with its last error: on `/mcp` the server whose `<server>__` prefix the name
 * carries, on a per-server endpoint its server. Undefined when that server runs, or no server is named.
 */
export function unservedServer(view: CatalogView, exposed: string): { server: ServerCatalog; message: string } | undefined {
  const server = view.tools.namespaced
    ? view.servers.find((s) => exposed.startsWith(namespacedName(s.name, '')))
    : view.servers.length === 1
      ? view.servers[0]
      : undefined;
  if (!server || server.state === 'ready' || server.state === 'idle') return undefined;
  const why = server.lastError === undefined ? '' : `: ${server.lastError}`;
  return {
    server,
    message: `server ${server.name} is ${server.state}${why}; its tools are served once it runs (GET /api/v1/mcp/servers/${server.name} shows its state)`,
  };
}

/**
 * The exposed name of the one tool among `tools` (the aggregated endpoint's, as a caller may see them) whose upstream
 * name is `name`: a client that called `echo` meant `everything__echo`. Undefined when none or several have that name.
 */
export function namespacedSuggestion(tools: Iterable<[string, ToolRoute]>, name: string): string | undefined {
  const matches = [...tools].filter(([, route]) => route.name === name);
  return matches.length === 1 ? matches[0]?.[0] : undefined;
}
