/**
 * What a stdio MCP client asks of `punk mcp --relay` that the SDK's `serveStdio` keeps from the server it builds:
 * the capabilities of a 2025-era `initialize` (the factory of the instance runs before `initialize` is answered, and
 * the relay declares the same ones to the deployment: MCP 2025-11-25 basic/lifecycle), and the
 * `subscriptions/listen` streams of a 2026-07-28 client, which the entry serves itself (MCP 2026-07-28
 * basic/utilities/subscriptions), with their `resourceSubscriptions`. {@link StdioWatch.transport} is the stdio
 * transport that reads each inbound message to this watch before handing it on.
 */
import type { ClientCapabilities, JSONRPCMessage, MessageExtraInfo, Transport, TransportSendOptions } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';

/** What the watch tells of a 2026-07-28 client's `subscriptions/listen` streams. */
export interface ListenWatcher {
  /** A `subscriptions/listen` with request id `id` asked for updates of these resource URIs. */
  opened(id: string | number, resourceSubscriptions: string[]): void;
  /** The client cancelled the listen request `id` (`notifications/cancelled`). */
  closed(id: string | number): void;
}

/** The stdio transport of one `punk mcp --relay` process, with what its client opened with and listens to. */
export class StdioWatch {
  /** The capabilities of the client's 2025-era `initialize`, once it came (`undefined` before, and for 2026-07-28 clients). */
  clientCapabilities: ClientCapabilities | undefined;
  /** The client's open listen streams asking for resource updates: request id → URIs. */
  private readonly listening = new Map<string | number, string[]>();
  private watcher: ListenWatcher | undefined;
  /** Give this to `serveStdio({ transport })`. */
  readonly transport: Transport;

  constructor(inner: Transport = new StdioServerTransport()) {
    const watch = (message: JSONRPCMessage) => this.read(message);
    const outer: Transport = {
      start: () => inner.start(),
      send: (message: JSONRPCMessage, options?: TransportSendOptions) => inner.send(message, options),
      close: () => inner.close(),
    };
    inner.onmessage = (message: JSONRPCMessage, extra?: MessageExtraInfo) => {
      watch(message);
      outer.onmessage?.(message, extra);
    };
    inner.onclose = () => outer.onclose?.();
    inner.onerror = (error) => outer.onerror?.(error);
    this.transport = outer;
  }

  /**
   * Tells `watcher` of each listen stream from now on, and at once of those already open (the first request of a
   * connection may be a listen, read before the server that serves it is built).
   */
  watchListens(watcher: ListenWatcher): void {
    this.watcher = watcher;
    for (const [id, uris] of this.listening) watcher.opened(id, uris);
  }

  private read(message: JSONRPCMessage): void {
    if (!('method' in message)) return;
    const params = (message.params ?? {}) as Record<string, unknown>;
    if ('id' in message && message.method === 'initialize') {
      this.clientCapabilities = (params['capabilities'] ?? {}) as ClientCapabilities;
    } else if ('id' in message && message.method === 'subscriptions/listen') {
      const uris = (params['notifications'] as { resourceSubscriptions?: unknown } | undefined)?.resourceSubscriptions;
      if (!Array.isArray(uris) || uris.length === 0) return;
      const strings = uris.filter((uri): uri is string => typeof uri === 'string');
      this.listening.set(message.id, strings);
      this.watcher?.opened(message.id, strings);
    } else if (message.method === 'notifications/cancelled') {
      const id = params['requestId'];
      if ((typeof id === 'string' || typeof id === 'number') && this.listening.delete(id)) this.watcher?.closed(id);
    }
  }
}
