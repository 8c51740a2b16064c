/**
 * The bearer of one call to an upstream whose McpServer declares `spec.auth.tokenExchange` or `spec.auth.perUser`: the
 * access token mcp-front exchanged for the call's caller (RFC 8693), or the caller's own per-user connection's token
 * (connections.ts), held for the call's asynchronous extent only, so that concurrent calls of
 * different callers on one pooled connection each carry their own. The call's own HTTP requests made within
 * {@link withCallBearer} carry it as `Authorization: Bearer` in place of the connection's own; the connection's
 * requests (the handshake, the listings, a `subscriptions/listen` or GET stream), even when a call (re)connects, keep
 * the connection's headers: they belong to no caller.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** One call's bearer. */
export interface CallBearer {
  accessToken: string;
  /** Who reaches the upstream with it, for `tool.called`'s `data.upstreamIdentity` (never a token). */
  identity: string;
  /** After an HTTP 401 to `accessToken`: a renewed token (a per-user connection refreshes); absent: no renewal. */
  renew?: (rejected: string) => Promise<string>;
}

const bearers = new AsyncLocalStorage<CallBearer>();

/**
 * JSON-RPC methods of a call (MCP 2025-11-25 server/tools, server/resources, server/prompts, and the call's cancellation);
 * a message without a method (the answer to an upstream's request during the call) is the call's too.
 */
const CALL_METHODS: ReadonlySet<string> = new Set(['tools/call', 'resources/read', 'prompts/get', 'notifications/cancelled']);

/** Runs `fn` with `bearer` as the bearer of its upstream requests (`fn` as it is when `bearer` is undefined). */
export function withCallBearer<T>(bearer: CallBearer | undefined, fn: () => T): T {
  return bearer === undefined ? fn() : bearers.run({ ...bearer }, fn);
}

/** Whether the current call carries a caller's token (an HTTP 401 then refuses that token, not the connection's). */
export function carriesCallBearer(): boolean {
  return bearers.getStore() !== undefined;
}

/** Who reaches the upstream on the current call, when it carries a caller's token (`tool.called` `data.upstreamIdentity`). */
export function callBearerIdentity(): string | undefined {
  return bearers.getStore()?.identity;
}

/**
 * After an HTTP 401 to the current call's token: renews it in place for the call's next requests.
 * @returns `false` when the bearer cannot be renewed (an exchanged token: the front exchanges again next call)
 * @throws what the renewal throws (a refused refresh token).
 */
export async function renewCallBearer(): Promise<boolean> {
  const bearer = bearers.getStore();
  if (!bearer?.renew) return false;
  bearer.accessToken = await bearer.renew(bearer.accessToken);
  return true;
}

/**
 * The headers of an upstream HTTP request with `body`: with the current call's bearer as `Authorization` when the
 * request is the call's (a POST of one of {@link CALL_METHODS}, or of a response); else `headers` untouched.
 */
export function withBearerOf(headers: RequestInit['headers'], body: RequestInit['body']): RequestInit['headers'] {
  const accessToken = bearers.getStore()?.accessToken;
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
