/**
 * Opens one MCP connection to a server, whatever its source: a local stdio
 * child, a local streamable-http child on its port, a remote url (its
 * credential references resolved, renewed once on an HTTP 401), or an OpenAPI
 * document served in this process (openapi/connection.ts). Bounded by the
 * start timeout; on any failure nothing is left running.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { Client, type ClientOptions } from '@modelcontextprotocol/client';
import { errorMessage, PunkError, redact, redactJson, redactParsed, transportOf, type Logger, type McpServer } from '@punk/lib';
import { connectHttp, type HttpAnswers, type HttpConnection, type HttpTransportKind } from './http-transport.js';
import { planLaunch } from './launch.js';
import { openOpenApiConnection } from './openapi/connection.js';
import { ensurePortFree, freePort, verifyOwnListener } from './local-port.js';
import { ServerProcess } from './process.js';
import type { SessionLink } from './session-link.js';
import { ProcessStdioTransport } from './stdio-transport.js';
import { localFetch } from './pool-fetch.js';
import { wireExchange, type UpstreamExchange } from './upstream-exchange.js';
import { headerRecord, renewHeaders, resolveHeaders, type ResolvedHeader, type Secrets } from './upstream-secrets.js';

/** An open connection: the SDK client, the transport it speaks and, for local servers, the process. */
export interface Connection {
  client: Client;
  /**
   * The forwarded requests' own exchange on the connection's wire (upstream-exchange.ts), where the wire carries one
   * (stdio); absent: they go through {@link client}.
   */
  exchange?: UpstreamExchange;
  /** The transport in use: `sse` when a streamable-http url server only spoke HTTP+SSE; `openapi`: served in the gateway (openapi/). */
  transport: 'stdio' | HttpTransportKind | 'openapi';
  process?: ServerProcess;
  /** The port a local HTTP server listens on on 127.0.0.1: its `spec.port`, or the one Punk picked. */
  port?: number;
  /**
   * What is wrong but served, each naming where, as of now (an openapi operation named from its route, an openapi
   * document changed into one that cannot be served): shown on the server's status.
   */
  warnings?: () => string[];
  /** The resolved `spec.headers` of a url server (secret values: never log them). */
  headers: ResolvedHeader[];
  /** HTTP 401 answers the connection got so far (always 0 for stdio). */
  unauthorized: () => number;
  /** HTTP 404 answers to the connection's session so far: the server ended it (always 0 for stdio). */
  sessionLost: () => number;
  /** `text` with this connection's secret values (resolved headers and env values) hidden: apply to every error message of its calls. */
  redact(text: string): string;
  /**
   * `text` with this connection's values from the credentials vault (`cred:` headers and env values) hidden: apply to
   * everything of its upstream that goes back to clients (results, errors, notifications, listings). Literal values
   * the manifest shows anyway are left as sent.
   */
  redactForClient(text: string): string;
  /**
   * A result of the connection's upstream (parsed from `text`, its JSON as it came, when known) with
   * {@link redactForClient} applied to every string; the result itself when it holds no such value (lib redactParsed).
   */
  hideResultForClient<T>(value: T, text?: string): T;
}

