/**
 * HTTP requests on an undici pool, answered as fetch `Response`s: the requests of the MCP SDK's HTTP transports to
 * upstream servers (through the egress guard's pinned pools, guarded-fetch.ts, or straight to a server process Punk
 * started on loopback, {@link localFetch}).
 */
import { Readable } from 'node:stream';
import type { Agent, Dispatcher, Pool } from 'undici';
import { errorMessage } from '@punk/lib';

/** Statuses whose response has no body (Fetch Standard, "null body status"). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/**
 * One request, without following redirects, on `dispatcher` (a pool of checked addresses, or the local Agent). A request without a body
 * or with a string body (every request of the MCP SDK's transports) goes out through the pool's own `request`: its
 * head and body in one write, with a `Content-Length`. fetch streams every body (a string too) in several writes per
 * request, which the profile of a call to an HTTP upstream showed as its largest block (docs/call-path-profile.md).
 * Other bodies go through fetch. The answer is a fetch `Response` either way, its body streamed.
 * @throws (rejects) the signal's reason once it aborts; otherwise a TypeError `fetch failed` whose `cause` is the
 *   connection's error (ECONNREFUSED…), as fetch rejects.
 */
export async function sendOnPool(
  dispatcher: Dispatcher,
  url: URL,
  init: RequestInit & { method: string; headers: Headers },
): Promise<Response> {
  const { body, method, headers, signal } = init;
  if (body !== undefined && body !== null && typeof body !== 'string') {
    // The pool is undici 7.16.0, the version Node 24.11's fetch is built on; @types/node declares the
    // dispatcher with the types of another undici release, hence the cast.
    return fetch(url, { ...init, redirect: 'manual', dispatcher: dispatcher as unknown as RequestInit['dispatcher'] });
  }
  const answer = await requestOnPool(dispatcher, url, {
    method,
    headers: Object.fromEntries(headers),
    ...(typeof body === 'string' && { body }),
    ...(signal && { signal }),
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const item of value) responseHeaders.append(name, item);
    else if (value !== undefined) responseHeaders.append(name, value);
  }
  const empty = NULL_BODY_STATUSES.has(answer.statusCode) || method === 'HEAD';
  if (empty) answer.body.resume();
  const response = new Response(empty ? null : (Readable.toWeb(answer.body) as ReadableStream<Uint8Array>), {
    status: answer.statusCode,
    headers: responseHeaders,
  });
  // As fetch's answer names the URL it came from (the Response constructor leaves it empty).
  return Object.defineProperty(response, 'url', { value: url.href });
}

/** A request as {@link requestOnPool} sends it: a string body or none, its head and body in one write. */
export interface PoolRequestInit {
  method: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

/** Sends one request on a pool and resolves with undici's own answer (status, headers, body as a Node stream). */
export type PoolRequest = (url: URL, init: PoolRequestInit) => Promise<Dispatcher.ResponseData>;

/**
 * One request on `dispatcher` through the pool's own `request`, without following redirects, answered as undici's
 * `ResponseData` (no fetch `Response` or web stream around it).
 * @throws (rejects) as {@link sendOnPool}.
 */
export async function requestOnPool(dispatcher: Dispatcher, url: URL, init: PoolRequestInit): Promise<Dispatcher.ResponseData> {
  try {
    return await dispatcher.request({ origin: url.origin, path: `${url.pathname}${url.search}`, ...init });
  } catch (error) {
    init.signal?.throwIfAborted();
    throw new TypeError('fetch failed', { cause: error });
  }
}

/**
 * undici (about 100 modules), loaded with the first request to an HTTP upstream: a start serving only stdio servers,
 * or none, needs none of it.
 */
export function loadUndici(): Promise<Undici> {
  return (undici ??= import('undici'));
}
/** What Punk uses of undici. */
interface Undici {
  Agent: typeof Agent;
  Pool: typeof Pool;
}
let undici: Promise<Undici> | undefined;

/**
 * The dispatcher of {@link localFetch}: undici's Agent keeps a keep-alive pool per origin and drops one once its
 * connections are gone, as a server restarted on a new picked port leaves its old origin behind. Made on first use.
 */
let localAgent: Promise<Dispatcher> | undefined;

/**
 * A fetch (the MCP SDK's `FetchLike`) for a server process Punk started and listens for on loopback: no egress check
 * (the gateway verified the listener is its own child), sent as {@link sendOnPool} sends. Redirects are not followed
 * (the SDK's transports follow the ones that stay within the origin).
 * @throws (rejects) as {@link sendOnPool}.
 */
export async function localFetch(input: string | URL, init: RequestInit = {}): Promise<Response> {
  const url = new URL(input);
  return sendOnPool(await localDispatcher(), url, {
    ...init,
    method: (init.method ?? 'GET').toUpperCase(),
    headers: new Headers(init.headers),
  });
}

/** {@link requestOnPool} on the dispatcher of {@link localFetch}: the raw requests to a server process Punk started (http-exchange.ts). */
export const localRequest: PoolRequest = async (url, init) => requestOnPool(await localDispatcher(), url, init);

function localDispatcher(): Promise<Dispatcher> {
  return (localAgent ??= loadUndici().then(({ Agent }) => new Agent()));
}

/** The reason a fetch failed: undici puts the system error (ECONNREFUSED, ENOTFOUND…) in `cause`. */
export function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: unknown })?.cause;
  const code = (cause as { code?: unknown })?.code;
  return typeof code === 'string' ? code : errorMessage(cause ?? error);
}
