/**
 * The second connection of an upstream, in the other protocol era than its pooled connection's, for the calls of
 * clients of that era (MCP: a server that speaks both eras is reached in the era of the client's request): opened on
 * the first such call, closed with the pooled connection it belongs to.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { errorMessage, type Logger, type McpServer } from '@punk/lib';
import type { Connection, ProtocolEra } from './connect.js';

/** Longest wait of a call for the connection of its client's era to open (at most the start timeout), in milliseconds. */
const OTHER_ERA_WAIT_MS = 10_000;

/** What {@link OtherEraConnections} needs of its upstream. */
export interface OtherEraOptions {
  server: McpServer;
  /** `<namespace>/<name>` of the server. */
  key: string;
  log: Logger;
  /** The start budget now, in milliseconds. */
  startTimeoutMs: () => number;
  /** Opens a connection to the server in `era` that only relays calls (the pooled one lists and carries subscriptions). */
  open: (era: ProtocolEra) => Promise<Connection>;
  /** Closes a connection (bounded), its process too. */
  close: (connection: Connection) => Promise<void>;
  /** `text` with the pooled connection's secret values hidden. */
  hide: (text: string) => string;
}

/** The connection of an upstream in the other era than its pooled connection's (`of`), while it opens and once open. */
interface OtherEraConnection {
  of: Connection;
  era: ProtocolEra;
  opening?: Promise<Connection | undefined>;
  connection?: Connection;
  /** The server could not be reached in that era on this pooled connection's watch. */
  refused?: boolean;
}

/** The connection in the other era of one upstream (see the module comment). */
export class OtherEraConnections {
  private other: OtherEraConnection | undefined;

  constructor(private readonly options: OtherEraOptions) {}

  /** Closes the other era's connection when it belongs to `pooled` (`pooled` is being closed). */
  async closeWith(pooled: Connection): Promise<void> {
    if (this.other?.of === pooled) await this.close();
  }

  /** Drops `connection` when it is the other era's (a transport failure on it: the next such call opens it again). */
  dropFailed(connection: Connection): void {
    if (this.other?.connection === connection) void this.close();
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
  async connectionFor(pooled: Connection, era: ProtocolEra | undefined): Promise<Connection> {
    const spec = this.options.server.spec;
    if (era === undefined || spec.protocolEra !== undefined || pooled.client.getProtocolEra() === era) return pooled;
    if (pooled.transport === 'sse' || (spec.url === undefined && pooled.transport !== 'stdio')) return pooled;
    if (this.other?.of !== pooled) {
      void this.close();
      this.other = { of: pooled, era };
    }
    const other = this.other;
    if (other.refused) return pooled;
    other.opening ??= this.open(other);
    // A server that never answers the other era's handshake must not hold the call for the whole start timeout: past
    // the bound the call goes out on `pooled`, and the opening goes on for the calls after it.
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<undefined>((resolve) => {
      timer = setTimeout(
        () => {
          resolve(undefined);
        },
        Math.min(OTHER_ERA_WAIT_MS, this.options.startTimeoutMs()),
      );
    });
    try {
      return (await Promise.race([other.opening, bound])) ?? pooled;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Opens the connection of `other` (see {@link connectionInEra}); resolves with none when the server refuses that era. */
  private async open(other: OtherEraConnection): Promise<Connection | undefined> {
    const what = other.era === 'modern' ? 'the 2026-07-28 era' : 'the 2025 era';
    try {
      const connection = await this.options.open(other.era);
      const transport = connection.client.transport;
      if (other.era === 'legacy' && transport instanceof StreamableHTTPClientTransport && transport.sessionId === undefined) {
        await this.options.close(connection);
        throw new Error('its 2025-era endpoint is stateless (no Mcp-Session-Id): its requests to clients could not reach them there');
      }
      if (this.other !== other) {
        await this.options.close(connection);
        return undefined;
      }
      other.connection = connection;
      void connection.process?.exited.then(() => {
        if (this.other === other) this.other = undefined;
      });
      this.options.log.info(
        { server: this.options.key, era: other.era },
        `server ${this.options.key} is reached in ${what} too, for clients of that era`,
      );
      return connection;
    } catch (error) {
      other.refused = true;
      // Expected of most servers today (they speak one era): the bridge serves that era's clients, so no alarm.
      this.options.log.debug(
        { server: this.options.key, era: other.era, err: this.options.hide(errorMessage(error)) },
        `server ${this.options.key} does not speak ${what}; its clients of that era are bridged over its one connection`,
      );
      return undefined;
    }
  }

  /** Closes the connection of the other era, if any (with its pooled connection, or after it failed a call). */
  async close(): Promise<void> {
    const other = this.other;
    this.other = undefined;
    const connection = await other?.opening;
    if (connection) await this.options.close(connection);
  }
}
