/**
 * mcp-front assembled: the tenant catalog, the argument validator, the
 * session store and SSE events on the bus, both protocol eras, and the
 * express router.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Implementation } from '@modelcontextprotocol/server';
import express, { type RequestHandler, type Router } from 'express';
import {
  anonymousPrincipal,
  DEFAULT_SESSION_TTL_MS,
  errorMessage,
  refuseOtherMethods,
  streams,
  watchPolicies,
  type Bus,
  type Logger,
  type Principal,
  type PunkConfig,
} from '@punk/lib';
import { serversInScope, type Scope } from './aggregate.js';
import { adminGuard, adminRouter } from './auth/admin-api.js';
import { authOptionsFromConfig, createAuthenticator, type AuthOptions } from './auth/authenticator.js';
import { TokenExchange } from './auth/token-exchange.js';
import { meRouter } from './auth/me-api.js';
import type { ApiKeyStore } from './auth/api-keys.js';
import { TenantCatalog } from './catalog.js';
import { OriginPolicy } from './cors.js';
import { McpEndpoints, type ResponseMode } from './endpoint.js';
import { startListChangedFanOut, startResourceUpdatedFanOut } from './fan-out.js';
import { startListenUpdates, subscribeListened } from './listen-subscriptions.js';
import { ListenSlots } from './listen-limits.js';
import { clientAddressOf } from './forwarded.js';
import { GetStreams } from './get-stream.js';
import { FastPath } from './fast-path.js';
import { buildMcpServer } from './handlers.js';
import { createRouter, type ScopeCheck } from './http.js';
import { HttpSseEndpoint } from './http-sse.js';
import { LegacyEndpoint } from './legacy.js';
import { InitializeRateLimiter } from './rate-limit.js';
import { DEFAULT_REQUEST_STATE_TTL_MS, RequestStateCodec, signingKeyOf } from './request-state.js';
import { SessionEvents } from './session-events.js';
import { startSessionMessages } from './session-messages.js';
import { openApiDocument } from './openapi.js';
import { approvalsRouter } from './approvals-api.js';
import { ingestRouter } from './ingest-api.js';
import { dashboardConfigOf, uiRouter } from './ui.js';
import { registryRouter } from './registry-api.js';
import { connectionsRouter } from './connections-api.js';
import { CallChannels } from './call-channel.js';
import { GatewayCalls } from './gateway-calls.js';
import { SessionStore } from './sessions.js';
import { SessionShares } from './session-shares.js';
import { trackHttpResponses, watchSessions } from './metrics.js';
import { ToolSchemaValidator } from './validate.js';

/** Options of `createFront`. */
export interface FrontOptions {
  bus: Bus;
  log: Logger;
  /** Tenant whose servers this front exposes. */
  tenant: string;
  /** Largest accepted request body, in bytes (413 above it; `PUNK_MAX_BODY_BYTES`, default 1 MiB). */
  maxBodyBytes: number;
  /**
   * Deadline of one call forwarded to a server whose manifest sets no `spec.timeout` (a server's own is learnt from
   * the catalog: deadline.ts), in milliseconds (`PUNK_CALL_TIMEOUT_MS`).
   */
  callTimeoutMs: number;
  /** Deadlines of single tools by namespaced name (`server__tool`), in milliseconds, overriding the server's (`PUNK_TOOL_TIMEOUTS`). Default none. */
  toolTimeouts?: Record<string, number>;
  /**
   * `serverInfo` the endpoint reports to clients (MCP 2025-11-25 Implementation: name, version, and optionally
   * title, description, websiteUrl, icons); defaults to `{ name: 'punk', version: '0.1.0' }`.
   */
  serverInfo?: Implementation;
  /** Instructions for clients, replacing the upstreams' own (`PUNK_SERVER_INSTRUCTIONS`). Default: the upstreams'. */
  instructions?: string;
  /** Path of the aggregated endpoint (`PUNK_MCP_PATH`). Default `/mcp`. */
  path?: string;
  /** The URL clients reach Punk at (`PUNK_PUBLIC_URL`): its path prefixes the HTTP+SSE `endpoint` event for requests to its host (http-sse.ts). */
  publicUrl?: string;
  /** Browser origins allowed besides the endpoint's own, also the CORS allow-list (`PUNK_ALLOWED_ORIGINS`). Default none. */
  allowedOrigins?: readonly string[];
  /** Reverse proxies in front whose `X-Forwarded-For`/`-Proto` are trusted (`PUNK_TRUST_PROXY`). Default 0. */
  trustProxy?: number;
  /** Idle time after which a 2025-era session expires, in milliseconds; activity renews it (`PUNK_SESSION_TTL_MS`). Default 30 min. */
  sessionTtlMs?: number;
  /** Most 2025-era sessions written within one TTL, cluster-wide; `initialize` above it answers 503 (`PUNK_MAX_SESSIONS`). Default 10000. */
  maxSessions?: number;
  /**
   * Most 2025-era sessions one principal (an anonymous caller: one client address) holds, cluster-wide; `initialize`
   * above it answers 429 (`PUNK_MAX_SESSIONS_PER_PRINCIPAL`). Default 1000.
   */
  maxSessionsPerPrincipal?: number;
  /** Most `initialize` requests per client address per minute, cluster-wide; 429 above it (`PUNK_INITIALIZE_RATE_LIMIT`). Default 30. */
  initializeRateLimit?: number;
  /** Most 2026-07-28 `subscriptions/listen` streams open on this replica; 429 above it (`PUNK_MAX_LISTEN_STREAMS`). Default 1024. */
  maxListenStreams?: number;
  /**
   * Most `subscriptions/listen` streams one principal (an anonymous caller: one client address) holds open on this
   * replica; 429 above it (`PUNK_MAX_LISTEN_STREAMS_PER_PRINCIPAL`). Default 64.
   */
  maxListenStreamsPerPrincipal?: number;
  /** How POSTs are answered: `auto`, `json` or `always` (SSE) (`PUNK_RESPONSE_MODE`; legacy.ts, endpoint.ts). Default `auto`. */
  responseMode?: ResponseMode;
  /** Items per page of list results, 1 to 1000 (`PUNK_PAGE_SIZE`). Default 200. */
  pageSize?: number;
  /** Whether the endpoint advertises `logging`: 2025 sessions accept `logging/setLevel`, 2026 requests name a level in `_meta` (`PUNK_LOGGING_CAPABILITY`). Default true. */
  logging?: boolean;
  /**
   * Who is calling: resolves with the principal, or null after answering the request itself (401/403).
   * Called after the Origin check and CORS preflight, before any other check (http.ts). A 2025 session is
   * bound to the principal that created it. Absent: `principalOf`.
   */
  authenticate?: (req: IncomingMessage, res: ServerResponse) => Promise<Principal | null>;
  /**
   * Who may call (API keys, OAuth 2.1 resource server; auth/authenticator.ts, docs/authentication.md): with it,
   * the front authenticates every request (unless `authenticate` is given), serves the RFC 9728 metadata and
   * the admin API of API keys. Absent: every caller is anonymous.
   */
  auth?: AuthOptions;
  /** Where the API keys of `auth` are kept; default the bus's bucket `PUNK_API_KEYS` (`punk up` gives its database's). */
  apiKeys?: ApiKeyStore;
  /** Reconnection delay told to clients of 2025-era GET streams and resumable POST streams (SSE `retry:`), in milliseconds. Default 1000. */
  sseRetryMs?: number;
  /**
   * Whether forwarded calls that need no SDK server are served without one (fast-path.ts; default true). `false`
   * serves every request through the SDK, the same bytes at the SDK's cost (the fast path's tests compare the two).
   */
  fastPath?: boolean;
  /**
   * Interval of SSE keep-alive comments (`: keepalive`) on every stream the front answers with: 2025 GET streams,
   * POST streams of both eras (2025 forwarded calls stream: legacy.ts; a 2026 one once it runs longer than one
   * interval: stream-upgrade.ts) and 2026 `subscriptions/listen`, in milliseconds (`PUNK_KEEPALIVE_MS`). Keep it
   * below the idle timeout of every proxy in front. Default 15 s.
   */
  keepAliveMs?: number;
  /**
   * Who is calling when there is no `authenticate` hook. Defaults to the tenant's anonymous principal.
   */
  principalOf?: (req: IncomingMessage) => Principal;
  /**
   * Key (at least 32 bytes, UTF-8) that signs the `requestState` of input_required results for 2026-07-28
   * clients (`PUNK_SESSION_SIGNING_KEY`); every replica of a tenant needs the same one. Absent: a random key
   * of this process, with a warning (a retry reaching another process then fails with -32602).
   */
  sessionSigningKey?: string;
  /** Lifetime of a minted `requestState`, in milliseconds. Default 5 min (the gateway's default pending bound). */
  requestStateTtlMs?: number;
}

