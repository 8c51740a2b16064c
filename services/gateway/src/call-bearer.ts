/**
 * The bearer of one call to an upstream whose McpServer declares `spec.auth.tokenExchange`: the access token mcp-front
 * exchanged for the call's caller (RFC 8693), held for the call's asynchronous extent only, so that concurrent calls of
 * different callers on one pooled connection each carry their own. The call's own HTTP requests made within
 * {@link withCallBearer} carry it as `Authorization: Bearer` in place of the connection's own; the connection's
 * requests (the handshake, the listings, a `subscriptions/listen` or GET stream), even when a call (re)connects, keep
 * the connection's headers: they belong to no caller.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const bearers = new AsyncLocalStorage<string>();

/**
 * JSON-RPC methods of a call (MCP 2025-11-25 server/tools, server/resources, server/prompts, and the call's cancellation);
 * a message without a method (the answer to an upstream's request during the call) is the call's too.
 */
const CALL_METHODS: ReadonlySet<string> = new Set(['tools/call', 'resources/read', 'prompts/get', 'notifications/cancelled']);

/** Runs `fn` with `accessToken` as the bearer of its upstream requests (`fn` as it is when `accessToken` is undefined). */
export function withCallBearer<T>(accessToken: string | undefined, fn: () => T): T {
  return accessToken === undefined ? fn() : bearers.run(accessToken, fn);
}

/** Whether the current call carries a caller's exchanged token (an HTTP 401 then refuses that token, not the connection's). */
export function carriesCallBearer(): boolean {
  return bearers.getStore() !== undefined;
}

/** The current call's exchanged token, if it carries one (the bearer of every request of an HTTP exchange, http-exchange.ts). */
export function callBearer(): string | undefined {
  return bearers.getStore();
}

/**
 * The headers of an upstream HTTP request with `body`: with the current call's bearer as `Authorization` when the
 * request is the call's (a POST of one of {@link CALL_METHODS}, or of a response); else `headers` untouched.
 */
export function withBearerOf(headers: RequestInit['headers'], body: RequestInit['body']): RequestInit['headers'] {
  const accessToken = bearers.getStore();
  if (accessToken === undefined || typeof body !== 'string') return headers;
  const method = methodOf(body);
  if (method !== undefined && !CALL_METHODS.has(method)) return headers;
  const merged = new Headers(headers);
  merged.set('authorization', `Bearer ${accessToken}`);
  return merged;
}

/** The `method` of a JSON-RPC message's text; undefined for a response; '' for a batch or text that is not JSON. */
function methodOf(body: string): string | undefined {
  try {
    const message = JSON.parse(body) as { method?: unknown };
    if (typeof message !== 'object' || message === null || Array.isArray(message)) return '';
    return typeof message.method === 'string' ? message.method : undefined;
  } catch {
    return '';
  }
}
