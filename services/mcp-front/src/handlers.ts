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
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  Server,
  type CallToolResult,
  type JSONRPCMessage,
  type Notification,
  type RequestId,
  type ServerContext,
  type GetPromptResult,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplateType,
  type ServerCapabilities,
  type Tool,
} from '@modelcontextprotocol/server';
import {
  anonymousPrincipal,
  errorMessage,
  PunkError,
  requestGateway,
  sendInputResponse,
  type Bus,
  type GatewayRequest,
  type Logger,
  type LogLevel,
  type Principal,
} from '@punk/lib';
import { routeResource, type CatalogView, type Scope } from './aggregate.js';
import type { TenantCatalog } from './catalog.js';
import { openCallChannel, type OpenCallChannel } from './call-channel.js';
import { toProtocolError } from './errors.js';
import type { RequestStateCodec } from './request-state.js';
import type { ToolInputValidator } from './validate.js';

/** First protocol revision in which argument validation failures are tool errors (`isError: true`) rather than -32602 (SEP-1303). */
export const TOOL_ERROR_VALIDATION_SINCE = '2025-11-25';

/** A gateway call as a handler fills it in; `forward` adds tenant, principal and runId. */
type ForwardedRequest = Extract<GatewayRequest, { method: 'tools/call' | 'resources/read' | 'prompts/get' }> extends infer R
  ? R extends unknown
    ? Omit<R, 'tenant' | 'principal' | 'runId'>
    : never
  : never;

/** What every built server shares. */
export interface ServerDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  /** Deadline of a forwarded call on the bus, in milliseconds. */
  callTimeoutMs: number;
  catalog: TenantCatalog;
  validator: ToolInputValidator;
  serverInfo: { name: string; version: string };
  /** Mints and verifies the `requestState` of input_required results bridged to 2026-07-28 clients. */
  requestState: RequestStateCodec;
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
}

/** Capabilities advertised when the catalog cannot be read at construction time: every handler is then registered. */
const FALLBACK_CAPABILITIES = { tools: { listChanged: true }, resources: { listChanged: true }, prompts: { listChanged: true } } as const;

/**
 * Builds an SDK `Server` for one endpoint scope, with the capabilities of the
 * current catalog view (or all three when the catalog is unreachable) and a
 * handler per supported method. Never throws: catalog errors surface when a
 * method is called, as JSON-RPC errors (see errors.ts). A 2025-era session's
 * server also advertises `logging` and stores `logging/setLevel` in the session.
 */
