/**
 * One upstream server of one tenant, the gateway replica's pool entry for it: its lifecycle (start, ready,
 * crash, restart with exponential backoff, idle close and reconnect on demand, stop), its pooled SDK client,
 * its cached listings, the calls relayed to it (bounded in number), and its circuit breaker.
 *
 * Circuit breaker: connect failures, process exits, call timeouts and transport errors count as consecutive
 * failures (a tool error or a JSON-RPC error the server answered is a success: the server is up). After
 * {@link BREAKER_FAILURE_THRESHOLD} of them the circuit opens: the connection is dropped and calls fail fast
 * with `ServerUnavailable` until the probe, a reconnect after the restart backoff ({@link INITIAL_BACKOFF_MS}
 * doubled per failure, at most {@link MAX_BACKOFF_MS}). The probe running is `half-open`; its success closes
 * the circuit (the next failure before any success re-opens it with the next, longer backoff), its failure
 * re-opens it. Below the threshold a lost connection is restarted on the same backoff, as before.
 */
import type { FetchLike } from '@modelcontextprotocol/client';
import { randomUUID } from 'node:crypto';
import {
  isInputRequiredResult,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  StreamableHTTPClientTransport,
  type Client,
  type Tool,
} from '@modelcontextprotocol/client';
import {
  durationMs,
  errorMessage,
  logLevelSchema,
  passesLogLevel,
  PunkError,
  UPSTREAM_INPUT_INSTANCE,
  UPSTREAM_INPUT_REQUIRED,
  type Logger,
  type LogLevel,
  type McpServer,
  type ServerCatalog,
  type ServerState,
  redactJson,
} from '@punk/lib';
import { carriesCallBearer, renewCallBearer } from './call-bearer.js';
import { CallQueue } from './call-queue.js';
import { buildCatalog, emptyListings, type Listings, type McpItem, type ServerIdentity } from './catalog.js';
import type { ClientLink } from './client-channel.js';
import {
  exchangedTokenRefused,
  perUserTokenRefused,
  openConnection,
  unauthorizedError,
  type ConnectOptions,
  type Connection,
  type ForwardedMethod,
  type ProtocolEra,
} from './connect.js';
import { renewHeaders, type ResolvedHeader, type Secrets } from './upstream-secrets.js';
import type { ProcessExit } from './process.js';
import { droppedAnswerOf } from './stdio-transport.js';
import type { SessionLink } from './session-link.js';
import { sdkExchange, type ExchangeAnswer, type ExchangeOptions, type UpstreamExchange } from './upstream-exchange.js';
import { answerInputRequests, MAX_INPUT_ROUNDS, metaForModernUpstream, type InputRequiredMode, type InputRetry } from './upstream-input.js';

/** First restart delay after a crash, doubled per consecutive failure up to {@link MAX_BACKOFF_MS}. */
export const INITIAL_BACKOFF_MS = 1_000;
/** Longest restart delay. */
export const MAX_BACKOFF_MS = 30_000;
/** Consecutive failures (connects, exits, call timeouts, transport errors) that open the circuit breaker. */
export const BREAKER_FAILURE_THRESHOLD = 3;
/** Failures that end a start attempt for good: retrying cannot help until the manifest or the gateway changes. */
const FINAL_START_ERRORS = new Set([
  'ServerLaunchFailed',
  'SecretUnsupported',
  'CredentialUnavailable',
  'EgressRefused',
  'ServerListensBeyondLoopback',
]);
/** Longest wait of a call for the connection of its client's era to open (at most the start timeout), in milliseconds. */
const OTHER_ERA_WAIT_MS = 10_000;
/** A server ready for this long before it fails starts its backoff afresh. */
const STABLE_MS = 60_000;
/** How long a closed connection waits for its process's exit code before reporting. */
const EXIT_GRACE_MS = 1_000;

/** Options of an {@link Upstream}. */
export interface UpstreamOptions {
  server: McpServer;
  log: Logger;
  workDir: string;
  extraEnv?: Record<string, string>;
  /** Start budget (spawn, listen, handshake) when the manifest sets no `spec.startTimeout`, in milliseconds. */
  startTimeoutMs: number;
  /** Call deadline when the manifest sets no `spec.timeout`, in milliseconds. */
  callTimeoutMs: number;
  /** Largest message read from a stdio server, in bytes (default 64 MiB; {@link ConnectOptions.maxMessageBytes}). */
  maxMessageBytes?: number;
  /** Every state transition, after it happened. */
  onState: (upstream: Upstream, state: ServerState, lastError: string | undefined) => void;
  /** The upstream's listings changed and were refreshed. */
  onListChanged: (upstream: Upstream) => void;
  /** The upstream said a subscribed resource changed. */
  onResourceUpdated: (upstream: Upstream, uri: string) => void;
  /** The client session this upstream belongs to (`per-client` servers only): its log messages and `roots/list` go there. */
  session?: SessionLink;
  /** The fetch of every HTTP request to a url server (e.g. the SSRF-guarded one); the global fetch when absent. */
  fetch?: FetchLike;
  /** The credentials vault that resolves `cred:` references in `spec.headers` and `spec.env`, and renews OAuth2 ones after an HTTP 401. */
  secrets?: Secrets;
  /**
   * This gateway replica's name: a 2026-07-28 `input_required` a server process of it answered names it
   * ({@link UPSTREAM_INPUT_INSTANCE}), so the client's retry comes back to that process.
   */
  instanceId?: string;
  /** Close the connection after this long without calls (`PUNK_UPSTREAM_IDLE_TIMEOUT_MS`), in milliseconds; never when absent. */
  idleTimeoutMs?: number;
  /** Most calls in flight at once (`PUNK_UPSTREAM_MAX_CONCURRENT_CALLS`); more wait in a queue (call-queue.ts). Unbounded when absent. */
  maxConcurrentCalls?: number;
  /** Most calls waiting for a slot (`PUNK_UPSTREAM_MAX_QUEUED_CALLS`); more fail at once with `ServerBusy`. Default {@link DEFAULT_MAX_QUEUED_CALLS}. */
  maxQueuedCalls?: number;
  /** Longest wait for a slot, in milliseconds (`PUNK_UPSTREAM_QUEUE_TIMEOUT_MS`); then `ServerBusy`. Default {@link DEFAULT_QUEUE_TIMEOUT_MS}. */
  queueTimeoutMs?: number;
  /** Most calls of one principal in flight or queued (`PUNK_UPSTREAM_MAX_CALLS_PER_PRINCIPAL`); more fail at once with `ServerBusy`. Unbounded when absent. */
  maxCallsPerPrincipal?: number;
  /** First restart (and circuit probe) delay, doubled per consecutive failure up to {@link MAX_BACKOFF_MS}; default {@link INITIAL_BACKOFF_MS}. */
  initialBackoffMs?: number;
  /**
   * Reviews every tools listing (the first and each refresh) before it is stored: what it returns is served
   * (it may drop tools). When it throws, the error is logged and the previous listing is kept.
   */
  reviewTools?: (upstream: Upstream, tools: McpItem[]) => Promise<McpItem[]>;
}

