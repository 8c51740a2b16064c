/**
 * The forwarded methods (`tools/call`, `resources/read`, `prompts/get`; MCP 2025-11-25 server/tools,
 * server/resources, server/prompts) whatever serves the HTTP request: the SDK server of handlers.ts, or the fast
 * path of fast-path.ts. Each routes the request on the endpoint's catalog view, checks it (a tool's arguments against
 * its `inputSchema`, its result against its `outputSchema`: validate.ts), and forwards it to the gateway
 * (`punk.gateway.call`) with a channel, so the upstream's progress and requests reach the client on the request's
 * own response while it runs. A 2026-07-28 request may be answered `input_required` (MCP 2026-07-28
 * basic/patterns/mrtr) with a signed `requestState` (request-state.ts).
 *
 * Outcomes are results or `ProtocolError`s (errors.ts maps the gateway's failures); what serves the request encodes
 * them for its client's era.
 */
import { randomUUID } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  isInputRequiredResult,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  type Implementation,
  type RequestId,
} from '@modelcontextprotocol/server';
import {
  logLevelSchema,
  namespacedName,
  passesLogLevel,
  PunkError,
  sendInputResponse,
  UPSTREAM_INPUT_INSTANCE,
  UPSTREAM_INPUT_REQUIRED,
  type Bus,
  type GatewayRequest,
  type Logger,
  type LogLevel,
  type Principal,
  type TenantPolicies,
} from '@punk/lib';
import { namespacedSuggestion, routeResource, unservedServer, withheldTool, type CatalogView, type Scope } from './aggregate.js';
import { callerToken } from './auth/caller-token.js';
import { permittedTools } from './auth/list-filter.js';
import type { ExchangeTarget, TokenExchange } from './auth/token-exchange.js';
import type { CallChannels, CallSink } from './call-channel.js';
import { cancelOnAbort, sessionCallId } from './cancellation.js';
import type { TenantCatalog } from './catalog.js';
import { callDeadline, type CallDeadline } from './deadline.js';
import { connectionAnswer } from './connect-required.js';
import { toProtocolError } from './errors.js';
import type { GatewayCalls } from './gateway-calls.js';
import type { RequestStateCodec, RequestStatePayload } from './request-state.js';
import type { SessionContext } from './session-context.js';
import type { ToolSchemaValidator } from './validate.js';

/** First protocol revision in which argument validation failures are tool errors (`isError: true`) rather than -32602 (SEP-1303). */
export const TOOL_ERROR_VALIDATION_SINCE = '2025-11-25';

/** What forwarding needs of the front. */
export interface ForwardDeps {
  bus: Bus;
  log: Logger;
  tenant: string;
  /** The compiled McpPolicy objects that list filtering evaluates (list-filter.ts). */
  policies: TenantPolicies;
  /** Deadline of a call to a server without `spec.timeout`, in milliseconds (deadline.ts). */
  callTimeoutMs: number;
  /** The front's deadline of single tools by namespaced name (`server__tool`), in milliseconds (deadline.ts). */
  toolTimeouts: Record<string, number>;
  catalog: TenantCatalog;
  /** Exchanges callers' OAuth tokens for servers with `spec.auth.tokenExchange`; absent without Punk's OAuth client. */
  tokenExchange?: TokenExchange | undefined;
  /** `PUNK_PUBLIC_URL`: the base of the connect page a call without a per-user connection points at (connect-required.ts). */
  publicUrl?: string | undefined;
  /** This replica's call channels (one subscription for all its calls). */
  channels: CallChannels;
  /** This replica's forwarded calls, answered at once when their gateway replica is lost. */
  calls: GatewayCalls;
  validator: ToolSchemaValidator;
  /** Mints and verifies the `requestState` of input_required results bridged to 2026-07-28 clients. */
  requestState: RequestStateCodec;
  serverInfo: Implementation;
}

/** Who asks: the endpoint scope, and the 2025-era session or the 2026-era request's principal. */
export interface Caller {
  scope: Scope;
  /** The 2025-era session the request belongs to; absent for a 2026-07-28 request. */
  session?: SessionContext | undefined;
  /** Who calls when there is no session. */
  principal: Principal;
}

