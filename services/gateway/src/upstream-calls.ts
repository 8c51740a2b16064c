/**
 * The calls in flight on one upstream's connections: each relayed on its connection's exchange (upstream-exchange.ts),
 * its answer turned into a {@link CallOutcome}, and the upstream's progress, log messages and server-to-client requests
 * routed to the client of the call they belong to. Queueing, reconnects and the circuit breaker are upstream.ts's.
 */
import { randomUUID } from 'node:crypto';
import {
  isInputRequiredResult,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  SdkError,
  SdkErrorCode,
  type Tool,
} from '@modelcontextprotocol/client';
import {
  errorMessage,
  logLevelSchema,
  passesLogLevel,
  PunkError,
  UPSTREAM_INPUT_INSTANCE,
  UPSTREAM_INPUT_REQUIRED,
  type Logger,
  type LogLevel,
  redactJson,
} from '@punk/lib';
import type { ClientLink } from './client-channel.js';
import type { Connection, ForwardedMethod } from './connect.js';
import type { ProcessExit } from './process.js';
import { droppedAnswerOf } from './stdio-transport.js';
import { sdkExchange, type ExchangeAnswer, type ExchangeOptions, type UpstreamExchange } from './upstream-exchange.js';
import { answerInputRequests, MAX_INPUT_ROUNDS, metaForModernUpstream, type InputRequiredMode, type InputRetry } from './upstream-input.js';

/** How long a closed connection waits for its process's exit code before reporting. */
const EXIT_GRACE_MS = 1_000;

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
export type RelayedCall = (
  exchange: UpstreamExchange,
  options: ExchangeOptions,
  meta: Record<string, unknown> | undefined,
  retry?: InputRetry,
) => Promise<ExchangeAnswer>;

/** What {@link UpstreamCalls} needs of its upstream. */
export interface UpstreamCallsOptions {
  /** `<namespace>/<name>` of the server. */
  key: string;
  log: Logger;
  /** This gateway replica's name, put on a pass-through `input_required` of a server process of it (UpstreamOptions.instanceId). */
  instanceId?: string;
  /** The call deadline now, in milliseconds, and where it comes from (for the timeout's message). */
  callTimeout: () => { ms: number; source: string };
  /** The tool's definition for the SDK client's `callTool` on a wire without an exchange of its own. */
  toolDefinition: (name: string) => Tool;
  /** The server answered (a JSON-RPC error is an answer): the circuit breaker counts a success. */
  answered: (connection: Connection) => void;
}

/** The calls in flight on one upstream (see the module comment). */
export class UpstreamCalls {
  /** Progress tokens Punk gave the upstream for calls in flight, to the client's link and own token. */
  private readonly progress = new Map<string, { link: ClientLink; clientToken: string | number }>();
  /** Clients of the calls in flight that can receive messages, to the log level each call asked for (none: every level). */
  private readonly links = new Map<ClientLink, LogLevel | undefined>();
  /** Those of {@link links} whose call went out on a 2026-07-28 connection (which sends no server-to-client request). */
  private readonly modernLinks = new Set<ClientLink>();
  /** Clients of calls in flight that were sent a server-to-client request they have not answered yet, to how many. */
  private readonly asking = new Map<ClientLink, number>();

  constructor(private readonly options: UpstreamCallsOptions) {}

  private get key(): string {
    return this.options.key;
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
  async serverRequest(method: ForwardedMethod, params: Record<string, unknown> | undefined): Promise<Record<string, unknown>> {
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
   * Relays one call on `connection` (its progress and server-to-client requests reach `link` meanwhile; `signal`
   * cancels it upstream) and says how it ended.
   * @throws PunkError `UpstreamError` for the server's JSON-RPC error, `PayloadTooLarge` for an answer Punk dropped.
   */
  async relayOn(
    connection: Connection,
    call: RelayedCall,
    meta: Record<string, unknown> | undefined,
    link: ClientLink | undefined,
    signal?: AbortSignal,
    mode?: InputRequiredMode,
  ): Promise<CallOutcome> {
    const { ms: timeoutMs, source: timeoutSource } = this.options.callTimeout();
    const exchange = connection.exchange ?? sdkExchange(connection.client, this.options.toolDefinition);
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
      const options = {
        timeout: timeoutMs,
        ...(signal && { signal }),
        ...(modern && { allowInputRequired: true }),
        toolDefinition: this.options.toolDefinition,
      };
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
        this.options.answered(connection);
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
          message: `server ${this.key} did not answer within ${String(timeoutMs)} ms (${timeoutSource}): the call timed out`,
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
  onProgress(params: Record<string, unknown>): void {
    const entry = this.progress.get(String(params['progressToken']));
    if (entry) entry.link.notify('notifications/progress', { ...params, progressToken: entry.clientToken });
  }

  /**
   * Relays a `notifications/message` of a shared connection to the client of the one call in flight, when its
   * level is at or above the call's log level (MCP 2025-11-25 server/utilities/logging): nothing on the wire
   * says which call a log message belongs to (as for {@link serverRequest}), so with none or several calls in
   * flight it is dropped.
   */
  onLog(params: Record<string, unknown>): void {
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
}