/**
 * The endpoint options of `createFront` taken from validated configuration (the `PUNK_*` endpoint keys of
 * lib config.ts), for every place that starts a front (the mcp-front service, `punk up`).
 * @throws PunkError `InvalidConfig` when the `PUNK_AUTH_*` settings do not fit together (authOptionsFromConfig).
 */
export function frontOptionsOf(config: PunkConfig): Omit<FrontOptions, 'bus' | 'log' | 'tenant'> {
  const auth = authOptionsFromConfig(config);
  const serverInfo: Implementation = {
    name: config.serverName,
    version: config.serverVersion,
    ...(config.serverTitle && { title: config.serverTitle }),
    ...(config.serverDescription && { description: config.serverDescription }),
    ...(config.serverWebsiteUrl && { websiteUrl: config.serverWebsiteUrl }),
    ...(config.serverIcons && { icons: config.serverIcons }),
  };
  return {
    path: config.mcpPath,
    ...(config.publicUrl && { publicUrl: config.publicUrl }),
    serverInfo,
    ...(config.serverInstructions && { instructions: config.serverInstructions }),
    allowedOrigins: config.allowedOrigins,
    trustProxy: config.trustProxy,
    sessionTtlMs: config.sessionTtlMs,
    maxSessions: config.maxSessions,
    maxSessionsPerPrincipal: config.maxSessionsPerPrincipal,
    initializeRateLimit: config.initializeRateLimit,
    maxListenStreams: config.maxListenStreams,
    maxListenStreamsPerPrincipal: config.maxListenStreamsPerPrincipal,
    responseMode: config.responseMode,
    pageSize: config.pageSize,
    maxBodyBytes: config.maxBodyBytes,
    callTimeoutMs: config.callTimeoutMs,
    toolTimeouts: config.toolTimeouts,
    keepAliveMs: config.keepAliveMs,
    logging: config.loggingCapability,
    ...(auth && { auth }),
  };
}

