/**
 * The MCP server mcp-front builds for one 2025-era session or one 2026-era
 * request: a low-level SDK `Server` whose handlers forward tools/call,
 * resources/read and prompts/get to the gateway over the bus
 * (`punk.gateway.call`) and answer the list methods from the cached catalog.
 * Method semantics follow MCP 2025-11-25 server/tools, server/resources and
 * server/prompts; the SDK encodes each era's wire shape.
 */
import { randomUUID } from 'node:crypto';
import {
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  Server,
  type CacheHint,
  type CallToolResult,
  type CompleteResult,
  type JSONRPCMessage,
  type Notification,
  type ServerContext,
  type GetPromptResult,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplateType,
  type ServerCapabilities,
  type Tool,
} from '@modelcontextprotocol/server';
import { anonymousPrincipal, errorMessage, requestGateway, type GatewayRequest, type Principal } from '@punk/lib';
import { permittedPrompts, permittedResources, permittedTools } from './auth/list-filter.js';
import { routeResource, routeTemplate, scopeKey, unservedServer, type CatalogView, type Scope } from './aggregate.js';
import { callDeadline } from './deadline.js';
import { streamWhenLong } from './stream-upgrade.js';
import { paginate } from './cursor.js';
import { toProtocolError } from './errors.js';
import { observeOperations } from './metrics.js';
import { SUPPORTED_VERSIONS } from './http.js';
import { callTool, getPrompt, readResource, viewFor, type Caller, type ForwardContext, type ForwardDeps } from './forward.js';
import type { SessionContext } from './session-context.js';

/**
 * Freshness hint of list results for 2026-07-28 clients (MCP 2026-07-28 `CacheableResult`), in milliseconds:
 * Punk sends `list_changed` when a list changes, so a minute of caching costs a client little. `private`:
 * lists depend on the caller (tools a principal may not call are left out).
 */
export const LIST_CACHE_HINT: CacheHint = { ttlMs: 60_000, cacheScope: 'private' };

/** What every built server shares: what forwarding needs (forward.ts), and the list methods' settings. */
export interface ServerDeps extends ForwardDeps {
  /** Items per page of the list methods (cursor.ts). */
  pageSize: number;
  /** Instructions replacing the upstreams' own, when set. */
  instructions?: string;
  /** Whether the endpoint advertises `logging` (2025 sessions also accept `logging/setLevel`). */
  logging: boolean;
  /**
   * How long a 2026-07-28 forwarded call runs, in milliseconds, before its answer switches to SSE with keep-alive
   * comments (stream-upgrade.ts): the keep-alive interval in response mode `auto`; absent in the other modes.
   */
  streamAfterMs?: number;
}

/** Capabilities advertised when the catalog cannot be read at construction time: every handler is then registered. */
const FALLBACK_CAPABILITIES = { tools: { listChanged: true }, resources: { listChanged: true }, prompts: { listChanged: true } } as const;

/**
 * Builds an SDK `Server` for one endpoint scope, with the capabilities of the
 * current catalog view (or all three when the catalog is unreachable) and a
 * handler per supported method. Never throws: catalog errors surface when a
 * method is called, as JSON-RPC errors (see errors.ts). A 2025-era session's
 * server also advertises `logging` and stores `logging/setLevel` in the session
 * (and passes it to the servers in scope that offer logging).
 *
 * Lists are paginated with self-contained cursors (cursor.ts) and carry
 * {@link LIST_CACHE_HINT} for 2026-07-28 clients; `tools/call` arguments are
 * checked against `inputSchema` and results against `outputSchema`
 * (validate.ts); `completion/complete` goes to the server owning the prompt
 * or resource template (aggregate.ts).
 */
