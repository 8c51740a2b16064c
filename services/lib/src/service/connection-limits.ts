/**
 * Bounds on the TCP connections of an HTTP listener, so idle or hostile clients cannot exhaust the process's file
 * descriptors: at most `maxConnections` open, at most `maxConnectionsPerAddress` from one client address (the
 * socket's peer), and a connection that sends no byte within `idleTimeoutMs` is closed (node's `headersTimeout`
 * starts only at the first byte). A refused connection is closed at once, before anything is read or written, and
 * counted in `punk_http_connections_rejected_total` (metrics/connections.ts).
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { httpConnections, httpConnectionsRejected } from '../metrics/connections.js';

/** The bounds of one listener. */
export interface ConnectionLimits {
  /** Most connections open at once (`PUNK_MAX_CONNECTIONS`). */
  maxConnections: number;
  /** Most connections open at once from one client address (`PUNK_MAX_CONNECTIONS_PER_ADDRESS`); none when absent (behind a proxy). */
  maxConnectionsPerAddress?: number;
  /** A connection that sent no byte for this long is closed, in milliseconds (`PUNK_CONNECTION_IDLE_TIMEOUT_MS`). */
  idleTimeoutMs: number;
}

/** Applies `limits` to every connection `server` accepts from now on; `listener` labels the metrics. */
export function limitConnections(server: Server, limits: ConnectionLimits, listener: 'service' | 'proxy'): void {
  const perAddress = new Map<string, number>();
  let open = 0;
  const refuse = (socket: Socket, reason: 'max_connections' | 'max_connections_per_address' | 'idle') => {
    httpConnectionsRejected.inc({ listener, reason });
    socket.destroy();
  };
  // Registered after the HTTP server's own listener: a refused socket is destroyed before its parser reads a byte.
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? 'unknown';
    const mine = perAddress.get(address) ?? 0;
    const refusal =
      open >= limits.maxConnections
        ? 'max_connections'
        : limits.maxConnectionsPerAddress !== undefined && mine >= limits.maxConnectionsPerAddress
          ? 'max_connections_per_address'
          : undefined;
    if (refusal) {
      refuse(socket, refusal);
      return;
    }
    open++;
    perAddress.set(address, mine + 1);
    httpConnections.inc({ listener });
    const idle = setTimeout(() => {
      if (socket.bytesRead === 0) refuse(socket, 'idle');
    }, limits.idleTimeoutMs);
    idle.unref();
    socket.once('close', () => {
      clearTimeout(idle);
      open--;
      httpConnections.dec({ listener });
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left === 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
  });
}
