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
  CLIENT_CAPABILITIES_META_KEY,
  isInputRequiredResult,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  Server,
  type CacheHint,
  type CallToolResult,
  type CompleteResult,
  type JSONRPCMessage,
  type Notification,
  type RequestId,
  type ServerContext,
  type GetPromptResult,
  type Implementation,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplateType,
  type ServerCapabilities,
  type Tool,
  type Transport,
} from '@modelcontextprotocol/server';
import {
  anonymousPrincipal,
  errorMessage,
  logLevelSchema,
  passesLogLevel,
  PunkError,
  requestGateway,
  sendInputResponse,
  type Bus,
  type GatewayRequest,
  type Logger,
  type LogLevel,
  type Principal,
  type TenantPolicies,
  UPSTREAM_INPUT_INSTANCE,
  UPSTREAM_INPUT_REQUIRED,
  namespacedName,
} from '@punk/lib';
import { permittedPrompts, permittedResources, permittedTools } from './auth/list-filter.js';
import {
  namespacedSuggestion,
  routeResource,
  routeTemplate,
  scopeKey,
  unservedServer,
  withheldTool,
  type CatalogView,
  type Scope,
} from './aggregate.js';
import type { TenantCatalog } from './catalog.js';
import type { CallChannels, CallSink } from './call-channel.js';
import type { GatewayCalls } from './gateway-calls.js';
import { cancelOnAbort, sessionCallId } from './cancellation.js';
import { callDeadline, type CallDeadline } from './deadline.js';
import { streamWhenLong } from './stream-upgrade.js';
import { paginate } from './cursor.js';
import { toProtocolError } from './errors.js';
import { observeOperations } from './metrics.js';
import { SUPPORTED_VERSIONS } from './http.js';

import type { RequestStateCodec, RequestStatePayload } from './request-state.js';
import type { ToolSchemaValidator } from './validate.js';

/** First protocol revision in which argument validation failures are tool errors (`isError: true`) rather than -32602 (SEP-1303). */
export const TOOL_ERROR_VALIDATION_SINCE = '2025-11-25';

/**
 * Freshness hint of list results for 2026-07-28 clients (MCP 2026-07-28 `CacheableResult`), in milliseconds:
 * Punk sends `list_changed` when a list changes, so a minute of caching costs a client little. `private`:
 * lists depend on the caller (tools a principal may not call are left out).
 */
export const LIST_CACHE_HINT: CacheHint = { ttlMs: 60_000, cacheScope: 'private' };

/** A gateway call as a handler fills it in; `forward` adds tenant, principal and runId. */
type ForwardedRequest =
  Extract<GatewayRequest, { method: 'tools/call' | 'resources/read' | 'prompts/get' }> extends infer R
    ? R extends unknown
      ? Omit<R, 'tenant' | 'principal' | 'runId'>
      : never
    : never;

/** What every built server shares. */
export interface ServerDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  /** The compiled McpPolicy objects that list filtering evaluates (list-filter.ts). */
  policies: TenantPolicies;
  /** Deadline of a call to a server without `spec.timeout`, in milliseconds (deadline.ts). */
  callTimeoutMs: number;
  catalog: TenantCatalog;
  /** This replica's call channels (one subscription for all its calls). */
  channels: CallChannels;
  /** This replica's forwarded calls, answered at once when their gateway replica is lost. */
  calls: GatewayCalls;
  validator: ToolSchemaValidator;
  /** Items per page of the list methods (cursor.ts). */
  pageSize: number;
  serverInfo: Implementation;
  /** Instructions replacing the upstreams' own, when set. */
  instructions?: string;
  /** Whether the endpoint advertises `logging` (2025 sessions also accept `logging/setLevel`). */
  logging: boolean;
  /**
   * The front's deadline of single tools by namespaced name (`server__tool`), in milliseconds, instead of
   * the server's (the gateway's per-server timeout still bounds the upstream call itself: deadline.ts).
   */
  toolTimeouts: Record<string, number>;
  /** Mints and verifies the `requestState` of input_required results bridged to 2026-07-28 clients. */
  requestState: RequestStateCodec;
  /**
   * How long a 2026-07-28 forwarded call runs, in milliseconds, before its answer switches to SSE with keep-alive
   * comments (stream-upgrade.ts): the keep-alive interval in response mode `auto`; absent in the other modes.
   */
  streamAfterMs?: number;
}