/** A running mcp-front. */
export interface Front {
  /**
   * Serves `/mcp`, `/servers/<name>/mcp` and `/servers/<namespace>/<name>/mcp`, the HTTP+SSE transport of
   * MCP 2024-11-05 at `/sse`, `/servers/<name>/sse` and `/servers/<namespace>/<name>/sse` (http-sse.ts), the admin API `/api/v1/api-keys`,
   * the registry and credentials APIs `/api/v1/mcp/servers…` and `/api/v1/credentials…` (registry-api.ts; admins only with `auth`)
   * and, with `auth`, `/.well-known/oauth-protected-resource[/<endpoint path>]`, and the dashboard at `/ui` (`GET /`
   * redirects there; ui.ts); mount at the root of an express app.
   */
  router: Router;
  /**
   * Guards other APIs served beside the endpoint (the ledger API of `punk up`): with `auth`, only admins pass
   * (401/403 otherwise), a tenant admin only with no `?tenant=` or its own (its tenant is then
   * `confinedTenant(res)`, auth/admin-api.ts); without `auth` everyone does.
   */
  adminOnly: RequestHandler;
  /**
   * Stops taking new sessions, closes the GET streams this replica holds
   * (with a `retry:` hint: the client reconnects to another replica), ends
   * in-flight 2026 exchanges and stops listening to the bus. 2025 sessions
   * live on in the store. Idempotent.
   */
  close(): Promise<void>;
}