/** The pool settings and connection hooks a gateway gives each of its upstreams. */
export type UpstreamPoolOptions = Pick<
  UpstreamOptions,
  | 'fetch'
  | 'secrets'
  | 'idleTimeoutMs'
  | 'maxConcurrentCalls'
  | 'maxQueuedCalls'
  | 'queueTimeoutMs'
  | 'maxCallsPerPrincipal'
  | 'initialBackoffMs'
  | 'reviewTools'
>;

/** Calls that may wait for a slot per server and replica when `maxQueuedCalls` is not given. */
export const DEFAULT_MAX_QUEUED_CALLS = 128;
/** Longest wait for a slot when `queueTimeoutMs` is not given, in milliseconds. */
export const DEFAULT_QUEUE_TIMEOUT_MS = 10_000;

/** The circuit breaker of one upstream on this replica (see the module comment). */
export type CircuitState = 'closed' | 'open' | 'half-open';

/** How a relayed call ended when the server gave no answer of its own (`cancelled`: the client gave it up, and the upstream was told). */
export type CallFailure =
  | { kind: 'unavailable'; message: string }
  | { kind: 'timeout'; message: string }
  | { kind: 'exited'; message: string }
  | { kind: 'cancelled'; message: string }
  | { kind: 'refused'; message: string };

/**
 * The outcome of a relayed call: the upstream's result with the redaction of the connection that answered it
 * (`Connection.redact`: its secret values hidden from a text, e.g. a summary of the result for the ledger), or why
 * there is none (`refused`: the call's {@link CallAdmission} refused it, it never reached the upstream).
 */
export type CallOutcome =
  | {
      ok: true;
      result: Record<string, unknown>;
      /** The size of the upstream's answer in UTF-8 bytes, when its wire knew it: at least the result's JSON size. */
      bytes?: number;
      redact: (text: string) => string;
    }
  | ({ ok: false } & CallFailure);

/**
 * Checked right before a call goes out on a connection, after any (re)connect or relisting the call waited for
 * (also before the one retry after an HTTP 401 renewal): the reason the call must not be sent (e.g. its tool is no
 * longer served), or undefined to send it. Answered from memory.
 */
export type CallAdmission = () => string | undefined;

/** One relayed request on a connection's exchange (`options` carry its deadline, cancellation and input-required handling). */
type RelayedCall = (
  exchange: UpstreamExchange,
  options: ExchangeOptions,
  meta: Record<string, unknown> | undefined,
  retry?: InputRetry,
) => Promise<ExchangeAnswer>;

/** One upstream MCP server and its pooled connection. */
export class Upstream {
  /** `<namespace>/<name>`. */
  readonly key: string;
  /** Resolves once the first start attempt has ended (ready or failed). */
  readonly firstStart: Promise<void>;
  private stateValue: ServerState = 'stopped';
  private lastError: string | undefined;
  private cause: string | undefined;
  private connection: Connection | undefined;
  private identity: ServerIdentity = {};
  private listings: Listings = emptyListings();
  private listed = false;
  private failures = 0;
  private readySince = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** The start attempt under way, if any. */
  private connecting: Promise<unknown> | undefined;
  /** Gives the start attempt under way up (at {@link stop}): its process is stopped at once. */
  private startAbort: AbortController | undefined;
  /** The reconnect after a connection's upstream refused its credentials (HTTP 401) or ended its session (HTTP 404), shared by the calls that saw it. */
  private renewal: { of: Connection; done: Promise<void> } | undefined;
  private readonly queue: CallQueue;
  private transport: Connection['transport'] | undefined;
  /** The last connection's warnings (see Connection.warnings), kept like {@link transport}. */
  private warnings: () => string[] = () => [];
  private stopping = false;
  private generation = 0;
  private settleFirstStart!: () => void;
  /** URIs this connection is subscribed to (renewed after a restart). */
  private readonly subscribed = new Set<string>();
  /** Progress tokens Punk gave the upstream for calls in flight, to the client's link and own token. */
  private readonly progress = new Map<string, { link: ClientLink; clientToken: string | number }>();
  /** Clients of the calls in flight that can receive messages, to the log level each call asked for (none: every level). */
  private readonly links = new Map<ClientLink, LogLevel | undefined>();
  /**
   * The connection in the other protocol era than the pooled one's, for the calls of clients of that era (see
   * {@link connectionInEra}): opened on the first such call, closed with the pooled connection it belongs to (`of`).
   */
  private other: OtherEraConnection | undefined;
  /** Those of {@link links} whose call went out on a 2026-07-28 connection (which sends no server-to-client request). */
  private readonly modernLinks = new Set<ClientLink>();
  /** Clients of calls in flight that were sent a server-to-client request they have not answered yet, to how many. */
  private readonly asking = new Map<ClientLink, number>();

  constructor(private readonly options: UpstreamOptions) {
    const { namespace = 'default', name } = options.server.metadata;
    this.key = `${namespace}/${name}`;
    this.queue = new CallQueue({
      server: this.key,
      ...(options.maxConcurrentCalls !== undefined && { maxConcurrent: options.maxConcurrentCalls }),
      maxQueued: options.maxQueuedCalls ?? DEFAULT_MAX_QUEUED_CALLS,
      maxWaitMs: options.queueTimeoutMs ?? DEFAULT_QUEUE_TIMEOUT_MS,
      ...(options.maxCallsPerPrincipal !== undefined && { maxPerPrincipal: options.maxCallsPerPrincipal }),
    });
    this.firstStart = new Promise((resolve) => (this.settleFirstStart = resolve));
  }

  /** The manifest this upstream runs. */
  get server(): McpServer {
    return this.options.server;
  }

  /** Current lifecycle state. */
  get state(): ServerState {
    return this.stateValue;
  }

  /** The last failure as it happened (without the circuit breaker's counts and probe time), when the server is failing. */
  get failureCause(): string | undefined {
    return this.stateValue === 'failed' ? this.cause : undefined;
  }

  /** Why the server is not ready, when it is not. */
  get error(): string | undefined {
    return this.lastError;
  }

  /** The start budget: `spec.startTimeout`, else the gateway's default, in milliseconds. */
  get startTimeoutMs(): number {
    const timeout = this.options.server.spec.startTimeout;
    return timeout ? durationMs(timeout) : this.options.startTimeoutMs;
  }

  /** The call deadline: `spec.timeout`, else the gateway's default, in milliseconds. */
  get callTimeoutMs(): number {
    const timeout = this.options.server.spec.timeout;
    return timeout ? durationMs(timeout) : this.options.callTimeoutMs;
  }

  /** Where {@link callTimeoutMs} comes from, for error messages: the server's `spec.timeout` or `PUNK_CALL_TIMEOUT_MS`. */
  private get callTimeoutSource(): string {
    const timeout = this.options.server.spec.timeout;
    return timeout ? `the server's spec.timeout ${timeout}` : 'PUNK_CALL_TIMEOUT_MS, the server sets no spec.timeout';
  }

  /** The catalog entry, with the last listings in every state, the transport of the last connection and the circuit. */
  catalog(): ServerCatalog {
    const warnings = this.warnings();
    return {
      ...buildCatalog(this.options.server, this.stateValue, this.lastError, this.identity, this.listings),
      ...(this.transport && { transport: this.transport }),
      ...(warnings.length > 0 && { warnings }),
      circuit: this.circuit,
      startTimeoutMs: this.startTimeoutMs,
    };
  }

