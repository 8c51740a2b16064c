/**
 * Preloaded (`node --import`) into the local HTTP servers that Punk runs with Node (launch.ts): a `listen()` that
 * names no host, or a wildcard one (`0.0.0.0`, `::`), listens on 127.0.0.1 instead, so a server without a host
 * setting (server-everything's `app.listen(PORT)`) is not reachable from the network, where a client could call it
 * directly, bypassing authentication, governance and the ledger. Pipes, handles and other hosts are left as they are.
 */
import { Server } from 'node:net';

const LOOPBACK = '127.0.0.1';
const WILDCARDS = new Set(['', '0.0.0.0', '::', '::0']);

const isPort = (value: unknown): boolean => typeof value === 'number' || (typeof value === 'string' && /^\d+$/.test(value));

/** The arguments of `Server.listen` with a missing or wildcard host replaced by {@link LOOPBACK}. */
function onLoopback(args: unknown[]): unknown[] {
  const [first, second] = args;
  if (args.length === 0 || typeof first === 'function' || first === undefined || first === null) return [0, LOOPBACK, ...args.slice(1)];
  if (isPort(first)) {
    if (typeof second === 'string') return WILDCARDS.has(second) ? [first, LOOPBACK, ...args.slice(2)] : args;
    return [first, LOOPBACK, ...args.slice(1)];
  }
  if (typeof first === 'object' && 'port' in first && !('path' in first) && !('fd' in first) && !('handle' in first)) {
    const host = (first as { host?: unknown }).host;
    if (host === undefined || (typeof host === 'string' && WILDCARDS.has(host))) return [{ ...first, host: LOOPBACK }, ...args.slice(1)];
  }
  return args;
}

// eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the server as `this`
const listen = Server.prototype.listen;
Server.prototype.listen = function (this: Server, ...args: unknown[]) {
  return (listen as (...a: unknown[]) => Server).apply(this, onLoopback(args));
} as typeof Server.prototype.listen;