export async function buildMcpServer(deps: ServerDeps, scope: Scope, session?: SessionContext): Promise<Server> {
  let capabilities: ServerCapabilities;
  let instructions: string | undefined;
  let subscribable = false;
  try {
    const view = await deps.catalog.view(scope);
    capabilities = { ...view.capabilities };
    subscribable = view.servers.some(s => (s.capabilities['resources'] as { subscribe?: unknown } | undefined)?.subscribe === true);
    instructions = instructionsOf(view, scope);
  } catch (error) {
    deps.log.warn({ err: errorMessage(error) }, 'catalog unavailable while building an MCP server; advertising every capability');
    capabilities = { ...FALLBACK_CAPABILITIES };
  }
  if (session) capabilities.logging = {};
  if (session && capabilities.resources && subscribable) capabilities.resources = { ...capabilities.resources, subscribe: true };
  const server = new Server(deps.serverInfo, { capabilities, ...(instructions && { instructions }) });
  if (session) {
    server.setRequestHandler('logging/setLevel', async request => {
      await session.setLogLevel(request.params.level);
      return {};
    });
  }
  const view = async (method: string): Promise<CatalogView> => {
    try {
      return await deps.catalog.view(scope);
    } catch (error) {
      throw toProtocolError(error, { method });
    }
  };

  /**
   * Forwards one call to the gateway; errors become JSON-RPC errors naming the server. A session's call
   * listens on its channel meanwhile, so the upstream's progress and requests reach the client on this POST.
   */
  const forward = async (request: ForwardedRequest, target: string, ctx: ServerContext): Promise<unknown> => {
    if (!session) return forwardModern(deps, request, target, ctx);
    const principal = session.principal;
    let open: OpenCallChannel | undefined;
    try {
      if (session) {
        open = await openCallChannel(deps.bus, deps.log, session.clientCapabilities, {
          notify: message => ctx.mcpReq.notify(message as unknown as Notification),
          request: message => session.sendRelated(message as JSONRPCMessage, ctx.mcpReq.id),
        });
      }
      const message = {
        ...request,
        tenant: deps.tenant,
        principal,
        runId: randomUUID(),
        ...(session && { sessionId: session.id }),
        ...(open && { channel: open.channel }),
      } as GatewayRequest;
      return await requestGateway(deps.bus, message, deps.callTimeoutMs);
    } catch (error) {
      throw toProtocolError(error, { method: request.method, server: request.server, target, timeoutMs: deps.callTimeoutMs });
    } finally {
      await open?.close();
    }
  };

  if (capabilities.tools) {
    server.setRequestHandler('tools/list', async () => {
      const { tools } = await view('tools/list');
      return { tools: [...tools.entries()].map(([name, route]) => ({ ...route.tool, name }) as Tool) };
    });
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const { name, arguments: args } = request.params;
      const route = (await view('tools/call')).tools.resolve(name);
      if (!route) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}`, { tool: name });
      const check = deps.validator.check(name, route.tool.inputSchema, args);
      if (!check.ok) {
        const version = session?.protocolVersion ?? server.getNegotiatedProtocolVersion() ?? TOOL_ERROR_VALIDATION_SINCE;
        if (version >= TOOL_ERROR_VALIDATION_SINCE) {
          return { content: [{ type: 'text', text: check.message }], isError: true };
        }
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, check.message, { tool: name, field: check.field });
      }
      const result = await forward(
        { method: 'tools/call', server: route.server, name: route.name, ...(args && { arguments: args }), ...meta(ctx) },
        name,
        ctx,
      );
      if (isInputRequiredResult(result)) return result as unknown as CallToolResult;
      const outputSchema = route.tool['outputSchema'] as Record<string, unknown> | undefined;
      return server.projectCallToolResult(result as CallToolResult, outputSchema);
    });
  }

  if (capabilities.resources) {
    server.setRequestHandler('resources/list', async () => {
      const { resources } = await view('resources/list');
      return { resources: [...resources.values()].map(r => r.resource as Resource) };
    });
    server.setRequestHandler('resources/templates/list', async () => {
      const { templates } = await view('resources/templates/list');
      return { resourceTemplates: templates.map(t => t.template as ResourceTemplateType) };
    });
    server.setRequestHandler('resources/read', async (request, ctx) => {
      const { uri } = request.params;
      const current = await view('resources/read');
      // On a per-server endpoint every URI goes to that server: it may serve URIs it does not list.
      const target = routeResource(current, uri) ?? (scope.kind === 'server' ? current.servers[0]?.name : undefined);
      if (!target) throw new ResourceNotFoundError(uri, `Resource ${uri} is not listed by any server of this endpoint`);
      const result = await forward({ method: 'resources/read', server: target, uri, ...meta(ctx) }, uri, ctx);
      return result as ReadResourceResult;
    });
    if (session && subscribable) {
      server.setRequestHandler('resources/subscribe', async request => {
        const { uri } = request.params;
        const current = await view('resources/subscribe');
        const target = routeResource(current, uri) ?? (scope.kind === 'server' ? current.servers[0]?.name : undefined);
        if (!target) throw new ResourceNotFoundError(uri, `Resource ${uri} is not listed by any server of this endpoint`);
        try {
          await requestGateway(deps.bus, { method: 'resources/subscribe', tenant: deps.tenant, server: target, uri }, deps.callTimeoutMs);
        } catch (error) {
          throw toProtocolError(error, { method: 'resources/subscribe', server: target, target: uri, timeoutMs: deps.callTimeoutMs });
        }
        await session.setSubscribed(uri, true);
        return {};
      });
      server.setRequestHandler('resources/unsubscribe', async request => {
        await session.setSubscribed(request.params.uri, false);
        return {};
      });
    }
  }

  if (capabilities.prompts) {
    server.setRequestHandler('prompts/list', async () => {
      const { prompts } = await view('prompts/list');
      return { prompts: [...prompts.entries()].map(([name, route]) => ({ ...route.prompt, name }) as Prompt) };
    });
    server.setRequestHandler('prompts/get', async (request, ctx) => {
      const { name, arguments: args } = request.params;
      const route = (await view('prompts/get')).prompts.resolve(name);
      if (!route) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`, { prompt: name });
      const result = await forward(
        { method: 'prompts/get', server: route.server, name: route.name, ...(args && { arguments: args }), ...meta(ctx) },
        name,
        ctx,
      );
      return result as GetPromptResult;
    });
  }
  return server;
}