  /** The circuit breaker: `open` after {@link BREAKER_FAILURE_THRESHOLD} consecutive failures until the probe (`half-open`) succeeds. */
  get circuit(): CircuitState {
    if (this.failures < BREAKER_FAILURE_THRESHOLD || !['starting', 'failed'].includes(this.stateValue)) return 'closed';
    return this.stateValue === 'starting' ? 'half-open' : 'open';
  }

  /** Whether a call is taken now: when ready, idle (it reconnects) or starting with the circuit closed (it waits for the start). */
  get accepting(): boolean {
    return this.circuit === 'closed' && ['ready', 'idle', 'starting'].includes(this.stateValue);
  }

  /** The process id of the server process this upstream started and is connected to, if any. */
  get pid(): number | undefined {
    return this.connection?.process?.pid;
  }

  /** The 127.0.0.1 port of the local HTTP server process this upstream is connected to (declared or picked), if any. */
  get port(): number | undefined {
    return this.connection?.port;
  }

  /** Calls in flight to the server now. */
  get callsInFlight(): number {
    return this.queue.inFlight;
  }

  /** Calls waiting for a slot under `maxConcurrentCalls` now. */
  get callsQueued(): number {
    return this.queue.depth;
  }

  /**
   * The listed tool of that name (listings are kept across a crash):
   * undefined when the server does not list it, `'unlisted'` when the server
   * has never been listed (never ready), so nothing is known yet.
   */
  knownTool(name: string): McpItem | undefined | 'unlisted' {
    if (!this.listed) return 'unlisted';
    return this.listings.tools.find((t) => t.name === name);
  }

  /** Starts the lifecycle: connect now, restart after crashes until {@link stop}. */
  start(): void {
    void this.attempt();
  }

  /** Stops the server for good: cancels restarts, gives up a start under way, closes the client, stops the process. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.idleTimer);
    this.generation++;
    this.startAbort?.abort();
    await this.dropConnection();
    await this.connecting;
    this.setState('stopped', this.lastError);
    this.settleFirstStart();
  }

  /**
   * Calls a tool. With `link`, the upstream's progress for the client's `_meta.progressToken` and its
   * server-to-client requests reach the client while the call runs. When `signal` aborts, the upstream
   * request is cancelled (`notifications/cancelled`, MCP 2025-11-25 basic/utilities/cancellation) and the
   * outcome is `cancelled`. `mode` says how a 2026-07-28 upstream's `input_required` is handled (upstream-input.ts);
   * by default the call's link is asked. `admit` is asked before the request goes out (see {@link CallAdmission}); its
   * refusal is the outcome `refused`. `principal` names whose share of the queue the call takes (none: no one's).
   * @throws PunkError `UpstreamError` when the server answers with a JSON-RPC error.
   */
  callTool(
    name: string,
    args: Record<string, unknown> | undefined,
    meta: Record<string, unknown> | undefined,
    link?: ClientLink,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
    admit?: CallAdmission,
    principal?: string,
  ): Promise<CallOutcome> {
    return this.relay(
      (exchange, options, sent, retry) =>
        exchange.request('tools/call', { name, ...(args && { arguments: args }), ...(sent && { _meta: sent }), ...retry }, options),
      meta,
      link,
      signal,
      mode,
      admit,
      principal,
    );
  }

  /**
   * The definition of a tool as the SDK client is given it for a call: without its `outputSchema` (the result goes
   * back untouched: mcp-front checks `structuredContent` against the schema and answers a mismatch as a tool error).
   */
  private toolDefinition(name: string): Tool {
    const known = this.knownTool(name);
    const { outputSchema: _checkedByTheFront, ...definition } =
      typeof known === 'object' ? known : { name, inputSchema: { type: 'object' } };
    return definition as Tool;
  }

  /** Reads a resource (progress, requests and cancellation as in {@link callTool}). @throws PunkError `UpstreamError` when the server answers with a JSON-RPC error. */
  readResource(
    uri: string,
    meta: Record<string, unknown> | undefined,
    link?: ClientLink,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
    principal?: string,
  ): Promise<CallOutcome> {
    return this.relay(
      (exchange, options, sent, retry) => exchange.request('resources/read', { uri, ...(sent && { _meta: sent }), ...retry }, options),
      meta,
      link,
      signal,
      mode,
      undefined,
      principal,
    );
  }

  /** Gets a prompt (progress, requests and cancellation as in {@link callTool}). @throws PunkError `UpstreamError` when the server answers with a JSON-RPC error. */
  getPrompt(
    name: string,
    args: Record<string, string> | undefined,
    meta: Record<string, unknown> | undefined,
    link?: ClientLink,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
    principal?: string,
  ): Promise<CallOutcome> {
    return this.relay(
      (exchange, options, sent, retry) =>
        exchange.request('prompts/get', { name, ...(args && { arguments: args }), ...(sent && { _meta: sent }), ...retry }, options),
      meta,
      link,
      signal,
      mode,
      undefined,
      principal,
    );
  }

  /**
   * Asks the upstream for completions (MCP 2025-11-25 server/utilities/completion); `params` is the
   * `completion/complete` request's params as the upstream names things.
   * @throws PunkError `ServerUnavailable` when the server is not ready, `UpstreamError` when it answers with an error.
   */
  async complete(params: {
    ref: Record<string, unknown>;
    argument: { name: string; value: string };
    context?: Record<string, unknown>;
  }): Promise<Record<string, unknown>> {
    const connection = await this.connectionForCall();
    const client = connection?.client;
    if (!client) throw new PunkError('ServerUnavailable', `server ${this.key} is unavailable (${this.stateValue})`);
    try {
      const result = await client.complete(params as Parameters<Client['complete']>[0], { timeout: this.callTimeoutMs });
      return redactJson(result, (text) => connection.redactForClient(text));
    } catch (error) {
      throw new PunkError(
        'UpstreamError',
        `server ${this.key} answered completion/complete with an error: ${this.hide(errorMessage(error), connection)}`,
        error instanceof ProtocolError
          ? { mcpCode: error.code, data: redactJson(error.data, (text) => connection.redactForClient(text)) }
          : {},
      );
    }
  }

  /**
   * Sets the upstream's log level (MCP 2025-11-25 server/utilities/logging) when this is the connection of one
   * client session (`per-client`) and the server offers logging; a no-op otherwise (a shared connection's
   * log messages reach no client, and one client's level must not silence another's).
   * @throws PunkError `UpstreamError` when the server answers with an error.
   */
  async setLogLevel(level: string): Promise<void> {
    const client = this.connection?.client;
    if (!this.options.session || this.stateValue !== 'ready' || !client || !client.getServerCapabilities()?.logging) return;
    try {
      await client.setLoggingLevel(level as Parameters<Client['setLoggingLevel']>[0], { timeout: this.callTimeoutMs });
    } catch (error) {
      throw new PunkError(
        'UpstreamError',
        `server ${this.key} refused logging/setLevel: ${this.hide(errorMessage(error))}`,
        error instanceof ProtocolError
          ? { mcpCode: error.code, data: redactJson(error.data, (text) => this.connection?.redactForClient(text) ?? text) }
          : {},
      );
    }
  }