/**
 * The 2025-era session a server is built for (absent for 2026-era requests).
 * Each request of a session gets a fresh server, so everything the session
 * negotiated comes from its stored state.
 */
export interface SessionContext {
  /** The `Mcp-Session-Id`; forwarded calls carry it. */
  id: string;
  /** Who owns the session; forwarded calls act as this principal. */
  principal: Principal;
  /** Version negotiated by `initialize`; absent while `initialize` itself is served. */
  protocolVersion?: string;
  /** The threshold the client set with `logging/setLevel`, if any; forwarded calls carry it as the request's log level. */
  logLevel?: LogLevel;
  /** Stores the threshold of `logging/setLevel` (MCP 2025-11-25 server/utilities/logging). */
  setLogLevel(level: LogLevel): Promise<void>;
  /** Capabilities the client declared in `initialize` (empty while `initialize` itself is served). */
  clientCapabilities: Record<string, unknown>;
  /**
   * Writes a message on the response stream of the request `relatedRequestId` being served
   * (a server-to-client request relayed from an upstream: call-channel.ts).
   */
  sendRelated(message: JSONRPCMessage, relatedRequestId: RequestId): Promise<void>;
  /** Adds (`on`) or removes a URI from the session's stored subscriptions (MCP 2025-11-25 server/resources "Subscriptions"). */
  setSubscribed(uri: string, on: boolean): Promise<void>;
  /** Versions `initialize` may agree to; absent: every version the HTTP layer accepts (an HTTP+SSE session's add 2024-11-05). */
  protocolVersions?: readonly string[];
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
  const view = async (method: string): Promise<CatalogView> => {
    try {
      return await deps.catalog.view(scope);
    } catch (error) {
      throw toProtocolError(error, { method });
    }
  };
  if (session && deps.logging) {
    server.setRequestHandler('logging/setLevel', async (request) => {
      const { level } = request.params;
      await session.setLogLevel(level);
      await setUpstreamLogLevels(deps, await view('logging/setLevel'), session, level);
      return {};
    });
  }

