/**
 * The bearer of one call to an upstream whose McpServer declares `spec.auth.tokenExchange`: the access token mcp-front
 * exchanged for the call's caller (RFC 8693), held for the call's asynchronous extent only, so that concurrent calls of
 * different callers on one pooled connection each carry their own. Every HTTP request of the MCP SDK's transports made
 * within {@link withCallBearer} carries it as `Authorization: Bearer` in place of the connection's own.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const bearers = new AsyncLocalStorage<string>();

/** Runs `fn` with `accessToken` as the bearer of its upstream requests (`fn` as it is when `accessToken` is undefined). */
export function withCallBearer<T>(accessToken: string | undefined, fn: () => T): T {
  return accessToken === undefined ? fn() : bearers.run(accessToken, fn);
}

/** The headers of an upstream request with the current call's bearer as `Authorization`, or `headers` untouched outside such a call. */
export function withBearerOf(headers: RequestInit['headers']): RequestInit['headers'] {
  const accessToken = bearers.getStore();
  if (accessToken === undefined) return headers;
  const merged = new Headers(headers);
  merged.set('authorization', `Bearer ${accessToken}`);
  return merged;
}