export async function buildMcpServer(
  deps: ServerDeps,
  scope: Scope,
  session?: SessionContext,
  principal: Principal = anonymousPrincipal(deps.tenant),
): Promise<Server> {
  let capabilities: ServerCapabilities;
  let instructions = deps.instructions;
  let subscribable = false;
  try {
    const view = await deps.catalog.view(scope);
    capabilities = { ...view.capabilities };
    subscribable = view.servers.some((s) => (s.capabilities['resources'] as { subscribe?: unknown } | undefined)?.subscribe === true);
    instructions ??= instructionsOf(view, scope);
  } catch (error) {
    deps.log.warn({ err: errorMessage(error) }, 'catalog unavailable while building an MCP server; advertising every capability');
    capabilities = { ...FALLBACK_CAPABILITIES };
  }
  // 2025 sessions set a level with logging/setLevel; 2026 requests name one in their _meta (server/utilities/logging).
  if (deps.logging) capabilities.logging = {};
  // 2025 sessions subscribe with resources/subscribe, 2026 clients in subscriptions/listen (listen-subscriptions.ts).
  if (capabilities.resources && subscribable) capabilities.resources = { ...capabilities.resources, subscribe: true };
  const cacheHints = {
    'tools/list': LIST_CACHE_HINT,
    'prompts/list': LIST_CACHE_HINT,
    'resources/list': LIST_CACHE_HINT,
    'resources/templates/list': LIST_CACHE_HINT,
  };
  // The versions the HTTP layer accepts are the ones initialize may agree to (an older request gets a counter-offer).
  const server = new Server(deps.serverInfo, {
    capabilities,
    cacheHints,
    supportedProtocolVersions: [...(session?.protocolVersions ?? SUPPORTED_VERSIONS)],
    ...(instructions && { instructions }),
  });
  const endpoint = scopeKey(scope);
  const view = (method: string): Promise<CatalogView> => viewFor(deps, scope, method);
  if (session && deps.logging) {
    server.setRequestHandler('logging/setLevel', async (request) => {
      const { level } = request.params;
      await session.setLogLevel(level);
      await setUpstreamLogLevels(deps, await view('logging/setLevel'), session, level);
      return {};
    });
  }

  const caller: Caller = { scope, session, principal };
  /**
   * Serves one forwarded request with forward.ts: the SDK's context as forwarding sees it; a 2026-07-28 call still
   * running after one keep-alive interval answers as SSE, so its connection never stays idle.
   */
  const forwarded = async <T>(ctx: ServerContext, run: (context: ForwardContext) => Promise<T>): Promise<T> => {
    const stopStreaming =
      session || deps.streamAfterMs === undefined ? undefined : streamWhenLong(server.transport, deps.streamAfterMs, deps.log);
    try {
      return await run(forwardContextOf(ctx, session, server));
    } finally {
      stopStreaming?.();
    }
  };

  if (capabilities.tools) {
    server.setRequestHandler('tools/list', async (request) => {
      const current = await view('tools/list');
      // A server's own endpoint whose server failed answers why, not an empty list that looks complete.
      const failed = scope.kind === 'server' && current.servers[0]?.state === 'failed' ? unservedServer(current, '') : undefined;
      if (failed) throw new ProtocolError(ProtocolErrorCode.InternalError, failed.message, { server: failed.server.name });
      const page = paginate(
        { list: 'tools/list', endpoint },
        permittedTools(deps.policies, deps.tenant, session?.principal ?? principal, current),
        ([name]) => name,
        deps.pageSize,
        request.params?.cursor,
      );
      return {
        tools: page.items.map(([name, route]) => ({ ...route.tool, name }) as Tool),
        ...(page.nextCursor && { nextCursor: page.nextCursor }),
      };
    });
    server.setRequestHandler('tools/call', (request, ctx) =>
      forwarded(
        ctx,
        async (context) =>
          (await callTool(deps, caller, context, request.params, (result, outputSchema) =>
            server.projectCallToolResult(result as CallToolResult, outputSchema),
          )) as CallToolResult,
      ),
    );
  }

  if (capabilities.resources) {
    server.setRequestHandler('resources/list', async (request) => {
      const page = paginate(
        { list: 'resources/list', endpoint },
        permittedResources(deps.policies, deps.tenant, session?.principal ?? principal, await view('resources/list')),
        ([uri]) => uri,
        deps.pageSize,
        request.params?.cursor,
      );
      return { resources: page.items.map(([, r]) => r.resource as Resource), ...(page.nextCursor && { nextCursor: page.nextCursor }) };
    });
    server.setRequestHandler('resources/templates/list', async (request) => {
      const { templates } = await view('resources/templates/list');
      const page = paginate(
        { list: 'resources/templates/list', endpoint },
        templates,
        (t) => t.template.uriTemplate,
        deps.pageSize,
        request.params?.cursor,
      );
      return {
        resourceTemplates: page.items.map((t) => t.template as ResourceTemplateType),
        ...(page.nextCursor && { nextCursor: page.nextCursor }),
      };
    });
    server.setRequestHandler('resources/read', (request, ctx) =>
      forwarded(ctx, async (context) => (await readResource(deps, caller, context, request.params)) as ReadResourceResult),
    );
    if (session && subscribable) {
      server.setRequestHandler('resources/subscribe', async (request) => {
        const { uri } = request.params;
        const current = await view('resources/subscribe');
        const target = routeResource(current, uri) ?? (scope.kind === 'server' ? current.servers[0]?.name : undefined);
        if (!target) throw new ResourceNotFoundError(uri, `Resource ${uri} is not listed by any server of this endpoint`);
        const deadline = callDeadline(
          deps,
          current.servers.find((s) => s.name === target),
        );
        try {
          await requestGateway(deps.bus, { method: 'resources/subscribe', tenant: deps.tenant, server: target, uri }, deadline.waitMs);
        } catch (error) {
          throw toProtocolError(error, { method: 'resources/subscribe', server: target, target: uri, deadline });
        }
        await session.setSubscribed(uri, true);
        return {};
      });
      server.setRequestHandler('resources/unsubscribe', async (request) => {
        await session.setSubscribed(request.params.uri, false);
        return {};
      });
    }
  }

  if (capabilities.prompts) {
    server.setRequestHandler('prompts/list', async (request) => {
      const page = paginate(
        { list: 'prompts/list', endpoint },
        permittedPrompts(deps.policies, deps.tenant, session?.principal ?? principal, await view('prompts/list')),
        ([name]) => name,
        deps.pageSize,
        request.params?.cursor,
      );
      return {
        prompts: page.items.map(([name, route]) => ({ ...route.prompt, name })),
        ...(page.nextCursor && { nextCursor: page.nextCursor }),
      };
    });
    server.setRequestHandler('prompts/get', (request, ctx) =>
      forwarded(ctx, async (context) => (await getPrompt(deps, caller, context, request.params)) as GetPromptResult),
    );
  }

  if (capabilities.completions) {
    server.setRequestHandler('completion/complete', async (request) => {
      const { ref, argument, context } = request.params;
      const current = await view('completion/complete');
      let target: { server: string; ref: Record<string, unknown> } | undefined;
      if (ref.type === 'ref/prompt') {
        // A prompt the caller may not use is absent from its list, and unknown here too.
        const permitted = permittedPrompts(deps.policies, deps.tenant, session?.principal ?? principal, current);
        const route = permitted.find(([name]) => name === ref.name)?.[1];
        if (!route) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${ref.name}`, { prompt: ref.name });
        target = { server: route.server, ref: { ...ref, name: route.name } };
      } else {
        const owner = routeTemplate(current, ref.uri) ?? (scope.kind === 'server' ? current.servers[0]?.name : undefined);
        if (!owner) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown resource template: ${ref.uri}`, { uri: ref.uri });
        target = { server: owner, ref: { ...ref } };
      }
      // A server that does not offer completions has none to give (MCP 2025-11-25 server/utilities/completion).
      if (current.servers.find((s) => s.name === target.server)?.capabilities['completions'] === undefined) {
        return { completion: { values: [], hasMore: false } };
      }
      const caller = session?.principal ?? principal;
      const deadline = callDeadline(
        deps,
        current.servers.find((s) => s.name === target.server),
      );
      try {
        const message: GatewayRequest = {
          method: 'completion/complete',
          tenant: deps.tenant,
          server: target.server,
          principal: caller,
          runId: randomUUID(),
          ...(session && {
            sessionId: session.id,
            channel: { callId: randomUUID(), front: deps.channels.front, clientCapabilities: session.clientCapabilities },
          }),
          ref: target.ref as { type: string },
          argument: { ...argument },
          ...(context && { context: { ...context } }),
        };
        return (await requestGateway(deps.bus, message, deadline.waitMs)) as CompleteResult;
      } catch (error) {
        throw toProtocolError(error, {
          method: 'completion/complete',
          server: target.server,
          target: JSON.stringify(ref),
          deadline,
        });
      }
    });
  }
  observeOperations(server, deps.catalog, scope);
  return server;
}