  /**
   * Forwards one call to the gateway; errors become JSON-RPC errors naming the server. A session's call
   * listens on its channel meanwhile, so the upstream's progress and requests reach the client on this POST.
   */
  const forward = async (request: ForwardedRequest, target: string, ctx: ServerContext, retrySafe: boolean): Promise<unknown> => {
    const entry = (await view(request.method)).servers.find((s) => s.name === request.server);
    const deadline = callDeadline(deps, entry, request.method === 'tools/call' ? namespacedName(request.server, request.name) : undefined);
    if (!session) return forwardModern(deps, principal, request, target, ctx, deadline, server.transport, retrySafe);
    try {
      const message = {
        ...request,
        ...withLogLevel(request._meta, session.logLevel),
        tenant: deps.tenant,
        principal: session.principal,
        runId: randomUUID(),
        sessionId: session.id,
      } as GatewayRequest;
      return await deps.calls.call(message, {
        // The call id follows from the request id, so a notifications/cancelled on any replica finds the call (cancellation.ts).
        callId: sessionCallId(session.id, ctx.mcpReq.id),
        clientCapabilities: session.clientCapabilities,
        sink: {
          notify: (message) => ctx.mcpReq.notify(message as unknown as Notification),
          request: (message) => session.sendRelated(message as JSONRPCMessage, ctx.mcpReq.id),
        },
        waitMs: deadline.waitMs,
        retrySafe,
        what: `${request.method} ${target} on server "${request.server}"`,
      });
    } catch (error) {
      throw toProtocolError(error, { method: request.method, server: request.server, target, deadline });
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
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const { name, arguments: args } = request.params;
      const current = await view('tools/call');
      const route = current.tools.resolve(name);
      if (!route) {
        // A tool withheld by the gateway (denied by the manifest, or awaiting an admin's review) answers why.
        const withheld = withheldTool(current, name);
        if (withheld) return { content: [{ type: 'text', text: withheld.message }], isError: true };
        // A tool of a server that is not running (failed, stopped, starting) says so, not "Unknown tool".
        const unserved = unservedServer(current, name);
        if (unserved) return { content: [{ type: 'text', text: `tool ${name} is not available: ${unserved.message}` }], isError: true };
        // On /mcp, an upstream name of one tool the caller may see suggests its exposed name.
        const suggestion = current.tools.namespaced
          ? namespacedSuggestion(permittedTools(deps.policies, deps.tenant, session?.principal ?? principal, current), name)
          : undefined;
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `Unknown tool: ${name}${suggestion === undefined ? '' : `; did you mean ${suggestion}?`}`,
          { tool: name, ...(suggestion !== undefined && { suggestion }) },
        );
      }
      const check = deps.validator.checkInput(name, route.tool.inputSchema, args);
      if (!check.ok) {
        const version = session?.protocolVersion ?? server.getNegotiatedProtocolVersion() ?? TOOL_ERROR_VALIDATION_SINCE;
        if (version >= TOOL_ERROR_VALIDATION_SINCE) {
          return { content: [{ type: 'text', text: check.message }], isError: true };
        }
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, check.message, { tool: name, field: check.field });
      }
      // MCP 2025-11-25 server/tools ToolAnnotations: calling a read-only or idempotent tool again does no more harm.
      const annotations = route.tool['annotations'] as { readOnlyHint?: unknown; idempotentHint?: unknown } | undefined;
      const result = await forward(
        { method: 'tools/call', server: route.server, name: route.name, ...(args && { arguments: args }), ...meta(ctx) },
        name,
        ctx,
        annotations?.readOnlyHint === true || annotations?.idempotentHint === true,
      );
      if (isInputRequiredResult(result)) return result;
      const outputSchema = route.tool['outputSchema'] as Record<string, unknown> | undefined;
      const output = deps.validator.checkOutput(name, outputSchema, result as Record<string, unknown>);
      // MCP 2025-11-25 server/tools "Output Schema": a result that breaks the schema is not passed on as valid.
      if (!output.ok) return { content: [{ type: 'text', text: output.message }], isError: true };
      return server.projectCallToolResult(result as CallToolResult, outputSchema);
    });
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
    server.setRequestHandler('resources/read', async (request, ctx) => {
      const { uri } = request.params;
      const current = await view('resources/read');
      // On a per-server endpoint every URI goes to that server: it may serve URIs it does not list.
      const target = routeResource(current, uri) ?? (scope.kind === 'server' ? current.servers[0]?.name : undefined);
      if (!target) throw new ResourceNotFoundError(uri, `Resource ${uri} is not listed by any server of this endpoint`);
      const result = await forward({ method: 'resources/read', server: target, uri, ...meta(ctx) }, uri, ctx, true);
      return result as ReadResourceResult;
    });
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
    server.setRequestHandler('prompts/get', async (request, ctx) => {
      const { name, arguments: args } = request.params;
      const route = (await view('prompts/get')).prompts.resolve(name);
      if (!route) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`, { prompt: name });
      const result = await forward(
        { method: 'prompts/get', server: route.server, name: route.name, ...(args && { arguments: args }), ...meta(ctx) },
        name,
        ctx,
        true,
      );
      return result as GetPromptResult;
    });
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
 * Forwards one call of a 2026-07-28 client (MCP 2026-07-28 basic/patterns/mrtr). A first request goes to
 * the gateway with a channel of era `2026` and the capabilities of the request's `_meta`; when the upstream
 * asks the client something, the gateway answers `input_required` and this adds a signed `requestState`
 * naming the pending request. A retry carrying `requestState` is verified (signature, expiry, method,
 * target, tenant, principal) and its `inputResponses` entry is sent to the gateway replica holding the
 * request, whose reply (the final result or the next `input_required`) is the answer. The state also names
 * the call (`callId`), so closing a retry's response stream cancels the upstream call too, and progress
 * reaches the retry's stream.
 * @throws ProtocolError -32602 for a bad or expired `requestState`, a missing `inputResponses` entry, or a
 *   pending request that no longer waits; otherwise the JSON-RPC error of the gateway's failure (errors.ts).
 */
async function forwardModern(
  deps: ServerDeps,
  principal: Principal,
  request: ForwardedRequest,
  target: string,
  ctx: ServerContext,
  deadline: CallDeadline,
  transport: Transport | undefined,
  retrySafe: boolean,
): Promise<unknown> {
  // A call still running after one keep-alive interval answers as SSE, so its connection never stays idle.
  const stopStreaming = deps.streamAfterMs === undefined ? undefined : streamWhenLong(transport, deps.streamAfterMs, deps.log);
  const echoed = ctx.mcpReq.requestState();
  const state = typeof echoed === 'string' ? verifiedState(deps, principal, request, target, echoed) : undefined;
  // A retry continues the call its requestState names (states minted before calls carried an id get a fresh one).
  const callId = state?.callId ?? randomUUID();
  // Closing the response stream cancels the request (MCP 2026-07-28): the gateway cancels the upstream call.
  const stopCancelling = cancelOnAbort(deps.bus, deps.log, ctx.mcpReq.signal, callId);
  // With a progress token or a log level, the upstream's progress and log messages reach the client on this
  // request's stream, until the reply (MCP 2026-07-28 basic/utilities/progress, server/utilities/logging).
  const envelopeLevel = logLevelSchema.safeParse((ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[LOG_LEVEL_META_KEY]).data;

  const streams = ctx.mcpReq._meta?.['progressToken'] !== undefined || envelopeLevel !== undefined;
  request = { ...request, ...withLogLevel(request._meta, envelopeLevel) };
  let result: unknown;
  try {
    if (state && state.upstreamState === undefined) {
      const answer = ctx.mcpReq.inputResponses?.[state.requestId];
      if (answer === undefined || typeof answer !== 'object' || answer === null) {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `inputResponses has no answer to input request ${state.requestId}, which requestState names`,
          { inputRequest: state.requestId },
        );
      }
      // The call's gateway replica publishes its progress on the channel of the front that sent the first request,
      // with the first request's progress token: this retry's stream carries it with the retry's own token.
      const progress =
        streams && state.front !== undefined && state.callId !== undefined
          ? await deps.channels.followChannel(
              state.front,
              state.callId,
              progressSink(deps.log, ctx, envelopeLevel, ctx.mcpReq._meta?.['progressToken']),
            )
          : undefined;
      try {
        result = await sendInputResponse(
          deps.bus,
          state.requestId,
          {
            caller: { tenant: principal.tenant, subject: principal.subject },
            response: { jsonrpc: '2.0', id: state.requestId, result: answer },
          },
          deadline.waitMs,
        );
      } catch (error) {
        if (error instanceof PunkError && (error.code === 'BusNoResponders' || error.code === 'CallerMismatch')) {
          throw new ProtocolError(
            ProtocolErrorCode.InvalidParams,
            `input request ${state.requestId} is no longer waiting for an answer (answered already, expired, or its gateway replica is gone): call again without requestState`,
            { inputRequest: state.requestId },
          );
        }
        throw toProtocolError(error, { method: request.method, server: request.server, target, deadline });
      } finally {
        await progress?.close();
      }
    } else {
      const clientCapabilities = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
      const message = {
        ...request,
        tenant: deps.tenant,
        principal,
        runId: randomUUID(),
        // A retry of the upstream's own input_required (or a call that brings answers unasked) takes them to the upstream.
        ...(ctx.mcpReq.inputResponses && { inputResponses: ctx.mcpReq.inputResponses }),
        ...(state?.upstreamState && { requestState: state.upstreamState }),
      } as GatewayRequest;
      try {
        result = await deps.calls.call(message, {
          callId,
          clientCapabilities:
            typeof clientCapabilities === 'object' && clientCapabilities !== null ? (clientCapabilities as Record<string, unknown>) : {},
          // The gateway holds a round no longer than the requestState minted for it can be retried.
          channel: { era: '2026', inputTtlMs: deps.requestState.ttlMs },
          ...(streams && { sink: progressSink(deps.log, ctx, envelopeLevel) }),
          waitMs: deadline.waitMs,
          retrySafe,
          ...(state?.instance !== undefined && { instanceId: state.instance }),
          what: `${request.method} ${target} on server "${request.server}"`,
        });
      } catch (error) {
        if (state?.instance !== undefined && error instanceof PunkError && error.code === 'BusNoResponders') {
          throw new ProtocolError(
            ProtocolErrorCode.InvalidParams,
            `the gateway replica running the server process that asked for this input is gone: call again without requestState`,
            { reason: 'invalid_request_state' },
          );
        }
        throw toProtocolError(error, { method: request.method, server: request.server, target, deadline });
      }
    }
  } finally {
    stopStreaming?.();
    stopCancelling();
  }
  if (!isInputRequiredResult(result)) return result;
  // Where the call's gateway replica publishes: the first request's front for a continued call, else this one.
  const channelFront = state && state.upstreamState === undefined ? (state.front ?? deps.channels.front) : deps.channels.front;
  const inputRequests = (result as { inputRequests?: Record<string, unknown> }).inputRequests ?? {};
  const upstream = result as Record<string, unknown>;
  if (upstream[UPSTREAM_INPUT_REQUIRED] === true) {
    // The upstream's own input_required: its keys go to the client; its requestState travels inside Punk's signed one.
    const upstreamState = typeof upstream['requestState'] === 'string' ? upstream['requestState'] : '';
    const instance = upstream[UPSTREAM_INPUT_INSTANCE];
    const requestState = deps.requestState.mint({
      requestId: '',
      upstreamState,
      // A server process of one gateway replica asked: the retry goes back to that replica.
      ...(typeof instance === 'string' && { instance }),
      callId,
      front: channelFront,
      method: request.method,
      target,
      tenant: deps.tenant,
      principal: principal.subject,
    });
    return { resultType: 'input_required', inputRequests, requestState };
  }
  const [requestId] = Object.keys(inputRequests);
  if (requestId === undefined)
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'the gateway answered input_required without an input request');
  const requestState = deps.requestState.mint({
    requestId,
    callId,
    front: channelFront,
    method: request.method,
    target,
    tenant: deps.tenant,
    principal: principal.subject,
  });
  return { resultType: 'input_required', inputRequests, requestState };
}

/**
 * The `requestState` a 2026-07-28 client echoed, verified (signature, expiry) and checked against the retried
 * request: same method and target, same tenant and principal.
 * @throws ProtocolError -32602 naming what does not match (and those of `RequestStateCodec.verify`).
 */
function verifiedState(
  deps: ServerDeps,
  principal: Principal,
  request: ForwardedRequest,
  target: string,
  echoed: string,
): RequestStatePayload {
  const state = deps.requestState.verify(echoed);
  if (state.method !== request.method || state.target !== target) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `requestState was minted for ${state.method} ${state.target}, not for ${request.method} ${target}`,
      { reason: 'invalid_request_state' },
    );
  }
  if (state.tenant !== deps.tenant || state.principal !== principal.subject) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'requestState was minted for another caller', {
      reason: 'invalid_request_state',
    });
  }
  return state;
}

/**
 * Where the messages of a 2026-07-28 call's channel go: `notifications/progress` onto the request's response
 * stream (MCP 2026-07-28 basic/utilities/progress), and `notifications/message` at or above the request's log
 * level when it set one; anything else has no place in that era and is dropped (server-to-client requests
 * arrive as input_required results instead). With `progressToken`, progress goes out with that token (a retry's own,
 * for progress of the call it continues).
 */
function progressSink(log: Logger, ctx: ServerContext, logLevel: LogLevel | undefined, progressToken?: unknown): CallSink {
  return {
    notify: async (message) => {
      const method = message['method'];
      const params = message['params'] as { level?: unknown } | undefined;
      if (method === 'notifications/progress' && progressToken !== undefined) {
        await ctx.mcpReq.notify({ ...message, params: { ...params, progressToken } } as unknown as Notification);
      } else if (
        method === 'notifications/progress' ||
        (method === 'notifications/message' && logLevel !== undefined && passesLogLevel(params?.level, logLevel))
      ) {
        await ctx.mcpReq.notify(message as unknown as Notification);
      } else log.debug({ method }, 'a notification for a 2026-07-28 client was dropped');
    },
    request: async (message) => log.debug({ method: message['method'] }, 'a request for a 2026-07-28 client was dropped'),
  };
}

/**
 * `_meta` with the request's log level (`io.modelcontextprotocol/logLevel`) added when the client set one and
 * the request does not name one itself; the gateway then relays upstream log messages at or above it.
 */
function withLogLevel(meta: Record<string, unknown> | undefined, level: LogLevel | undefined): { _meta?: Record<string, unknown> } {
  if (level === undefined || meta?.[LOG_LEVEL_META_KEY] !== undefined) return meta ? { _meta: meta } : {};
  return { _meta: { ...meta, [LOG_LEVEL_META_KEY]: level } };
}

/** The client `_meta` a forwarded call carries. */
function meta(ctx: { mcpReq: { _meta?: Record<string, unknown> } }): { _meta?: Record<string, unknown> } {
  return ctx.mcpReq._meta ? { _meta: { ...ctx.mcpReq._meta } } : {};
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