  /**
   * Subscribes this gateway replica's connection to updates of `uri` (MCP 2025-11-25 server/resources
   * "Subscriptions"); a no-op when it already is. Subscriptions are shared by every client of the
   * connection and kept for its lifetime (fronts deliver updates only to sessions that subscribed).
   * @throws PunkError `ServerUnavailable` when the server is not ready, `UpstreamError` when it refuses.
   */
  async subscribe(uri: string): Promise<void> {
    const connection = await this.connectionForCall();
    const client = connection?.client;
    if (!client) throw new PunkError('ServerUnavailable', `server ${this.key} is unavailable (${this.stateValue})`);
    if (this.subscribed.has(uri)) return;
    try {
      await subscribeOn(client, uri, this.callTimeoutMs);
    } catch (error) {
      throw new PunkError(
        'UpstreamError',
        `server ${this.key} refused a subscription to ${uri}: ${this.hide(errorMessage(error), connection)}`,
        error instanceof ProtocolError ? { mcpCode: error.code } : {},
      );
    }
    this.subscribed.add(uri);
    // A connection that carries subscriptions is never idle: closing it would lose the updates.
    clearTimeout(this.idleTimer);
  }

  /**
   * Tells the upstream that its client's roots changed (`notifications/roots/list_changed`, MCP 2025-11-25
   * client/roots); a no-op unless this is a `per-client` connection whose client declared `roots` and it is ready.
   */
  async notifyRootsChanged(): Promise<void> {
    const client = this.connection?.client;
    if (!this.options.session?.roots || this.stateValue !== 'ready' || !client) return;
    try {
      await client.sendRootsListChanged();
    } catch (error) {
      this.options.log.warn(
        { server: this.key, err: this.hide(errorMessage(error)) },
        'could not tell the upstream that the client roots changed',
      );
    }
  }