/**
 * Passes a 2025-era session's `logging/setLevel` to every ready server in scope that offers logging
 * (MCP 2025-11-25 server/utilities/logging); the gateway applies it to the session's own connection of a
 * `per-client` server. A server that fails is logged and skipped: the level is the session's already.
 */
async function setUpstreamLogLevels(deps: ServerDeps, view: CatalogView, session: SessionContext, level: string): Promise<void> {
  const servers = view.servers.filter((s) => s.state === 'ready' && s.capabilities['logging'] !== undefined);
  await Promise.all(
    servers.map((s) =>
      requestGateway(
        deps.bus,
        {
          method: 'logging/setLevel',
          tenant: deps.tenant,
          server: s.name,
          principal: session.principal,
          runId: randomUUID(),
          sessionId: session.id,
          // A per-client upstream session opened by this request must know what the client declared (roots).
          channel: { callId: randomUUID(), front: deps.channels.front, clientCapabilities: session.clientCapabilities },
          level,
        },
        callDeadline(deps, s).waitMs,
      ).catch((error: unknown) =>
        deps.log.warn({ server: s.name, sessionId: session.id, err: errorMessage(error) }, 'logging/setLevel not applied upstream'),
      ),
    ),
  );
}

/**
 * The SDK's context of a request being served as forward.ts sees it: the session's revision (or the one the SDK
 * negotiated for a 2026-07-28 request), its notifications and server-to-client requests on the request's own response.
 */