/** Options of {@link openConnection}. */
export interface ConnectOptions {
  log: Logger;
  workDir: string;
  extraEnv?: Record<string, string>;
  /** Budget of the whole start (spawn, listen, handshake), in milliseconds. */
  timeoutMs: number;
  /** Largest JSON-RPC message read from a stdio server, in bytes (default 64 MiB): a longer line is answered as an error. */
  maxMessageBytes?: number;
  /** Called when the upstream says a list changed. */
  onListChanged: () => void;
  /**
   * Answers a request the upstream sends to its client (`elicitation/create`, `sampling/createMessage`):
   * resolves with the result, or throws a `ProtocolError` the upstream receives as its JSON-RPC error.
   */
  onServerRequest: ServerRequestHandler;
  /**
   * Receives every `notifications/progress` of the upstream (replacing the SDK's own dispatch, which can
   * drop the last progress sent just before a result: it runs notification handlers a microtask late).
   */
  onProgress: (params: Record<string, unknown>) => void;
  /** Called when the upstream says a subscribed resource changed (`notifications/resources/updated`). */
  onResourceUpdated: (uri: string) => void;
  /** Receives the upstream's `notifications/message` on a shared connection (one without {@link session}). */
  onLog: (params: Record<string, unknown>) => void;
  /**
   * The one client session of a `per-client` connection: it receives the upstream's `notifications/message`
   * and, when the client declared `roots`, the connection declares `roots` (with `listChanged`) and relays
   * `roots/list` to it. Absent on shared connections (their log messages go to {@link onLog}).
   */
  session?: SessionLink;
  /** The fetch of every HTTP request to a url server (e.g. the SSRF-guarded one); not used for local servers. */
  fetch?: FetchLike;
  /** The credentials vault that resolves `cred:` references in `spec.headers` and `spec.env`. */
  secrets?: Secrets;
  /** Headers to send instead of resolving `spec.headers`: already renewed after an HTTP 401, so a 401 now is final. */
  renewedHeaders?: ResolvedHeader[];
  /**
   * The protocol era to speak, when not the default: `legacy` (the 2025 `initialize` handshake only) or `modern`
   * (2026-07-28 only: the start fails when the server does not speak it). Default: stdio servers speak 2025, Streamable
   * HTTP servers are probed with `server/discover` and spoken to in 2026-07-28 when they answer it.
   */
  era?: ProtocolEra;
  /** Gives the start up (the server is being stopped): the attempt rejects and its process is stopped. */
  signal?: AbortSignal;
}

/** The MCP protocol eras: `legacy` (2025 revisions, `initialize`) and `modern` (2026-07-28, `server/discover`). */
export type ProtocolEra = 'legacy' | 'modern';

/** The 2026-07-28 revision, pinned by a `modern` connection. */
const MODERN_PROTOCOL_VERSION = '2026-07-28';

/** Answers a server-to-client request of an upstream (MCP 2025-11-25 client/elicitation, client/sampling). */
export type ServerRequestHandler = (
  method: ForwardedMethod,
  params: Record<string, unknown> | undefined,
) => Promise<Record<string, unknown>>;

/** The server-to-client requests the gateway declares (and so relays to the clients of calls). */
export const FORWARDED_METHODS = ['elicitation/create', 'sampling/createMessage'] as const;
export type ForwardedMethod = (typeof FORWARDED_METHODS)[number];

/** The identity the gateway gives itself in the MCP handshake. */
export const CLIENT_INFO = { name: 'punk-gateway', version: '0.1.0' } as const;

/** Delay between attempts to reach a local HTTP server that is still starting, in milliseconds. */
const HTTP_RETRY_MS = 200;

/** Notifications that say one of the upstream's listings changed (either era). */
const LIST_CHANGED_NOTIFICATIONS = [
  'notifications/tools/list_changed',
  'notifications/prompts/list_changed',
  'notifications/resources/list_changed',
] as const;

/** How long list-changed notifications are gathered into one {@link ConnectOptions.onListChanged}, in milliseconds. */
const LIST_CHANGED_DEBOUNCE_MS = 50;

/**
 * A client for one connection attempt; `negotiates`: the transport may speak 2026-07-28 (Streamable HTTP or stdio).
 * `hide` masks the connection's values from the vault in everything its handlers pass on towards clients (progress
 * and log messages, server-to-client requests).
 */
function newClient(options: ConnectOptions, negotiates: boolean, byDefault: 'auto' | 'legacy', hide: (text: string) => string): Client {
  const clientOptions: ClientOptions = { capabilities: declaredCapabilities(options) };
  const era = negotiates ? options.era : 'legacy';
  if (era === 'modern') clientOptions.versionNegotiation = { mode: { pin: MODERN_PROTOCOL_VERSION } };
  else if (era === undefined && byDefault === 'auto') clientOptions.versionNegotiation = { mode: 'auto' };
  const client = new Client(CLIENT_INFO, clientOptions);
  // Handlers of our own rather than the SDK's `listChanged` option: on a 2026-07-28 connection that option opens
  // `subscriptions/listen` inside the handshake, so an upstream whose listen never acknowledges would fail its start.
  // The stream is opened after the handshake instead (listenForChanges); these handlers serve both eras.
  let debounce: NodeJS.Timeout | undefined;
  for (const method of LIST_CHANGED_NOTIFICATIONS) {
    client.setNotificationHandler(method, () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => {
        options.onListChanged();
      }, LIST_CHANGED_DEBOUNCE_MS);
    });
  }
  client.setNotificationHandler('notifications/progress', (notification) =>
    options.onProgress(redactJson({ ...notification.params }, hide)),
  );
  client.setNotificationHandler('notifications/resources/updated', (notification) => options.onResourceUpdated(notification.params.uri));
  const session = options.session;
  if (!session)
    client.setNotificationHandler('notifications/message', (notification) => options.onLog(redactJson({ ...notification.params }, hide)));
  if (session) {
    client.setNotificationHandler('notifications/message', (notification) => session.log(redactJson({ ...notification.params }, hide)));
    // Without the capability the SDK answers an upstream roots/list with -32601 itself.
    if (session.roots)
      client.setRequestHandler(
        'roots/list',
        async (request) => (await session.listRoots(request.params as Record<string, unknown> | undefined)) as never,
      );
  }
  for (const method of FORWARDED_METHODS) {
    client.setRequestHandler(
      method,
      async (request) =>
        (await options.onServerRequest(method, redactJson(request.params as Record<string, unknown> | undefined, hide))) as never,
    );
  }
  return client;
}