  /**
   * Answers a server-to-client request of the upstream by relaying it to the client of the one call in
   * flight whose client can take it, leaving out calls whose client has yet to answer an earlier request
   * when that leaves one. Over a shared connection nothing on the wire says which call a request belongs to
   * (stdio carries no related request id), so with none or several candidate calls the upstream gets an
   * error rather than a guess.
   * @throws ProtocolError for the upstream: -32601 when no call's client declared the capability,
   *   -32603 when the call is ambiguous, or the client's own error.
   */
  private async serverRequest(method: ForwardedMethod, params: Record<string, unknown> | undefined): Promise<Record<string, unknown>> {
    // Only a 2025-era connection sends requests: they belong to the calls in flight on such a connection.
    const live = [...this.links.keys()].filter((link) => !this.modernLinks.has(link));
    const able = live.filter((link) => link.supports(method));
    // A call whose client is still to answer an earlier request (a 2026-07-28 client's input_required round, which
    // it may abandon) is waiting in that request: a new one is the request of another call, never held up by it.
    const free = able.filter((link) => !this.asking.has(link));
    const target = able.length === 1 ? able[0] : free.length === 1 ? free[0] : undefined;
    if (target) {
      this.asking.set(target, (this.asking.get(target) ?? 0) + 1);
      try {
        return await target.request(method, params);
      } finally {
        const left = (this.asking.get(target) ?? 1) - 1;
        if (left === 0) this.asking.delete(target);
        else this.asking.set(target, left);
      }
    }
    if (able.length === 0) {
      if (live.length === 1) live[0]!.unsupported?.(method);
      const why = live.length === 0 ? 'no client call is in progress' : 'the client of the call did not declare the capability';
      throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `${method} cannot be relayed: ${why}`);
    }
    throw new ProtocolError(
      ProtocolErrorCode.InternalError,
      `${method} cannot be relayed: ${String(free.length)} client calls are in progress on server ${this.key} and the request does not say which one it belongs to`,
    );
  }

  /**
   * Relays one call within the pool's bounds: at most `maxConcurrentCalls` in flight (more wait in the queue, bounded in
   * depth and time; a call cancelled while it waits ends `cancelled`), the connection opened
   * again when idle, fast failure while the circuit is open, and after an HTTP 401 one renewal of the
   * connection's OAuth2 credentials, one reconnect and one retry. `admit` is asked before each request goes out
   * (the first and the retry), after any (re)connect. Outcomes feed the circuit breaker.
   * @throws PunkError `ServerBusy` past the queue's bounds (details `retryAfterSeconds`), `ServerUnavailable` while the circuit is open, `UpstreamUnauthorized`
   *   when the upstream refuses the credentials (again), the vault's `CredentialRefreshFailed`, `UpstreamError`.
   */
  private async relay(
    call: RelayedCall,
    meta: Record<string, unknown> | undefined,
    link: ClientLink | undefined,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
    admit?: CallAdmission,
    principal?: string,
  ): Promise<CallOutcome> {
    const release = await this.queue.acquire(signal, principal);
    if (!release)
      return { ok: false, kind: 'cancelled', message: `the client cancelled the call to server ${this.key} while it waited for a slot` };
    clearTimeout(this.idleTimer);
    try {
      const connection = await this.connectionForCall(signal);
      if (signal?.aborted)
        return { ok: false, kind: 'cancelled', message: `the client cancelled the call to server ${this.key} before it was sent` };
      if (!connection) {
        return {
          ok: false,
          kind: 'unavailable',
          message: `server ${this.key} is unavailable (${this.stateValue}${this.lastError ? `: ${this.lastError}` : ''})`,
        };
      }
      // The (re)connect may have listed the tools again: what was checked before it may no longer hold.
      const refusal = admit?.();
      if (refusal !== undefined) return { ok: false, kind: 'refused', message: refusal };
      const inEra = await this.connectionInEra(connection, mode?.era);
      if (inEra !== connection) {
        // The connection of the client's era: a transport failure drops it (the next such call opens it again).
        const outcome = await this.relayOn(inEra, call, meta, link, signal, mode);
        if (!outcome.ok && (outcome.kind === 'unavailable' || outcome.kind === 'exited') && this.other?.connection === inEra)
          void this.closeOther();
        return outcome;
      }
      const refused = connection.unauthorized();
      const lost = connection.sessionLost();
      const outcome = await this.relayOn(connection, call, meta, link, signal, mode);
      if (outcome.ok || outcome.kind === 'cancelled') return this.account(connection, outcome);
      if (connection.sessionLost() !== lost && connection.unauthorized() === refused) {
        // HTTP 404 to the session: the server ended it (a restarted pod, an idle timeout) without seeing the call,
        // so a new session is started at once and the call sent again once (MCP 2025-11-25 basic/transports).
        this.options.log.info(
          { server: this.key },
          `server ${this.key} ended its session (HTTP 404); starting a new session and retrying once`,
        );
        const fresh = await this.reconnectAfter(connection, false);
        const refusalAfterReconnect = admit?.();
        if (refusalAfterReconnect !== undefined) return { ok: false, kind: 'refused', message: refusalAfterReconnect };
        return this.account(fresh, await this.relayOn(fresh, call, meta, link, signal, mode));
      }
      if (connection.unauthorized() === refused) return this.account(connection, outcome);
      if (carriesCallBearer()) {
        // The caller's token was refused, not the connection's credentials: the shared connection stays. A per-user
        // connection's token is refreshed and the call sent again once; an exchanged one is the front's to renew.
        if (!(await renewCallBearer())) throw exchangedTokenRefused(this.key);
        const refusedAgain = connection.unauthorized();
        const retried = await this.relayOn(connection, call, meta, link, signal, mode);
        if (!retried.ok && retried.kind !== 'cancelled' && connection.unauthorized() !== refusedAgain) throw perUserTokenRefused(this.key);
        return this.account(connection, retried);
      }
      // The upstream answered HTTP 401: renew the credentials once, reconnect, and retry the call once.
      this.options.log.info(
        { server: this.key },
        `server ${this.key} answered a call with HTTP 401; renewing its credentials and retrying once`,
      );
      const renewed = await this.reconnectAfter(connection, true);
      const refusalAfterRenewal = admit?.();
      if (refusalAfterRenewal !== undefined) return { ok: false, kind: 'refused', message: refusalAfterRenewal };
      const refusedAgain = renewed.unauthorized();
      const retried = await this.relayOn(renewed, call, meta, link, signal, mode);
      if (!retried.ok && retried.kind !== 'cancelled' && renewed.unauthorized() !== refusedAgain) throw unauthorizedError(this.key, true);
      return this.account(renewed, retried);
    } finally {
      release();
      this.armIdle();
    }
  }

  /**
   * The connection a call goes out on: the ready one; a new one when the server is idle or starting (the
   * call waits for the start), or when its credentials are being renewed after an HTTP 401 (the call waits
   * for the reconnect, at most the call timeout); none when it failed (the caller answers `unavailable`). The wait for
   * a start ends early when `signal` aborts (the caller then answers `cancelled`).
   * @throws PunkError `ServerUnavailable` while the circuit is open or half-open, saying when it probes again.
   */
  private async connectionForCall(signal?: AbortSignal): Promise<Connection | undefined> {
    const renewal = this.renewal;
    if (renewal && renewal.of === this.connection) {
      // Sending on the refused connection would only be refused again; a failed renewal is the caller's to see.
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, this.callTimeoutMs)));
      await Promise.race([renewal.done.catch(() => undefined), bound]);
      clearTimeout(timer);
    }
    if (this.stateValue === 'idle' && !this.stopping) void this.attempt();
    if (this.stateValue === 'starting' && this.circuit === 'closed') {
      let onAbort = () => {};
      const aborted = new Promise<void>((resolve) => {
        onAbort = resolve;
        if (signal?.aborted) resolve();
        signal?.addEventListener('abort', onAbort, { once: true });
      });
      await Promise.race([this.connecting, aborted]);
      signal?.removeEventListener('abort', onAbort);
      if (signal?.aborted) return undefined;
    }
    if (this.circuit !== 'closed')
      throw new PunkError('ServerUnavailable', `server ${this.key} is unavailable: ${this.lastError ?? 'its circuit breaker is open'}`, {
        server: this.key,
        circuit: this.circuit,
      });
    return this.stateValue === 'ready' ? this.connection : undefined;
  }

  /** Feeds a call's outcome to the circuit breaker: a timeout or transport error is a failure, an answer a success. */
  private account(connection: Connection, outcome: CallOutcome): CallOutcome {
    if (outcome.ok) this.succeeded(connection);
    else if (outcome.kind === 'timeout' || outcome.kind === 'unavailable') this.callFailed(connection, outcome.message);
    // `exited` is counted by the process's exit handler, `cancelled` says nothing about the server.
    return outcome;
  }

  private succeeded(connection: Connection): void {
    if (connection === this.connection) this.failures = 0;
  }

  /** A call on `connection` failed: at the threshold the circuit opens (the connection is dropped and probed again after the backoff). */
  private callFailed(connection: Connection, message: string): void {
    if (connection !== this.connection) return;
    if (this.failures + 1 < BREAKER_FAILURE_THRESHOLD) {
      this.failures++;
      return;
    }
    this.connection = undefined;
    this.generation++;
    this.readySince = 0;
    void this.closeConnection(connection);
    this.fail(`calls failed ${this.failures + 1} times in a row (last: ${message})`, true);
  }

  /**
   * Connects again in place of `connection`: after an HTTP 401 (`renew`) with its OAuth2 credentials renewed, after
   * the server ended its session (HTTP 404) with the same headers. Calls that saw the same answer share one
   * reconnect. Resolves with the new connection.
   * @throws PunkError `UpstreamUnauthorized` when no header can be renewed or the upstream refuses the renewed ones,
   *   the vault's `CredentialRefreshFailed`, or the reconnect's error.
   */
  private async reconnectAfter(connection: Connection, renew: boolean): Promise<Connection> {
    if (this.renewal?.of !== connection) {
      const done = (async () => {
        const headers = renew ? await renewHeaders(connection.headers, this.options.secrets) : connection.headers;
        if (!headers) throw unauthorizedError(this.key, false);
        if (this.connection !== connection) return;
        this.connection = undefined;
        // The reconnect starts first: it says `starting` at once, so calls arriving meanwhile wait for it (connectionForCall).
        const reconnected = this.attempt(headers);
        await this.closeConnection(connection);
        const error = await reconnected;
        if (error !== undefined)
          throw error instanceof PunkError
            ? error
            : new PunkError('ServerUnavailable', `server ${this.key} could not be reached again: ${errorMessage(error)}`, {
                server: this.key,
              });
      })();
      this.renewal = { of: connection, done };
      // A failed renewal is not remembered: the next call refused with the same credentials asks the vault again.
      done.catch(() => {
        if (this.renewal?.done === done) this.renewal = undefined;
      });
    }
    await this.renewal.done;
    if (this.stateValue !== 'ready' || !this.connection)
      throw new PunkError('ServerUnavailable', `server ${this.key} is unavailable (${this.stateValue})`, { server: this.key });
    return this.connection;
  }

  private async relayOn(
    connection: Connection,
    call: RelayedCall,
    meta: Record<string, unknown> | undefined,
    link: ClientLink | undefined,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
  ): Promise<CallOutcome> {
    const timeoutMs = this.callTimeoutMs;
    const exchange = connection.exchange ?? sdkExchange(connection.client, (name) => this.toolDefinition(name));
    // What goes back to the client never holds a value resolved from the vault for this connection (an upstream may echo its headers).
    const hide = (text: string) => connection.redactForClient(text);
    const proc = connection.process;
    // Listened to for this call only: a `.then` on proc.exited would keep the call's closures until the process ends.
    let unwatchExit = () => {};
    const exited = new Promise<{ exit: ProcessExit }>((resolve) => {
      if (proc) unwatchExit = proc.onExit((exit) => resolve({ exit }));
    });
    // The upstream gets a progress token of Punk's own, mapped back to the client's (tokens are per connection).
    const clientToken = meta?.['progressToken'];
    const token = link && (typeof clientToken === 'string' || typeof clientToken === 'number') ? `punk-${randomUUID()}` : undefined;
    if (token) this.progress.set(token, { link: link!, clientToken: clientToken as string | number });
    // The call's log level (`io.modelcontextprotocol/logLevel`, MCP 2026-07-28) filters a shared connection's log
    // messages relayed to it (onLog); a 2026-07-28 upstream gets it with the request, a 2025-era one never sees the key.
    const { [LOG_LEVEL_META_KEY]: requestedLevel, ...clientMeta } = meta ?? {};
    const logLevel = requestedLevel === undefined ? undefined : logLevelSchema.safeParse(requestedLevel).data;
    if (link) this.links.set(link, logLevel);
    if (link && connection.client.getProtocolEra() === 'modern') this.modernLinks.add(link);
    try {
      const base = meta === undefined ? undefined : clientMeta;
      const withToken = token ? { ...base, progressToken: token } : base;
      // A 2026-07-28 upstream asks for client input with input_required results: passed through to a 2026-07-28
      // client, else answered here through the call's own link and retried (upstream-input.ts).
      const modern = connection.client.getProtocolEra() === 'modern';
      const sent = modern ? metaForModernUpstream({ ...withToken, ...(logLevel && { [LOG_LEVEL_META_KEY]: logLevel }) }, link) : withToken;
      const options = { timeout: timeoutMs, ...(signal && { signal }), ...(modern && { allowInputRequired: true }) };
      const rounds = async (): Promise<ExchangeAnswer> => {
        let retry = modern ? mode?.retry : undefined;
        for (let round = 1; ; round++) {
          const answer = await call(exchange, options, sent, retry);
          const value = answer.result;
          if (!modern || !isInputRequiredResult(value)) return answer;
          if (mode?.passThrough) {
            const instanceId = connection.process && this.options.instanceId;
            return {
              result: {
                ...value,
                [UPSTREAM_INPUT_REQUIRED]: true,
                ...(instanceId && { [UPSTREAM_INPUT_INSTANCE]: instanceId }),
              },
            };
          }
          if (round > MAX_INPUT_ROUNDS)
            throw new PunkError('UpstreamError', `server ${this.key} still asked for input after ${MAX_INPUT_ROUNDS} rounds`, {
              mcpCode: ProtocolErrorCode.InternalError,
            });
          retry = await answerInputRequests(this.key, value, link, hide);
        }
      };
      const settled = await Promise.race([rounds().then((answer) => ({ answer })), exited]);
      if ('exit' in settled) return this.exitedDuringCall(connection, settled.exit);
      const { result, text } = settled.answer;
      return {
        ok: true,
        result: connection.hideResultForClient(result, text),
        ...(text !== undefined && { bytes: Buffer.byteLength(text) }),
        redact: (message) => connection.redact(message),
      };
    } catch (error) {
      if (error instanceof PunkError) throw error;
      if (error instanceof ProtocolError) {
        this.succeeded(connection);
        // Not the server's error: Punk dropped its answer, too large to read (stdio-transport.ts).
        const dropped = droppedAnswerOf(error.data);
        if (dropped)
          throw new PunkError(
            'PayloadTooLarge',
            `server ${this.key} answered with ${dropped.bytes} bytes, past the limit of ${dropped.limit / 2} bytes (PUNK_MAX_RESULT_BYTES) and past the ${dropped.limit} bytes Punk reads from a stdio server (twice the limit), so Punk dropped it; raise PUNK_MAX_RESULT_BYTES to carry it`,
            { bytes: dropped.bytes, limit: dropped.limit / 2 },
          );
        throw new PunkError('UpstreamError', `server ${this.key} answered with an error: ${connection.redact(error.message)}`, {
          mcpCode: error.code,
          data: redactJson(error.data, hide),
        });
      }
      if (signal?.aborted) return { ok: false, kind: 'cancelled', message: `the client cancelled the call to server ${this.key}` };
      if (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout) {
        return {
          ok: false,
          kind: 'timeout',
          message: `server ${this.key} did not answer within ${String(timeoutMs)} ms (${this.callTimeoutSource}): the call timed out`,
        };
      }
      if (proc) {
        let timer: NodeJS.Timeout | undefined;
        const exit = await Promise.race([
          exited.then((e) => e.exit),
          new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), EXIT_GRACE_MS))),
        ]);
        clearTimeout(timer);
        if (exit) return this.exitedDuringCall(connection, exit);
      }
      return {
        ok: false,
        kind: 'unavailable',
        message: `server ${this.key} failed during the call: ${connection.redact(errorMessage(error))}`,
      };
    } finally {
      unwatchExit();
      if (link) {
        this.links.delete(link);
        this.modernLinks.delete(link);
      }
      if (token) {
        // The SDK dispatches notifications a microtask late: let a progress read with the result go out first.
        await new Promise((resolve) => setImmediate(resolve));
        this.progress.delete(token);
      }
    }
  }

  /** Relays an upstream `notifications/progress` to the client of the call whose token it carries; others are dropped. */
  private onProgress(params: Record<string, unknown>): void {
    const entry = this.progress.get(String(params['progressToken']));
    if (entry) entry.link.notify('notifications/progress', { ...params, progressToken: entry.clientToken });
  }

  /**
   * Relays a `notifications/message` of a shared connection to the client of the one call in flight, when its
   * level is at or above the call's log level (MCP 2025-11-25 server/utilities/logging): nothing on the wire
   * says which call a log message belongs to (as for {@link serverRequest}), so with none or several calls in
   * flight it is dropped.
   */
  private onLog(params: Record<string, unknown>): void {
    const live = [...this.links];
    if (live.length !== 1) {
      this.options.log.debug(
        { server: this.key, calls: live.length },
        'a log message of a shared connection was dropped: no one call it belongs to',
      );
      return;
    }
    const [link, threshold] = live[0]!;
    if (passesLogLevel(params['level'], threshold)) link.notify('notifications/message', params);
  }

  private exitedDuringCall(connection: Connection, exit: ProcessExit): CallOutcome {
    const how = exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
    const tail = connection.process!.stderrTail(3);
    return {
      ok: false,
      kind: 'exited',
      message: connection.redact(`server ${this.key} exited during the call (${how})${tail.length ? `; stderr: ${tail.join(' | ')}` : ''}`),
    };
  }

  /** `text` with the secret values of `connection` (by default the current one) hidden (`Connection.redact`). */
  private hide(text: string, connection: Connection | undefined = this.connection): string {
    return connection ? connection.redact(text) : text;
  }

  /**
   * Starts a connection attempt (the first start, a restart, a circuit probe, a reconnect after idleness or after
   * renewed credentials) and records it as the one under way. Resolves with the attempt's error, if it failed.
   */
  private attempt(renewedHeaders?: ResolvedHeader[]): Promise<unknown> {
    const run = this.connect(renewedHeaders);
    this.connecting = run;
    return run;
  }

  private async connect(renewedHeaders: ResolvedHeader[] | undefined): Promise<unknown> {
    const generation = ++this.generation;
    clearTimeout(this.restartTimer);
    this.setState('starting', this.lastError);
    let connection: Connection;
    try {
      const pinned = PINNED_ERA[this.options.server.spec.protocolEra ?? ''];
      connection = await openConnection(this.options.server, {
        ...this.connectOptions(),
        signal: (this.startAbort = new AbortController()).signal,
        onListChanged: () => void this.refresh(generation),
        onResourceUpdated: (uri) => {
          this.options.onResourceUpdated(this, uri);
        },
        ...(renewedHeaders && { renewedHeaders }),
        ...(pinned && { era: pinned }),
      });
    } catch (error) {
      if (generation !== this.generation) return error;
      this.fail(errorMessage(error), !(error instanceof PunkError && FINAL_START_ERRORS.has(error.code)));
      return error;
    }
    if (generation !== this.generation) {
      await this.closeConnection(connection);
      return new PunkError('ServerUnavailable', `server ${this.key} was stopped or changed while connecting`, { server: this.key });
    }
    this.connection = connection;
    this.transport = connection.transport;
    this.warnings = connection.warnings ?? (() => []);
    const client = connection.client;
    this.identity = {
      ...(client.getNegotiatedProtocolVersion() !== undefined && { protocolVersion: client.getNegotiatedProtocolVersion()! }),
      ...(client.getServerVersion() !== undefined && { serverInfo: { ...client.getServerVersion() } }),
      ...(client.getInstructions() !== undefined && { instructions: client.getInstructions()! }),
      capabilities: { ...client.getServerCapabilities() },
    };
    void connection.process?.exited.then((exit) => {
      if (generation !== this.generation || this.stopping) return;
      this.connection = undefined;
      if (this.other?.of === connection) void this.closeOther();
      void client.close().catch(() => undefined);
      this.fail(connection.redact(`server process ${connection.process!.describeExit(exit)}`), true);
    });
    // Listings reach clients too: no secret value of the connection in a tool's description or schema.
    const listings = redactJson(await this.list(client), (text) => connection.redactForClient(text));
    // The process may have exited (or the server been stopped) while listing.
    if (generation !== this.generation || this.connection !== connection)
      return new PunkError('ServerUnavailable', `server ${this.key} was lost while listing`, { server: this.key });
    // Reconnected after idleness or a restart: notifications/list_changed sent meanwhile never reached us.
    const changed = this.listed && JSON.stringify(listings) !== JSON.stringify(this.listings);
    this.listings = listings;
    this.listed = true;
    for (const uri of this.subscribed) {
      subscribeOn(client, uri, this.startTimeoutMs).catch((error: unknown) =>
        this.options.log.warn(
          { server: this.key, uri, err: connection.redact(errorMessage(error)) },
          'could not renew a resource subscription after a restart',
        ),
      );
    }
    this.readySince = Date.now();
    this.setState('ready', undefined);
    if (changed) this.options.onListChanged(this);
    this.armIdle();
    return undefined;
  }

  /** The options of every connection to the server (the pooled one and the one of the other era), but its listing hooks. */
  private connectOptions(): Omit<ConnectOptions, 'onListChanged' | 'onResourceUpdated'> {
    return {
      log: this.options.log,
      workDir: this.options.workDir,
      ...(this.options.extraEnv && { extraEnv: this.options.extraEnv }),
      ...(this.options.maxMessageBytes !== undefined && { maxMessageBytes: this.options.maxMessageBytes }),
      timeoutMs: this.startTimeoutMs,
      onServerRequest: (method, params) => this.serverRequest(method, params),
      onProgress: (params) => {
        this.onProgress(params);
      },
      onLog: (params) => {
        this.onLog(params);
      },
      ...(this.options.session && { session: this.options.session }),
      ...(this.options.fetch && { fetch: this.options.fetch }),
      ...(this.options.secrets && { secrets: this.options.secrets }),
    };
  }

  /**
   * The connection a call of a client of `era` goes out on (MCP: a server that speaks both eras is reached in the era of
   * the client's request, so it asks for client input the way that client takes it): `pooled` when it speaks that era,
   * when the manifest pins one (`spec.protocolEra`), when the call has no client, and when the server is not reached in
   * that era otherwise; else a second connection in that era, opened on the first such call (a process of its own for a
   * stdio server; the call waits for it at most {@link OTHER_ERA_WAIT_MS}) and kept beside `pooled`. A server that refuses the era is asked again only after `pooled` is replaced.
   * A Streamable HTTP server is reached in 2025 beside 2026-07-28 only when its 2025 endpoint opens a session: a stateless
   * one cannot carry the server's requests to its clients, which the 2026-07-28 connection bridges (upstream-input.ts).
   * A streamable-http or sse server Punk starts itself is reached on its one connection (its port is its own).
   */
  private async connectionInEra(pooled: Connection, era: ProtocolEra | undefined): Promise<Connection> {
    const spec = this.options.server.spec;
    if (era === undefined || spec.protocolEra !== undefined || pooled.client.getProtocolEra() === era) return pooled;
    if (pooled.transport === 'sse' || (spec.url === undefined && pooled.transport !== 'stdio')) return pooled;
    if (this.other?.of !== pooled) {
      void this.closeOther();
      this.other = { of: pooled, era };
    }
    const other = this.other;
    if (other.refused) return pooled;
    other.opening ??= this.openOther(other);
    // A server that never answers the other era's handshake must not hold the call for the whole start timeout: past
    // the bound the call goes out on `pooled`, and the opening goes on for the calls after it.
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<undefined>((resolve) => {
      timer = setTimeout(
        () => {
          resolve(undefined);
        },
        Math.min(OTHER_ERA_WAIT_MS, this.startTimeoutMs),
      );
    });
    try {
      return (await Promise.race([other.opening, bound])) ?? pooled;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Opens the connection of `other` (see {@link connectionInEra}); resolves with none when the server refuses that era. */
  private async openOther(other: OtherEraConnection): Promise<Connection | undefined> {
    const what = other.era === 'modern' ? 'the 2026-07-28 era' : 'the 2025 era';
    try {
      const connection = await openConnection(this.options.server, {
        ...this.connectOptions(),
        era: other.era,
        // The pooled connection lists and carries subscriptions; this one only relays calls.
        onListChanged: () => undefined,
        onResourceUpdated: () => undefined,
      });
      const transport = connection.client.transport;
      if (other.era === 'legacy' && transport instanceof StreamableHTTPClientTransport && transport.sessionId === undefined) {
        await this.closeConnection(connection);
        throw new Error('its 2025-era endpoint is stateless (no Mcp-Session-Id): its requests to clients could not reach them there');
      }
      if (this.other !== other) {
        await this.closeConnection(connection);
        return undefined;
      }
      other.connection = connection;
      void connection.process?.exited.then(() => {
        if (this.other === other) this.other = undefined;
      });
      this.options.log.info({ server: this.key, era: other.era }, `server ${this.key} is reached in ${what} too, for clients of that era`);
      return connection;
    } catch (error) {
      other.refused = true;
      // Expected of most servers today (they speak one era): the bridge serves that era's clients, so no alarm.
      this.options.log.debug(
        { server: this.key, era: other.era, err: this.hide(errorMessage(error)) },
        `server ${this.key} does not speak ${what}; its clients of that era are bridged over its one connection`,
      );
      return undefined;
    }
  }

  /** Closes the connection of the other era, if any (with its pooled connection, or after it failed a call). */
  private async closeOther(): Promise<void> {
    const other = this.other;
    this.other = undefined;
    const connection = await other?.opening;
    if (connection) await this.closeConnection(connection);
  }

  /**
   * Records a failure: the server is `failed` and, with `retry`, connected again after the backoff. At
   * {@link BREAKER_FAILURE_THRESHOLD} consecutive failures `lastError` says the circuit is open and when it probes.
   */
  private fail(message: string, retry: boolean): void {
    this.cause = message;
    if (this.readySince > 0 && Date.now() - this.readySince > STABLE_MS) this.failures = 0;
    this.readySince = 0;
    this.failures++;
    if (!retry || this.stopping) {
      this.setState('failed', message);
      return;
    }
    const delay = Math.min((this.options.initialBackoffMs ?? INITIAL_BACKOFF_MS) * 2 ** (this.failures - 1), MAX_BACKOFF_MS);
    const open = this.failures >= BREAKER_FAILURE_THRESHOLD;
    const probe = new Date(Date.now() + delay).toISOString();
    this.setState(
      'failed',
      open ? `circuit open after ${this.failures} consecutive failures, next probe at ${probe}; last failure: ${message}` : message,
    );
    this.options.log.info(
      { server: this.key, delayMs: delay, failures: this.failures, circuit: this.circuit },
      open ? 'circuit open: probing the server after backoff' : 'restarting server after backoff',
    );
    this.restartTimer = setTimeout(() => void this.attempt(), delay);
  }

  /** Closes the connection after `idleTimeoutMs` without calls, unless it carries resource subscriptions. */
  private armIdle(): void {
    clearTimeout(this.idleTimer);
    const idleMs = this.options.idleTimeoutMs;
    if (idleMs === undefined || this.queue.inFlight > 0 || this.stateValue !== 'ready' || this.subscribed.size > 0) return;
    this.idleTimer = setTimeout(() => void this.closeIdle(), idleMs);
    this.idleTimer.unref();
  }

  private async closeIdle(): Promise<void> {
    const connection = this.connection;
    if (this.queue.inFlight > 0 || this.stateValue !== 'ready' || this.stopping || !connection) return;
    this.connection = undefined;
    this.generation++;
    this.setState('idle', undefined);
    this.options.log.info(
      { server: this.key, idleMs: this.options.idleTimeoutMs },
      `closed the idle connection to server ${this.key}; the next call reconnects`,
    );
    await this.closeConnection(connection);
  }

  /** Lists every page of every advertised capability; a failed list is logged and left empty. */
  private async list(client: Client): Promise<Listings> {
    const caps = client.getServerCapabilities() ?? {};
    const timeout = this.startTimeoutMs;
    const attempt = async <T>(what: string, enabled: boolean, run: () => Promise<T[]>): Promise<McpItem[]> => {
      if (!enabled) return [];
      try {
        return (await run()) as McpItem[];
      } catch (error) {
        this.options.log.warn({ server: this.key, err: this.hide(errorMessage(error)) }, `listing ${what} failed`);
        return [];
      }
    };
    const [listedTools, resources, resourceTemplates, prompts] = await Promise.all([
      attempt('tools', !!caps.tools, async () => (await client.listTools(undefined, { timeout, cacheMode: 'refresh' })).tools),
      attempt(
        'resources',
        !!caps.resources,
        async () => (await client.listResources(undefined, { timeout, cacheMode: 'refresh' })).resources,
      ),
      attempt(
        'resource templates',
        !!caps.resources,
        async () => (await client.listResourceTemplates(undefined, { timeout, cacheMode: 'refresh' })).resourceTemplates,
      ),
      attempt('prompts', !!caps.prompts, async () => (await client.listPrompts(undefined, { timeout, cacheMode: 'refresh' })).prompts),
    ]);
    const tools = caps.tools ? await this.reviewed(listedTools) : listedTools;
    return { tools, resources, resourceTemplates, prompts };
  }

  /** The tools listing as `reviewTools` lets it be served; the previous listing when the review fails (fail closed). */
  private async reviewed(tools: McpItem[]): Promise<McpItem[]> {
    const review = this.options.reviewTools;
    if (!review) return tools;
    try {
      return await review(this, tools);
    } catch (error) {
      this.options.log.error(
        { server: this.key, err: errorMessage(error) },
        'the review of a tools listing failed; the previous listing is kept',
      );
      return this.listings.tools;
    }
  }

  /** Lists the server again now (as on its `list_changed`), e.g. after an admin accepted a tool definition; a no-op while not connected (the next connect lists). */
  async relist(): Promise<void> {
    await this.refresh(this.generation);
  }

  private async refresh(generation: number): Promise<void> {
    const connection = this.connection;
    if (!connection || generation !== this.generation) return;
    const refused = connection.unauthorized();
    const lost = connection.sessionLost();
    const listings = redactJson(await this.list(connection.client), (text) => connection.redactForClient(text));
    if (generation !== this.generation) return;
    const renew = connection.unauthorized() !== refused;
    if (renew || connection.sessionLost() !== lost) {
      // The upstream refused the credentials (renewed once) or ended the session while listing: reconnect, as a
      // call would (the reconnect lists again); until then the previous listings stay served.
      await this.reconnectAfter(connection, renew).catch((error: unknown) =>
        this.options.log.warn(
          { server: this.key, err: this.hide(errorMessage(error)) },
          `reconnecting after the upstream ${renew ? 'refused its credentials' : 'ended its session'} while listing failed`,
        ),
      );
      return;
    }
    this.listings = listings;
    this.options.log.info({ server: this.key }, 'server listings changed');
    this.options.onListChanged(this);
  }

  private async dropConnection(): Promise<void> {
    const connection = this.connection;
    this.connection = undefined;
    if (connection) await this.closeConnection(connection);
  }

  /**
   * Closes a connection (bounded: a dead HTTP server must not hold the close): a Streamable HTTP session is
   * ended with DELETE (MCP 2025-11-25 basic/transports "Session Management"), the client closed, the process stopped.
   */
  private async closeConnection(connection: Connection): Promise<void> {
    if (this.other?.of === connection) await this.closeOther();
    const transport = connection.client.transport;
    const close = async () => {
      if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession().catch(() => undefined);
      await connection.client.close().catch(() => undefined);
    };
    await Promise.race([close(), new Promise((resolve) => setTimeout(resolve, 2_000).unref())]);
    await connection.process?.stop();
  }

  private setState(state: ServerState, lastError: string | undefined): void {
    const changed = state !== this.stateValue || lastError !== this.lastError;
    this.stateValue = state;
    this.lastError = lastError;
    if (state === 'ready' || state === 'failed') this.settleFirstStart();
    if (changed) this.options.onState(this, state, lastError);
  }
}

/** `spec.protocolEra` as the era of a connection. */
const PINNED_ERA: Record<string, ProtocolEra> = { '2025': 'legacy', '2026': 'modern' };

/** The connection of an upstream in the other era than its pooled connection's (`of`), while it opens and once open. */
interface OtherEraConnection {
  of: Connection;
  era: ProtocolEra;
  opening?: Promise<Connection | undefined>;
  connection?: Connection;
  /** The server could not be reached in that era on this pooled connection's watch. */
  refused?: boolean;
}

/**
 * Subscribes `client` to updates of `uri`: `resources/subscribe` on a 2025-era connection (MCP 2025-11-25
 * server/resources "Subscriptions"); on a 2026-07-28 connection, which has no such method, a
 * `subscriptions/listen` stream filtered to that URI (MCP 2026-07-28 basic/utilities/subscriptions), open for the
 * connection's lifetime. Either way `notifications/resources/updated` reaches the client's handler.
 * @throws what the SDK throws when the upstream refuses or does not answer within `timeoutMs`.
 */
async function subscribeOn(client: Client, uri: string, timeoutMs: number): Promise<void> {
  if (client.getProtocolEra() === 'modern') await client.listen({ resourceSubscriptions: [uri] }, { timeout: timeoutMs });
  else await client.subscribeResource({ uri }, { timeout: timeoutMs });
}