function forwardContextOf(ctx: ServerContext, session: SessionContext | undefined, server: Server): ForwardContext {
  const echoed = ctx.mcpReq.requestState();
  return {
    id: ctx.mcpReq.id,
    meta: ctx.mcpReq._meta,
    envelope: ctx.mcpReq.envelope as Record<string, unknown> | undefined,
    protocolVersion: session?.protocolVersion ?? server.getNegotiatedProtocolVersion(),
    signal: ctx.mcpReq.signal,
    notify: (message) => ctx.mcpReq.notify(message as unknown as Notification),
    sendRequest: async (message) => {
      if (session) await session.sendRelated(message as JSONRPCMessage, ctx.mcpReq.id);
    },
    ...(typeof echoed === 'string' && { requestState: echoed }),
    ...(ctx.mcpReq.inputResponses !== undefined && { inputResponses: ctx.mcpReq.inputResponses as Record<string, unknown> }),
  };
}

/** Upstream instructions: as-is on a per-server endpoint, one headed section per server on `/mcp`. */
function instructionsOf(view: CatalogView, scope: Scope): string | undefined {
  const parts = view.servers
    .filter((s) => (s.state === 'ready' || s.state === 'idle') && s.instructions)
    .map((s) => ({ name: s.name, text: s.instructions! }));
  if (parts.length === 0) return undefined;
  if (scope.kind === 'server') return parts.map((p) => p.text).join('\n\n');
  return parts.map((p) => `## ${p.name} (tools and prompts named ${p.name}__*)\n${p.text}`).join('\n\n');
}