/**
 * Creates mcp-front for one tenant. Ensures stream `PUNK_SSE` and bucket
 * `PUNK_SESSIONS` (and watches it), subscribes to `punk.registry.changed`, its calls' channels
 * (`punk.front.<front>.call.*.out`) and `punk.gateway.heartbeat`, and serves
 * `punk.tenant.<tenant>.session-message` (so it needs a live
 * bus) but does not need the gateway yet: the catalog is read lazily from
 * `punk.gateway.call` on first use. Any number of fronts of a tenant may run
 * on one bus; each serves every 2025 session.
 * @throws PunkError from the bus when the stream, bucket or subscriptions cannot be made.
 * @throws RangeError when `sessionSigningKey` is shorter than 32 bytes.
 * @throws RangeError when an option is out of range (`path`, sizes, timeouts, `pageSize` above 1000, origins that are not origins).
 */
export async function createFront(options: FrontOptions): Promise<Front> {
  const log = options.log.child({ module: 'mcp-front' });
  const { bus, tenant } = options;
  const {
    path = '/mcp',
    sessionTtlMs = DEFAULT_SESSION_TTL_MS,
    maxSessions = 10_000,
    responseMode = 'auto',
    pageSize = 200,
    trustProxy = 0,
  } = options;
  checkOptions(options);
  const origins = new OriginPolicy(options.allowedOrigins ?? [], trustProxy);
  await bus.ensureStream(streams.sse);
  const sessions = await SessionStore.open(bus, sessionTtlMs, log);
  const rateLimiter = await InitializeRateLimiter.open(bus, options.initializeRateLimit ?? 30);
  const events = new SessionEvents(bus);
  const catalog = new TenantCatalog(bus, log, tenant);
  await catalog.start();
  // Lists are filtered in process from the compiled McpPolicy objects, as the gateway decides calls (list-filter.ts).
  const policies = await watchPolicies(bus, log);
  const channels = await CallChannels.start(bus, log);
  const calls = await GatewayCalls.start(bus, log, channels, tenant);
  const fanOut = await startListChangedFanOut({ bus, log, tenant, sessions, events, catalog });
  const updatesFanOut = await startResourceUpdatedFanOut({ bus, log, tenant, sessions, events, catalog });
  const sessionMessages = await startSessionMessages({ bus, tenant, sessions, events });
  const validator = new ToolSchemaValidator(log);
  const serverInfo = options.serverInfo ?? { name: 'punk', version: '0.1.0' };
  const requestState = new RequestStateCodec(
    signingKeyOf(options.sessionSigningKey, log),
    options.requestStateTtlMs ?? DEFAULT_REQUEST_STATE_TTL_MS,
  );
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const deps = {
    bus,
    log,
    tenant,
    policies,
    callTimeoutMs: options.callTimeoutMs,
    toolTimeouts: options.toolTimeouts ?? {},
    catalog,
    ...(options.auth?.oauthClient &&
      options.auth.issuer && { tokenExchange: new TokenExchange({ issuer: options.auth.issuer, ...options.auth.oauthClient }) }),
    ...(options.publicUrl !== undefined && { publicUrl: options.publicUrl }),
    channels,
    calls,
    validator,
    serverInfo,
    ...(options.instructions !== undefined && { instructions: options.instructions }),
    logging: options.logging ?? true,
    pageSize,
    requestState,
    ...(responseMode === 'auto' && { streamAfterMs: keepAliveMs }),
  };
  const fastPath = options.fastPath === false ? undefined : new FastPath({ ...deps, keepAliveMs });
  const sseRetryMs = options.sseRetryMs ?? 1000;
  const getStreams = new GetStreams({ bus, log, sessions, events, retryMs: sseRetryMs, keepAliveMs });
  const legacy = new LegacyEndpoint({
    bus,
    log,
    tenant,
    sessions,
    streams: getStreams,
    events,
    retryMs: sseRetryMs,
    buildServer: (scope, session) => buildMcpServer(deps, scope, session),
    rateLimiter,
    maxSessions,
    sessionShares: await SessionShares.open(bus, sessions, options.maxSessionsPerPrincipal ?? 1000),
    sessionTtlMs,
    trustedProxies: trustProxy,
    responseMode,
    keepAliveMs,
    ...(fastPath && { fastPath }),
  });
  const httpSse = new HttpSseEndpoint({
    bus,
    log,
    sessions,
    streams: getStreams,
    legacy,
    ...(options.publicUrl !== undefined && { publicUrl: options.publicUrl }),
  });
  const listenDeps = { bus, log, tenant, catalog, timeoutMs: options.callTimeoutMs };
  const endpoints = new McpEndpoints({
    log,
    legacy,
    maxBodyBytes: options.maxBodyBytes,
    responseMode,
    keepAliveMs,
    buildServer: (scope, principal) => buildMcpServer(deps, scope, undefined, principal),
    subscribeListened: (scope, body) => subscribeListened(listenDeps, scope, body),
    // An unreadable catalog leaves the check to the handler, which reports the catalog error.
    toolInputSchema: (scope, name) =>
      catalog.view(scope).then(
        (view) => view.tools.resolve(name)?.tool.inputSchema,
        () => undefined,
      ),
    listenSlots: new ListenSlots({ total: options.maxListenStreams ?? 1024, perPrincipal: options.maxListenStreamsPerPrincipal ?? 64 }),
    clientAddress: (req) => clientAddressOf(req, trustProxy),
    ...(fastPath && { fastPath }),
  });
  const listenUpdates = await startListenUpdates(listenDeps, (server, uri) => endpoints.notifyResourceUpdated(server, uri));
  // A registry change does not say which list changed: tell clients about all three.
  const stopListening = catalog.onChange((change) =>
    endpoints.notifyListChanged(change.server, { tools: true, resources: true, prompts: true }),
  );

  const checkScope = async (scope: Scope): Promise<ScopeCheck> => {
    if (scope.kind === 'aggregate') return { ok: true };
    let servers;
    try {
      servers = serversInScope(await catalog.listServers(), scope);
    } catch (error) {
      return { ok: false, status: 503, message: `the catalog of tenant ${tenant} is unavailable: ${errorMessage(error)}` };
    }
    const label = scope.namespace ? `${scope.namespace}/${scope.server}` : scope.server;
    if (servers.length === 0) return { ok: false, status: 404, message: `no MCP server named ${label} in tenant ${tenant}` };
    if (servers.length > 1) {
      return {
        ok: false,
        status: 404,
        message: `${label} is ambiguous: use /servers/<namespace>/${scope.server}/mcp (namespaces: ${servers.map((s) => s.namespace).join(', ')})`,
      };
    }
    return { ok: true };
  };

  const authenticator = options.auth
    ? await createAuthenticator({ auth: options.auth, bus, log, tenant, mcpPath: path, ...(options.apiKeys && { keys: options.apiKeys }) })
    : undefined;
  const authenticate = options.authenticate ?? authenticator?.authenticate;
  const endpointRouter = createRouter({
    log,
    path,
    maxBodyBytes: options.maxBodyBytes,
    origins,
    ...(authenticate && { authenticate }),
    ...(authenticator && !options.authenticate && { accessTokenOf: authenticator.accessTokenOf }),
    anonymous: options.principalOf ?? (() => anonymousPrincipal(tenant)),
    endpoints,
    httpSse,
    checkScope,
    busConnected: () => bus.isConnected(),
  });
  const router = express.Router();
  router.use(trackHttpResponses);
  if (authenticator) router.use(authenticator.metadata);
  router.use('/api/v1', origins.refuseForeignWrites());
  router.use('/api/v1', adminRouter({ auth: authenticator, tenant, defaultScopes: options.auth?.requiredScopes ?? [], log }));
  const adminOnly = adminGuard(authenticator, 'open', log);
  // The API's description is public: it holds no data, and clients generate code from it.
  router.get('/api/v1/openapi.json', (_req, res) => void res.set('Cache-Control', 'no-cache').json(openApiDocument));
  refuseOtherMethods(router);
  router.use('/api/v1', registryRouter({ bus, log, auth: authenticator, tenant, maxBodyBytes: options.maxBodyBytes }));
  router.use('/api/v1', approvalsRouter({ bus, log, auth: authenticator, tenant }));
  router.use('/api/v1', ingestRouter({ bus, log, auth: authenticator, tenant }));
  router.use('/api/v1', meRouter({ auth: authenticator, tenant, log }));
  router.use(
    connectionsRouter({ bus, log, auth: authenticator, tenant, ...(options.publicUrl !== undefined && { publicUrl: options.publicUrl }) }),
  );
  router.use(uiRouter({ origins, config: dashboardConfigOf(options.auth) }));
  router.use(endpointRouter);
  const unwatchSessions = watchSessions(tenant, sessions);
  let closing: Promise<void> | undefined;
  return {
    router,
    adminOnly,
    close: () =>
      (closing ??= (async () => {
        stopListening();
        unwatchSessions();
        await fanOut.unsubscribe();
        await updatesFanOut.unsubscribe();
        await listenUpdates.unsubscribe();
        await sessionMessages.unsubscribe();
        await catalog.close();
        await policies.stop();
        await calls.stop();
        await channels.stop();
        await sessions.close();
        httpSse.close();
        getStreams.closeAll();
        await endpoints.close();
      })()),
  };
}