/** The request being answered, as forwarding needs it (handlers.ts builds it from the SDK's context, fast-path.ts from the body). */
export interface ForwardContext {
  /** The JSON-RPC request id. */
  id: RequestId;
  /** `params._meta` as the client sent it, without the 2026-07-28 envelope's keys (undefined when nothing else is left). */
  meta: Record<string, unknown> | undefined;
  /** The 2026-07-28 envelope's keys of `params._meta` (protocol version, client info and capabilities, log level), when any. */
  envelope?: Record<string, unknown> | undefined;
  /** The revision the request is served in: its session's, or the 2026-07-28 request's; undefined while unknown. */
  protocolVersion: string | undefined;
  /** Aborts when the request is given up (2026-07-28: its response stream closed, which cancels the call). */
  signal: AbortSignal;
  /** Writes a notification related to the request on its response (progress, log messages). */
  notify(message: Record<string, unknown>): Promise<void>;
  /** Writes a server-to-client request related to the request on its response (a 2025 session's upstream asks). */
  sendRequest(message: Record<string, unknown>): Promise<void>;
  /** A 2026-07-28 request's retry: the `requestState` it echoes. */
  requestState?: string | undefined;
  /** A 2026-07-28 request's `inputResponses`. */
  inputResponses?: Record<string, unknown> | undefined;
}

/** A gateway call as a handler fills it in; forwarding adds tenant, principal and runId. */
type ForwardedRequest =
  Extract<GatewayRequest, { method: 'tools/call' | 'resources/read' | 'prompts/get' }> extends infer R
    ? R extends unknown
      ? Omit<R, 'tenant' | 'principal' | 'runId'>
      : never
    : never;

/**
 * The projection of a tool result for the client's era (the SDK's `projectCallToolResult`: a non-object
 * `structuredContent` gets a text fallback, and is wrapped for a 2025-era client).
 */
export type ProjectToolResult = (
  result: Record<string, unknown>,
  outputSchema: Record<string, unknown> | undefined,
) => Record<string, unknown>;

/** The endpoint's catalog view; a catalog failure is the JSON-RPC error of `method`. */
export async function viewFor(deps: ForwardDeps, scope: Scope, method: string): Promise<CatalogView> {
  try {
    return await deps.catalog.view(scope);
  } catch (error) {
    throw toProtocolError(error, { method });
  }
}

/**
 * `tools/call`: a tool withheld, of a server failed or stopped, or with arguments that break its `inputSchema` is a
 * tool error (before 2025-11-25 an argument error is -32602); one of a server still starting waits for the start (the
 * gateway checks it once the server is listed); an unknown one is -32602 (with a suggestion on `/mcp`);
 * a result that breaks the tool's `outputSchema` is a tool error; else the upstream's result, projected.
 * @throws ProtocolError as the module comment says.
 */