/**
 * The capabilities the gateway declares to an upstream: elicitation and sampling, so upstreams offer them (each request
 * is relayed to the client of the call, or refused when that client did not declare the capability itself:
 * client-channel.ts), and `roots` on a `per-client` connection whose client declared it.
 */
function declaredCapabilities(options: ConnectOptions): Record<string, unknown> {
  return { elicitation: { form: {} }, sampling: {}, ...(options.session?.roots && { roots: { listChanged: true } }) };
}

/**
 * Connects to a server. stdio servers speak the 2025 era (`initialize`); HTTP
 * servers are probed with `server/discover` (`mode: 'auto'`) so 2026-07-28
 * servers are spoken to in their era; sse servers speak 2025; `options.era`
 * pins one era instead (stdio and Streamable HTTP). A streamable-http
 * server whose handshake POST is answered 400, 404 or 405 is spoken to over
 * HTTP+SSE instead (http-transport.ts). A url server that answers HTTP 401 to
 * headers from an OAuth2 credential gets them renewed once and is tried again.
 *
 * @throws PunkError `ServerLaunchFailed` (cannot run locally), `ServerStartFailed`
 *   (exited, command missing, unreachable), `ServerStartTimeout`, `UpstreamUnauthorized`
 *   (HTTP 401, after the one renewal when there was something to renew), each naming the
 *   server; the credential errors of upstream-secrets.ts and of the vault.
 */