/**
 * Checks the options a caller may get wrong (the service's own come validated from lib config.ts).
 * @throws RangeError naming the option, its value and the rule it broke.
 */
function checkOptions(options: FrontOptions): void {
  const positive = (name: string, value: number | undefined, max = Number.MAX_SAFE_INTEGER) => {
    if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= max))
      throw new RangeError(`mcp-front option ${name} must be an integer from 1 to ${max}, got ${value}`);
  };
  positive('maxBodyBytes', options.maxBodyBytes);
  positive('callTimeoutMs', options.callTimeoutMs);
  positive('keepAliveMs', options.keepAliveMs);
  positive('sessionTtlMs', options.sessionTtlMs);
  positive('maxSessions', options.maxSessions);
  positive('maxSessionsPerPrincipal', options.maxSessionsPerPrincipal);
  positive('initializeRateLimit', options.initializeRateLimit);
  positive('maxListenStreams', options.maxListenStreams);
  positive('maxListenStreamsPerPrincipal', options.maxListenStreamsPerPrincipal);
  positive('pageSize', options.pageSize, 1000);
  for (const [tool, ms] of Object.entries(options.toolTimeouts ?? {})) positive(`toolTimeouts[${JSON.stringify(tool)}]`, ms);
  if (options.trustProxy !== undefined && !(Number.isInteger(options.trustProxy) && options.trustProxy >= 0))
    throw new RangeError(`mcp-front option trustProxy must be a non-negative integer, got ${options.trustProxy}`);
  if (options.path !== undefined && !/^\/[A-Za-z0-9._~/-]*$/.test(options.path))
    throw new RangeError(`mcp-front option path must be an absolute URL path such as /mcp, got ${JSON.stringify(options.path)}`);
  if (options.responseMode !== undefined && !['auto', 'json', 'always'].includes(options.responseMode))
    throw new RangeError(`mcp-front option responseMode must be auto, json or always, got ${JSON.stringify(options.responseMode)}`);
  if (options.publicUrl !== undefined && !URL.canParse(options.publicUrl))
    throw new RangeError(
      `mcp-front option publicUrl must be a URL such as https://punk.example.com, got ${JSON.stringify(options.publicUrl)}`,
    );
  for (const origin of options.allowedOrigins ?? []) {
    let parsed: string | undefined;
    try {
      parsed = new URL(origin).origin;
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || parsed === 'null')
      throw new RangeError(`mcp-front option allowedOrigins has ${JSON.stringify(origin)}, which is not an origin (scheme://host[:port])`);
  }
}