export async function callTool(
  deps: ForwardDeps,
  caller: Caller,
  ctx: ForwardContext,
  params: { name: string; arguments?: Record<string, unknown> | undefined },
  project: ProjectToolResult,
): Promise<Record<string, unknown>> {
  const { name, arguments: args } = params;
  const current = await viewFor(deps, caller.scope, 'tools/call');
  const route = current.tools.resolve(name);
  const principal = caller.session?.principal ?? caller.principal;
  if (!route) {
    // A tool withheld by the gateway (denied by the manifest, or awaiting an admin's review) answers why.
    const withheld = withheldTool(current, name);
    if (withheld) return { content: [{ type: 'text', text: withheld.message }], isError: true };
    const unserved = unservedServer(current, name);
    // A tool of a server still starting, not listed yet: the call waits for the start at the gateway (bounded by the
    // server's start budget, deadline.ts), which then checks the tool against the server's listing.
    if (unserved?.server.state === 'starting') {
      const server = unserved.server.name;
      const upstreamName = current.tools.namespaced ? name.slice(namespacedName(server, '').length) : name;
      const request = { method: 'tools/call', server, name: upstreamName, ...(args && { arguments: args }), ...metaOf(ctx) } as const;
      const result = (await forward(deps, caller, ctx, current, request, name, false)) as Record<string, unknown>;
      return isInputRequiredResult(result) ? result : project(result, undefined);
    }
    // A tool of a server that is not running (failed, stopped) says so, not "Unknown tool".
    if (unserved) return { content: [{ type: 'text', text: `tool ${name} is not available: ${unserved.message}` }], isError: true };
    // On /mcp, an upstream name of one tool the caller may see suggests its exposed name.
    const suggestion = current.tools.namespaced
      ? namespacedSuggestion(permittedTools(deps.policies, deps.tenant, principal, current), name)
      : undefined;
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Unknown tool: ${name}${suggestion === undefined ? '' : `; did you mean ${suggestion}?`}`,
      { tool: name, ...(suggestion !== undefined && { suggestion }) },
    );
  }
  const check = deps.validator.checkInput(name, route.tool.inputSchema, args);
  if (!check.ok) {
    if ((ctx.protocolVersion ?? TOOL_ERROR_VALIDATION_SINCE) >= TOOL_ERROR_VALIDATION_SINCE) {
      return { content: [{ type: 'text', text: check.message }], isError: true };
    }
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, check.message, { tool: name, field: check.field });
  }
  // MCP 2025-11-25 server/tools ToolAnnotations: calling a read-only or idempotent tool again does no more harm.
  const annotations = route.tool['annotations'] as { readOnlyHint?: unknown; idempotentHint?: unknown } | undefined;
  const result = (await forward(
    deps,
    caller,
    ctx,
    current,
    { method: 'tools/call', server: route.server, name: route.name, ...(args && { arguments: args }), ...metaOf(ctx) },
    name,
    annotations?.readOnlyHint === true || annotations?.idempotentHint === true,
  )) as Record<string, unknown>;
  if (isInputRequiredResult(result)) return result;
  const outputSchema = route.tool['outputSchema'] as Record<string, unknown> | undefined;
  const output = deps.validator.checkOutput(name, outputSchema, result);
  // MCP 2025-11-25 server/tools "Output Schema": a result that breaks the schema is not passed on as valid.
  if (!output.ok) return { content: [{ type: 'text', text: output.message }], isError: true };
  return project(result, outputSchema);
}

/**
 * `resources/read`: to the server listing the URI (on a per-server endpoint, to that server whatever the URI).
 * @throws ProtocolError -32002 (`ResourceNotFoundError`) for a URI no server of the endpoint lists, else as forwarding does.
 */
export async function readResource(
  deps: ForwardDeps,
  caller: Caller,
  ctx: ForwardContext,
  params: { uri: string },
): Promise<Record<string, unknown>> {
  const { uri } = params;
  const current = await viewFor(deps, caller.scope, 'resources/read');
  // On a per-server endpoint every URI goes to that server: it may serve URIs it does not list.
  const target = routeResource(current, uri) ?? (caller.scope.kind === 'server' ? current.servers[0]?.name : undefined);
  if (!target) throw new ResourceNotFoundError(uri, `Resource ${uri} is not listed by any server of this endpoint`);
  return (await forward(
    deps,
    caller,
    ctx,
    current,
    { method: 'resources/read', server: target, uri, ...metaOf(ctx) },
    uri,
    true,
  )) as Record<string, unknown>;
}

/**
 * `prompts/get`: to the server of the prompt's exposed name.
 * @throws ProtocolError -32602 for an unknown prompt, else as forwarding does.
 */
export async function getPrompt(
  deps: ForwardDeps,
  caller: Caller,
  ctx: ForwardContext,
  params: { name: string; arguments?: Record<string, string> | undefined },
): Promise<Record<string, unknown>> {
  const { name, arguments: args } = params;
  const current = await viewFor(deps, caller.scope, 'prompts/get');
  const route = current.prompts.resolve(name);
  if (!route) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown prompt: ${name}`, { prompt: name });
  return (await forward(
    deps,
    caller,
    ctx,
    current,
    { method: 'prompts/get', server: route.server, name: route.name, ...(args && { arguments: args }), ...metaOf(ctx) },
    name,
    true,
  )) as Record<string, unknown>;
}

/**
 * Forwards one call to the gateway; errors become JSON-RPC errors naming the server. A session's call listens on its
 * channel meanwhile, so the upstream's progress and requests reach the client on this request's response. A call to a
 * server with `spec.auth.tokenExchange` carries the token exchanged for its caller (docs/identity.md).
 */
async function forward(
  deps: ForwardDeps,
  caller: Caller,
  ctx: ForwardContext,
  view: CatalogView,
  request: ForwardedRequest,
  target: string,
  retrySafe: boolean,
): Promise<unknown> {
  const entry = view.servers.find((s) => s.name === request.server);
  const deadline = callDeadline(deps, entry, request.method === 'tools/call' ? namespacedName(request.server, request.name) : undefined);
  const { session } = caller;
  const exchange = entry?.tokenExchange;
  if (entry?.perUser) {
    try {
      return await send(deps, caller, ctx, request, target, deadline, retrySafe);
    } catch (error) {
      const envelope = ctx.envelope?.[CLIENT_CAPABILITIES_META_KEY];
      const capabilities =
        session?.clientCapabilities ??
        (typeof envelope === 'object' && envelope !== null ? (envelope as Record<string, unknown>) : undefined);
      const answer = connectionAnswer(error, request.method, deps.publicUrl, capabilities);
      if (answer) return answer;
      throw error;
    }
  }
  if (!exchange) return send(deps, caller, ctx, request, target, deadline, retrySafe);
  const principal = session?.principal ?? caller.principal;
  let exchanged: { accessToken: string; subject: string };
  try {
    exchanged = await exchangedToken(deps, request.server, exchange, principal);
  } catch (error) {
    throw toProtocolError(error, { method: request.method, server: request.server, target });
  }
  try {
    return await send(deps, caller, ctx, { ...request, exchangedToken: exchanged }, target, deadline, retrySafe);
  } catch (error) {
    // The upstream refused the exchanged token (HTTP 401): the next call exchanges again rather than reuse it.
    if (error instanceof ProtocolError && (error.data as { code?: unknown } | undefined)?.code === 'UpstreamUnauthorized')
      deps.tokenExchange?.forget(deps.tenant, request.server, principal.subject, exchange);
    throw error;
  }
}