export async function openConnection(server: McpServer, options: ConnectOptions): Promise<Connection> {
  const spec = server.spec;
  // Every secret value the connection sends: hidden from each message that leaves this function.
  const secrets = new Set<string>();
  const hide = (text: string) => redact(text, secrets);
  // Those of them that came from the credentials vault: hidden from everything that goes back to clients.
  const vaultSecrets = new Set<string>();
  const hideFromClient = (text: string) => redact(text, vaultSecrets);
  const hideResultForClient = <T>(value: T, text?: string): T => redactParsed(value, text, vaultSecrets);
  const remember = (headers: ResolvedHeader[]) => {
    for (const header of headers) {
      secrets.add(header.value);
      if (header.fromVault) vaultSecrets.add(header.value);
    }
  };
  const name = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
  const transport = transportOf(spec);
  const deadline = Date.now() + options.timeoutMs;
  let child: ServerProcess | undefined;
  let client: Client | undefined;
  let timer: NodeJS.Timeout | undefined;
  let abandoned = false;
  // Rejects when the start budget is spent, or when the start is given up.
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new PunkError('ServerStartTimeout', `server ${name} did not complete its MCP handshake within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
    const giveUp = () => {
      reject(new PunkError('ServerUnavailable', `server ${name} was stopped while starting`, { server: name }));
    };
    if (options.signal?.aborted) giveUp();
    options.signal?.addEventListener('abort', giveUp, { once: true });
  });
  timeout.catch(() => undefined);
  try {
    if (spec.openapi !== undefined) {
      const openapi = openOpenApiConnection(server, spec.openapi, {
        ...options,
        timeoutMs: options.timeoutMs,
        newClient: (hideValues) => (client = newClient(options, false, 'legacy', hideValues)),
      });
      const connection = await Promise.race([openapi, timeout]);
      return { ...connection, hideResultForClient: (value) => redactJson(value, (text) => connection.redactForClient(text)) };
    }
    if (spec.url !== undefined) {
      const url = new URL(spec.url);
      const http = (headers: ResolvedHeader[], seen: HttpAnswers): Promise<HttpConnection> =>
        connectHttp(url, {
          transport: transport === 'sse' ? 'sse' : 'streamable-http',
          headers: headerRecord(headers),
          seen,
          ...(options.fetch && { fetch: options.fetch }),
          timeoutMs: () => deadline - Date.now(),
          newClient: (kind) => (client = newClient(options, kind === 'streamable-http', 'auto', hideFromClient)),
          onFallback: (status) =>
            options.log.info(
              { server: name, status },
              `server ${name} refused the Streamable HTTP handshake (HTTP ${status}); trying the HTTP+SSE transport`,
            ),
        });
      let headers = options.renewedHeaders ?? (await resolveHeaders(server, options.secrets));
      remember(headers);
      let connected: HttpConnection | undefined;
      for (let renewed = options.renewedHeaders !== undefined; !connected; renewed = true) {
        const seen = { unauthorized: 0, sessionLost: 0 };
        try {
          connected = await Promise.race([http(headers, seen), timeout]);
          break;
        } catch (error) {
          if (seen.unauthorized === 0) throw error;
        }
        const renewal = renewed ? undefined : await renewHeaders(headers, options.secrets);
        if (!renewal) throw unauthorizedError(name, renewed);
        options.log.info({ server: name }, `server ${name} answered HTTP 401; its OAuth2 credentials were renewed, connecting again`);
        headers = renewal;
        remember(headers);
      }
      options.log.info({ server: name, transport: connected.transport }, `connected to server ${name} over ${connected.transport}`);
      listenForChanges(connected.client, options.log, name, options.timeoutMs, hide);
      return {
        client: connected.client,
        transport: connected.transport,
        headers,
        unauthorized: connected.unauthorized,
        sessionLost: connected.sessionLost,
        redact: hide,
        redactForClient: hideFromClient,
        hideResultForClient,
      };
    }
    // An HTTP server listens on its spec.port, or on a free loopback port Punk picks ($(PORT) expands to it).
    const port = transport === 'stdio' ? undefined : (spec.port ?? (await freePort()));
    const plan = await planLaunch(server, {
      workDir: options.workDir,
      ...(port !== undefined && { port }),
      ...(options.extraEnv && { extraEnv: options.extraEnv }),
      ...(options.secrets && { secrets: options.secrets }),
    });
    for (const value of plan.secrets) secrets.add(value);
    for (const value of plan.vaultSecrets) vaultSecrets.add(value);
    // An HTTP server's port must be free: whatever answers there once it runs is taken for this server.
    if (port !== undefined) await Promise.race([ensurePortFree(name, port), timeout]);
    if (options.signal?.aborted) await timeout;
    const proc = (child = new ServerProcess(plan, { log: options.log, server: name, stdio: transport === 'stdio' }));
    const exited = proc.exited.then((exit) => {
      throw new PunkError('ServerStartFailed', `server ${name} ${proc.describeExit(exit)} before completing its MCP handshake`, {
        exitCode: exit.code,
        ...(exit.error?.code && { errno: exit.error.code }),
      });
    });
    exited.catch(() => undefined);
    if (transport === 'stdio') {
      client = newClient(options, true, 'legacy', hideFromClient);
      const wire = new ProcessStdioTransport(proc, options.maxMessageBytes);
      await Promise.race([client.connect(wire, { timeout: options.timeoutMs }), exited, timeout]);
      return {
        client,
        exchange: wireExchange(wire, client, declaredCapabilities(options), CLIENT_INFO),
        transport: 'stdio',
        process: proc,
        headers: [],
        unauthorized: () => 0,
        sessionLost: () => 0,
        redact: hide,
        redactForClient: hideFromClient,
        hideResultForClient,
      };
    }
    const url = new URL(`http://127.0.0.1:${String(port)}${spec.path}`);
    const attempt = async (): Promise<HttpConnection> => {
      for (;;) {
        if (abandoned) throw new Error('start abandoned');
        try {
          return await connectHttp(url, {
            transport: transport === 'sse' ? 'sse' : 'streamable-http',
            headers: {},
            fetch: localFetch,
            timeoutMs: () => deadline - Date.now(),
            newClient: (kind) => (client = newClient(options, kind === 'streamable-http', 'auto', hideFromClient)),
          });
        } catch (error) {
          if (proc.exitInfo || Date.now() + HTTP_RETRY_MS >= deadline) throw error;
          options.log.debug({ server: name, err: hide(errorMessage(error)) }, 'server not reachable yet; retrying');
          await new Promise((resolve) => setTimeout(resolve, HTTP_RETRY_MS));
        }
      }
    };
    const connected = await Promise.race([attempt(), exited, timeout]);
    await Promise.race([verifyOwnListener(name, port!, proc.pid), exited, timeout]);
    listenForChanges(connected.client, options.log, name, options.timeoutMs, hide);
    return {
      client: connected.client,
      transport: connected.transport,
      process: proc,
      port,
      headers: [],
      unauthorized: () => 0,
      sessionLost: () => 0,
      redact: hide,
      redactForClient: hideFromClient,
      hideResultForClient,
    };
  } catch (error) {
    abandoned = true;
    await client?.close().catch(() => undefined);
    await child?.stop();
    if (error instanceof PunkError) throw new PunkError(error.code, hide(error.message), error.details);
    throw new PunkError('ServerStartFailed', `server ${name} could not be reached: ${hide(errorMessage(error))}`);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Opens, in the background, the `subscriptions/listen` stream of a 2026-07-28 connection for the list changes the
 * upstream advertises (MCP 2026-07-28 basic/utilities/subscriptions); a no-op on a 2025-era connection, whose list
 * changes arrive unsolicited. The stream is optional: an upstream that does not acknowledge it within `timeoutMs`,
 * answers with something other than an event stream, or ends it, only loses its change notifications (logged as a
 * warning naming the server); its connection and its calls are not affected.
 */
export function listenForChanges(client: Client, log: Logger, name: string, timeoutMs: number, hide: (text: string) => string): void {
  if (client.getProtocolEra() !== 'modern') return;
  const caps = client.getServerCapabilities() ?? {};
  const filter = {
    ...(caps.tools?.listChanged && { toolsListChanged: true }),
    ...(caps.prompts?.listChanged && { promptsListChanged: true }),
    ...(caps.resources?.listChanged && { resourcesListChanged: true }),
  };
  if (Object.keys(filter).length === 0) return;
  const degraded = (why: string) => {
    log.warn(
      { server: name, err: hide(why) },
      `server ${name} sends no change notifications (its subscriptions/listen stream failed); its listings are refreshed only on reconnect`,
    );
  };
  client.listen(filter, { timeout: timeoutMs }).then(
    (subscription) =>
      void subscription.closed.then((cause) => {
        // `remote` after our own close is the connection ending, not the stream failing.
        if (cause === 'remote' && client.transport) degraded('the server ended the stream');
      }),
    (error: unknown) => {
      degraded(errorMessage(error));
    },
  );
}

/**
 * The error of an upstream that refused the connection's credentials with HTTP 401.
 * @param renewed whether its OAuth2 credentials were renewed once already.
 */
export function unauthorizedError(server: string, renewed: boolean): PunkError {
  const why = renewed
    ? 'again after its OAuth2 credentials were renewed; the grant may be revoked or lack access'
    : 'and no header comes from an OAuth2 credential that could be renewed; check spec.headers and the credentials they reference';
  return new PunkError('UpstreamUnauthorized', `server ${server} answered HTTP 401 (unauthorized) ${why}`, { server, status: 401 });
}

/**
 * The error of a call whose caller's exchanged token (`spec.auth.tokenExchange`, call-bearer.ts) the upstream answered
 * with HTTP 401: the token is refused, not the connection's credentials, which are neither renewed nor reconnected.
 */
export function exchangedTokenRefused(server: string): PunkError {
  return new PunkError(
    'UpstreamUnauthorized',
    `server ${server} answered HTTP 401 (unauthorized) to the token exchanged for the caller (spec.auth.tokenExchange): the upstream does not accept the issuer's token for its audience; check the audience and scopes the server declares, and what the issuer grants`,
    { server, status: 401 },
  );
}

/** The error of a call whose principal's per-user connection token the upstream refused (HTTP 401) again after a refresh. */
export function perUserTokenRefused(server: string): PunkError {
  return new PunkError(
    'UpstreamUnauthorized',
    `server ${server} answered HTTP 401 (unauthorized) to the caller's per-user connection token (spec.auth.perUser), also once refreshed: the provider's token does not grant access to this server; check the scopes the server declares, or disconnect and connect again`,
    { server },
  );
}
