/**
 * One MCP session of the bridge: a stdio MCP server child process (the SDK's StdioClientTransport) joined to the
 * session's Streamable HTTP server transport (the SDK's NodeStreamableHTTPServerTransport, MCP 2025-11-25
 * basic/transports). Messages are forwarded whole at the JSON-RPC level in both directions: the client's
 * requests, notifications and answers go to the child's stdin; the child's responses go to the HTTP stream of
 * the request they answer, its progress to the stream of the request that carries the progress token, its
 * own requests (elicitation, sampling, roots, ping) and log messages to the stream of a request in flight, and
 * everything else (list_changed, resources/updated) to the session's GET stream. JSON-RPC ids need no rewriting:
 * each direction has its own id space and one client per child.
 */
import { randomUUID } from 'node:crypto';
import { subscribe } from 'node:diagnostics_channel';
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import {
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/server';
import type { Logger } from '../log.js';

/** JSON-RPC error code of a request whose session ended before it was answered (the SDK's "connection closed"). */
export const SESSION_ENDED = -32000;

// The SDK's StdioClientTransport reports a close but not the exit code. Node announces every ChildProcess it
// creates on the `child_process` diagnostics channel, synchronously inside spawn(), so the session that is
// starting its transport at that moment takes the process object and learns the code from it.
let spawning: ((child: ChildProcess) => void) | undefined;
subscribe('child_process', (message) => spawning?.((message as { process: ChildProcess }).process));

/** What a session needs. */
export interface SessionOptions {
  command: string;
  args: string[];
  /** The child's whole environment. */
  env: Record<string, string>;
  /** Close after this long without a message either way and nothing in flight, in milliseconds. */
  idleTimeoutMs: number;
  log: Logger;
  /** Called once the session has ended, with why. */
  onEnded: (session: BridgeSession, reason: string) => void;
  /** Called when the HTTP transport minted the session id (the `initialize` request arrived). */
  onInitialized: (session: BridgeSession) => void;
}

/** One HTTP MCP session and its child process. */
export class BridgeSession {
  /** The HTTP side; requests of this session go to its `handleRequest`. */
  readonly http: NodeStreamableHTTPServerTransport;
  private readonly child: StdioClientTransport;
  private process: ChildProcess | undefined;
  /** Client requests forwarded to the child and not answered yet, with the progress token each carries. */
  private readonly pending = new Map<RequestId, { progressToken: unknown; initialize: boolean }>();
  /** Child requests forwarded to the client and not answered yet. */
  private readonly awaitingClient = new Set<RequestId>();
  private readonly supportedVersions = [...SUPPORTED_PROTOCOL_VERSIONS];
  private lastActivity = Date.now();
  private idleTimer: NodeJS.Timeout | undefined;
  private ending: Promise<void> | undefined;

  private constructor(private readonly options: SessionOptions) {
    this.child = new StdioClientTransport({ command: options.command, args: options.args, env: options.env, stderr: 'pipe' });
    this.http = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      supportedProtocolVersions: this.supportedVersions,
      onsessioninitialized: () => options.onInitialized(this),
      onsessionclosed: () => void this.end('the client ended the session (DELETE)'),
    });
  }

  /**
   * Spawns the child and joins it to a new HTTP transport.
   * @throws Error when the command cannot be started (not found, not executable), naming it.
   */
  static async start(options: SessionOptions): Promise<BridgeSession> {
    const session = new BridgeSession(options);
    await session.open();
    return session;
  }

  /** The session id, once `initialize` arrived. */
  get id(): string | undefined {
    return this.http.sessionId;
  }

  /** The child's process id. */
  get pid(): number | undefined {
    return this.process?.pid;
  }

  /** Marks the session active (an HTTP request of it arrived). */
  touch(): void {
    this.lastActivity = Date.now();
  }

  private async open(): Promise<void> {
    const { log } = this.options;
    this.forwardStderr(this.child.stderr as Readable);
    spawning = (child) => (this.process = child);
    let started: Promise<void>;
    try {
      started = this.child.start();
    } finally {
      spawning = undefined;
    }
    try {
      await started;
    } catch (error) {
      throw new Error(`the MCP server command ${JSON.stringify(this.options.command)} could not be started: ${(error as Error).message}`, {
        cause: error,
      });
    }
    log.info({ pid: this.pid, command: this.options.command }, 'started the MCP server process');
    this.child.onmessage = (message) => this.fromChild(message);
    this.child.onerror = (error) => log.warn({ session: this.id, pid: this.pid, err: error.message }, 'stdio transport error');
    this.child.onclose = () => void this.end(this.exitText());
    this.http.onmessage = (message) => this.fromClient(message);
    this.http.onerror = (error) => log.debug({ session: this.id, err: error.message }, 'HTTP transport refused a request');
    this.http.onclose = () => void this.end('the HTTP transport closed');
    await this.http.start();
    this.armIdle();
  }

  private forwardStderr(stderr: Readable): void {
    createInterface({ input: stderr, crlfDelay: Infinity }).on('line', (line) =>
      this.options.log.info({ session: this.id, pid: this.pid, stream: 'stderr' }, line),
    );
  }

  private fromClient(message: JSONRPCMessage): void {
    this.touch();
    if (isJSONRPCRequest(message)) {
      const meta = (message.params as { _meta?: { progressToken?: unknown } } | undefined)?._meta;
      this.pending.set(message.id, { progressToken: meta?.progressToken, initialize: message.method === 'initialize' });
    } else if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') {
      // A cancelled request gets no answer (MCP basic/utilities/cancellation): stop waiting for one.
      this.pending.delete((message.params as { requestId?: RequestId } | undefined)?.requestId as RequestId);
    } else if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      this.awaitingClient.delete(message.id as RequestId);
    }
    this.child.send(message).catch((error: unknown) => {
      this.options.log.warn({ session: this.id, err: (error as Error).message }, 'could not write to the MCP server process');
      if (isJSONRPCRequest(message))
        this.answer(message.id, `the MCP server process did not take the request: ${(error as Error).message}`);
    });
  }

  private fromChild(message: JSONRPCMessage): void {
    this.touch();
    if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) {
      const request = this.pending.get(message.id as RequestId);
      if (!request) {
        this.options.log.debug(
          { session: this.id, id: message.id },
          'the MCP server answered a request that is not pending (cancelled or unknown); dropped',
        );
        return;
      }
      this.pending.delete(message.id as RequestId);
      if (request.initialize && isJSONRPCResultResponse(message)) this.acceptVersion(message.result.protocolVersion);
      this.toClient(message);
      if (request.initialize && isJSONRPCErrorResponse(message))
        void this.end(`the MCP server refused initialize: ${message.error.message}`);
      return;
    }
    if (isJSONRPCRequest(message)) this.awaitingClient.add(message.id);
    else if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') {
      this.awaitingClient.delete((message.params as { requestId?: RequestId } | undefined)?.requestId as RequestId);
    }
    this.toClient(message, this.relatedRequest(message));
  }

  /** The protocol version the child negotiated is what the client's `MCP-Protocol-Version` header will say. */
  private acceptVersion(version: unknown): void {
    if (typeof version === 'string' && !this.supportedVersions.includes(version)) {
      this.supportedVersions.push(version);
      this.http.setSupportedProtocolVersions(this.supportedVersions);
    }
  }

  /** The client request whose HTTP stream should carry a message of the child that is not a response. */
  private relatedRequest(message: JSONRPCMessage): RequestId | undefined {
    if (!isJSONRPCRequest(message) && !isJSONRPCNotification(message)) return undefined;
    if (message.method === 'notifications/progress') {
      const token = (message.params as { progressToken?: unknown } | undefined)?.progressToken;
      for (const [id, request] of this.pending) if (request.progressToken !== undefined && request.progressToken === token) return id;
      return undefined;
    }
    // Changes of the session's lists and resources are not about any request: the GET stream carries them.
    if (message.method.endsWith('/list_changed') || message.method === 'notifications/resources/updated') return undefined;
    // stdio does not say which request an elicitation, sampling request or log message belongs to; a stream
    // still open reaches the client (whose answer comes back in a POST of its own), the GET stream may be absent.
    let last: RequestId | undefined;
    for (const [id, request] of this.pending) if (!request.initialize) last = id;
    return last;
  }

  private toClient(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    this.http.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId }).catch((error: unknown) => {
      this.options.log.debug(
        { session: this.id, err: (error as Error).message },
        'a message of the MCP server could not be delivered to the client',
      );
    });
  }

  /** Answers a pending client request with an error. */
  private answer(id: RequestId, message: string, data?: Record<string, unknown>): void {
    if (!this.pending.delete(id)) return;
    this.toClient({ jsonrpc: '2.0', id, error: { code: SESSION_ENDED, message, ...(data && { data }) } });
  }

  private exitText(): string {
    const code = this.process?.exitCode ?? null;
    const signal = this.process?.signalCode ?? null;
    if (code !== null) return `the MCP server process exited with code ${code}`;
    if (signal !== null) return `the MCP server process was killed by ${signal}`;
    return 'the MCP server process closed its standard output';
  }

  private armIdle(): void {
    const left = this.lastActivity + this.options.idleTimeoutMs - Date.now();
    this.idleTimer = setTimeout(
      () => {
        if (this.ending) return;
        if (this.pending.size > 0 || this.awaitingClient.size > 0) this.touch();
        if (Date.now() - this.lastActivity >= this.options.idleTimeoutMs)
          void this.end(`idle for ${this.options.idleTimeoutMs} ms (--session-idle-timeout)`);
        else this.armIdle();
      },
      Math.max(left, 10),
    );
    this.idleTimer.unref();
  }

  /**
   * Ends the session: every request still pending is answered with an error saying `reason`, the HTTP streams
   * close, and the child is stopped (stdin closed, then SIGTERM, then SIGKILL, by the SDK transport). Idempotent.
   */
  end(reason: string): Promise<void> {
    if (this.ending) return this.ending;
    let settle!: () => void;
    // Set before anything runs: closing the transports below calls back into end().
    this.ending = new Promise((resolve) => (settle = resolve));
    void (async () => {
      clearTimeout(this.idleTimer);
      const exited = this.process !== undefined && (this.process.exitCode !== null || this.process.signalCode !== null);
      const data = { exitCode: this.process?.exitCode ?? null, signal: this.process?.signalCode ?? null };
      for (const id of [...this.pending.keys()])
        this.answer(id, `${reason} before answering; the session has ended`, exited ? data : undefined);
      this.options.onEnded(this, reason);
      await this.http.close().catch(() => undefined);
      await this.child.close().catch(() => undefined);
    })().finally(settle);
    return this.ending;
  }
}