/** Sends one call to the gateway: as a 2026-07-28 request, or on the caller's 2025-era session's channel. */
async function send(
  deps: ForwardDeps,
  caller: Caller,
  ctx: ForwardContext,
  request: ForwardedRequest,
  target: string,
  deadline: CallDeadline,
  retrySafe: boolean,
): Promise<unknown> {
  const { session } = caller;
  if (!session) return forwardModern(deps, caller.principal, request, target, ctx, deadline, retrySafe);
  try {
    const message = {
      ...request,
      ...withLogLevel(request._meta, session.logLevel),
      tenant: deps.tenant,
      principal: session.principal,
      runId: randomUUID(),
      sessionId: session.id,
      deadline,
    } as GatewayRequest;
    return await deps.calls.call(message, {
      // The call id follows from the request id, so a notifications/cancelled on any replica finds the call (cancellation.ts).
      callId: sessionCallId(session.id, ctx.id),
      clientCapabilities: session.clientCapabilities,
      sink: { notify: (message) => ctx.notify(message), request: (message) => ctx.sendRequest(message) },
      waitMs: deadline.waitMs,
      retrySafe,
      what: `${request.method} ${target} on server "${request.server}"`,
    });
  } catch (error) {
    throw toProtocolError(error, { method: request.method, server: request.server, target, deadline });
  }
}

/**
 * The token a call to `server` (with `spec.auth.tokenExchange`) carries upstream: the caller's OAuth access token of
 * this request exchanged for one of the server's audience (auth/token-exchange.ts), and the subject it is for.
 * @throws PunkError `TokenExchangeUnconfigured` when this front has no OAuth client of its own; `OAuthTokenRequired`
 *   when the caller signed in with no OAuth token (an API key); as {@link TokenExchange.tokenFor} otherwise.
 */