/**
 * Forwards one call of a 2026-07-28 client (MCP 2026-07-28 basic/patterns/mrtr). A first request goes to
 * the gateway with a channel of era `2026` and the capabilities of the request's `_meta`; when the upstream
 * asks the client something, the gateway answers `input_required` and this adds a signed `requestState`
 * naming the pending request. A retry carrying `requestState` is verified (signature, expiry, method,
 * target, tenant, principal) and its `inputResponses` entry is sent to the gateway replica holding the
 * request, whose reply (the final result or the next `input_required`) is the answer.
 * @throws ProtocolError -32602 for a bad or expired `requestState`, a missing `inputResponses` entry, or a
 *   pending request that no longer waits; otherwise the JSON-RPC error of the gateway's failure (errors.ts).
 */
async function forwardModern(deps: ServerDeps, request: ForwardedRequest, target: string, ctx: ServerContext): Promise<unknown> {
  const principal = anonymousPrincipal(deps.tenant);
  const echoed = ctx.mcpReq.requestState();
  let result: unknown;
  if (typeof echoed === 'string') {
    const state = deps.requestState.verify(echoed);
    if (state.method !== request.method || state.target !== target) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `requestState was minted for ${state.method} ${state.target}, not for ${request.method} ${target}`, { reason: 'invalid_request_state' });
    }
    if (state.tenant !== deps.tenant || state.principal !== principal.subject) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'requestState was minted for another caller', { reason: 'invalid_request_state' });
    }
    const answer = ctx.mcpReq.inputResponses?.[state.requestId];
    if (answer === undefined || typeof answer !== 'object' || answer === null) {
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `inputResponses has no answer to input request ${state.requestId}, which requestState names`, { inputRequest: state.requestId });
    }
    try {
      result = await sendInputResponse(
        deps.bus,
        state.requestId,
        { caller: { tenant: principal.tenant, subject: principal.subject }, response: { jsonrpc: '2.0', id: state.requestId, result: answer } },
        deps.callTimeoutMs,
      );
    } catch (error) {
      if (error instanceof PunkError && (error.code === 'BusNoResponders' || error.code === 'CallerMismatch')) {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `input request ${state.requestId} is no longer waiting for an answer (answered already, expired, or its gateway replica is gone): call again without requestState`,
          { inputRequest: state.requestId },
        );
      }
      throw toProtocolError(error, { method: request.method, server: request.server, target, timeoutMs: deps.callTimeoutMs });
    }
  } else {
    const clientCapabilities = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
    const message = {
      ...request,
      tenant: deps.tenant,
      principal,
      runId: randomUUID(),
      channel: { callId: randomUUID(), clientCapabilities: typeof clientCapabilities === 'object' && clientCapabilities !== null ? clientCapabilities : {}, era: '2026' },
    } as GatewayRequest;
    try {
      result = await requestGateway(deps.bus, message, deps.callTimeoutMs);
    } catch (error) {
      throw toProtocolError(error, { method: request.method, server: request.server, target, timeoutMs: deps.callTimeoutMs });
    }
  }
  if (!isInputRequiredResult(result)) return result;
  const inputRequests = (result as { inputRequests?: Record<string, unknown> }).inputRequests ?? {};
  const [requestId] = Object.keys(inputRequests);
  if (requestId === undefined) throw new ProtocolError(ProtocolErrorCode.InternalError, 'the gateway answered input_required without an input request');
  const requestState = deps.requestState.mint({ requestId, method: request.method, target, tenant: deps.tenant, principal: principal.subject });
  return { resultType: 'input_required', inputRequests, requestState };
}

/** The client `_meta` a forwarded call carries. */
function meta(ctx: { mcpReq: { _meta?: Record<string, unknown> } }): { _meta?: Record<string, unknown> } {
  return ctx.mcpReq._meta ? { _meta: { ...ctx.mcpReq._meta } } : {};
}

/** Upstream instructions: as-is on a per-server endpoint, one headed section per server on `/mcp`. */
function instructionsOf(view: CatalogView, scope: Scope): string | undefined {
  const parts = view.servers.filter(s => s.state === 'ready' && s.instructions).map(s => ({ name: s.name, text: s.instructions! }));
  if (parts.length === 0) return undefined;
  if (scope.kind === 'server') return parts.map(p => p.text).join('\n\n');
  return parts.map(p => `## ${p.name} (tools and prompts named ${p.name}__*)\n${p.text}`).join('\n\n');
}
