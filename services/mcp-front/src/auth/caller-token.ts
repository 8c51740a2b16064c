/**
 * The OAuth access token of the MCP request being served, for RFC 8693 token exchange (token-exchange.ts): held for
 * the request's asynchronous extent only, never stored with a session, never on the bus, never logged. Absent for an
 * API key, the bootstrap key, or with authentication off.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const tokens = new AsyncLocalStorage<string>();

/** Runs `fn` serving a request whose caller signed in with `accessToken` (`fn` as it is when undefined). */
export function withCallerToken<T>(accessToken: string | undefined, fn: () => T): T {
  return accessToken === undefined ? fn() : tokens.run(accessToken, fn);
}

/** The OAuth access token of the request being served, if its caller has one. */
export function callerToken(): string | undefined {
  return tokens.getStore();
}