async function exchangedToken(
  deps: ForwardDeps,
  server: string,
  target: ExchangeTarget,
  principal: Principal,
): Promise<{ accessToken: string; subject: string }> {
  const exchange = deps.tokenExchange;
  if (!exchange) {
    throw new PunkError(
      'TokenExchangeUnconfigured',
      `server "${server}" declares spec.auth.tokenExchange, but this mcp-front has no OAuth client to exchange tokens with: set PUNK_AUTH_ISSUER, PUNK_OAUTH_CLIENT_ID and PUNK_OAUTH_CLIENT_SECRET`,
      { server },
    );
  }
  const subjectToken = callerToken();
  if (subjectToken === undefined) {
    throw new PunkError(
      'OAuthTokenRequired',
      `server "${server}" is called as its caller (spec.auth.tokenExchange: Punk exchanges the caller's OAuth access token for one of audience ${target.audience}), and caller ${principal.subject} signed in without an OAuth token (an API key); sign in with an access token of ${exchange.issuer} instead`,
      { server, subject: principal.subject },
    );
  }
  const accessToken = await exchange.tokenFor(deps.tenant, server, principal.subject, subjectToken, target);
  return { accessToken, subject: principal.subject };
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
  deps: ForwardDeps,
  principal: Principal,
  request: ForwardedRequest,
  target: string,
  ctx: ForwardContext,
  deadline: CallDeadline,
  retrySafe: boolean,
): Promise<unknown> {
  const state = ctx.requestState !== undefined ? verifiedState(deps, principal, request, target, ctx.requestState) : undefined;
  // A retry continues the call its requestState names (states minted before calls carried an id get a fresh one).
  const callId = state?.callId ?? randomUUID();
  // Closing the response stream cancels the request (MCP 2026-07-28): the gateway cancels the upstream call.
  const stopCancelling = cancelOnAbort(deps.bus, deps.log, ctx.signal, callId);
  // With a progress token or a log level, the upstream's progress and log messages reach the client on this
  // request's stream, until the reply (MCP 2026-07-28 basic/utilities/progress, server/utilities/logging).
  const requested = ctx.envelope?.[LOG_LEVEL_META_KEY];
  const envelopeLevel = requested === undefined ? undefined : logLevelSchema.safeParse(requested).data;
  const streams = ctx.meta?.['progressToken'] !== undefined || envelopeLevel !== undefined;
  request = { ...request, ...withLogLevel(request._meta, envelopeLevel) };
  let result: unknown;
  try {
    if (state && state.upstreamState === undefined) {
      const answer = ctx.inputResponses?.[state.requestId];
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
              progressSink(deps.log, ctx, envelopeLevel, ctx.meta?.['progressToken']),
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
      const clientCapabilities = ctx.envelope?.[CLIENT_CAPABILITIES_META_KEY];
      const message = {
        ...request,
        tenant: deps.tenant,
        principal,
        runId: randomUUID(),
        deadline,
        // A retry of the upstream's own input_required (or a call that brings answers unasked) takes them to the upstream.
        ...(ctx.inputResponses && { inputResponses: ctx.inputResponses }),
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
    stopCancelling();
  }
  if (!isInputRequiredResult(result)) return result;
  // Where the call's gateway replica publishes: the first request's front for a continued call, else this one.
  const channelFront = state && state.upstreamState === undefined ? (state.front ?? deps.channels.front) : deps.channels.front;
  const inputRequests = (result as { inputRequests?: Record<string, unknown> }).inputRequests ?? {};
  const upstream = result as Record<string, unknown>;
  // What the state binds the retry to: this call, its front, method and target, tenant and principal.
  const bound = { callId, front: channelFront, method: request.method, target, tenant: deps.tenant, principal: principal.subject };
  if (upstream[UPSTREAM_INPUT_REQUIRED] === true) {
    // The upstream's own input_required: its keys go to the client; its requestState travels inside Punk's signed one.
    const upstreamState = typeof upstream['requestState'] === 'string' ? upstream['requestState'] : '';
    const instance = upstream[UPSTREAM_INPUT_INSTANCE];
    const requestState = deps.requestState.mint({
      requestId: '',
      upstreamState,
      // A server process of one gateway replica asked: the retry goes back to that replica.
      ...(typeof instance === 'string' && { instance }),
      ...bound,
    });
    return { resultType: 'input_required', inputRequests, requestState };
  }
  const [requestId] = Object.keys(inputRequests);
  if (requestId === undefined)
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'the gateway answered input_required without an input request');
  const requestState = deps.requestState.mint({ requestId, ...bound });
  return { resultType: 'input_required', inputRequests, requestState };
}

/**
 * The `requestState` a 2026-07-28 client echoed, verified (signature, expiry) and checked against the retried
 * request: same method and target, same tenant and principal.
 * @throws ProtocolError -32602 naming what does not match (and those of `RequestStateCodec.verify`).
 */
function verifiedState(
  deps: ForwardDeps,
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
function progressSink(log: Logger, ctx: ForwardContext, logLevel: LogLevel | undefined, progressToken?: unknown): CallSink {
  return {
    notify: async (message) => {
      const method = message['method'];
      const params = message['params'] as { level?: unknown } | undefined;
      if (method === 'notifications/progress' && progressToken !== undefined) {
        await ctx.notify({ ...message, params: { ...params, progressToken } });
      } else if (
        method === 'notifications/progress' ||
        (method === 'notifications/message' && logLevel !== undefined && passesLogLevel(params?.level, logLevel))
      ) {
        await ctx.notify(message);
      } else log.debug({ method }, 'a notification for a 2026-07-28 client was dropped');
    },
    request: async (message) => log.debug({ method: message['method'] }, 'a request for a 2026-07-28 client was dropped'),
  };
}

/**
 * `_meta` with the request's log level (`io.modelcontextprotocol/logLevel`) added when the client set one and
 * the request does not name one itself; the gateway then relays upstream log messages at or above it.
 */
export function withLogLevel(meta: Record<string, unknown> | undefined, level: LogLevel | undefined): { _meta?: Record<string, unknown> } {
  if (level === undefined || meta?.[LOG_LEVEL_META_KEY] !== undefined) return meta ? { _meta: meta } : {};
  return { _meta: { ...meta, [LOG_LEVEL_META_KEY]: level } };
}

/** The client `_meta` a forwarded call carries. */
function metaOf(ctx: ForwardContext): { _meta?: Record<string, unknown> } {
  return ctx.meta ? { _meta: { ...ctx.meta } } : {};
}
