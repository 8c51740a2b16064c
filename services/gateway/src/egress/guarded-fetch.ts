/**
 * A `fetch` for upstream MCP servers behind the SSRF guard: every request, and every redirect hop, has its
 * URL shape and destination checked (destination.ts) and is sent to the checked address only
 * (pinned-dispatchers.ts). Give it to the MCP SDK's transports as their `fetch` option.
 */
import { PunkError } from '@punk/lib';
import { requestOnPool, sendOnPool, type PoolRequest } from '../pool-fetch.js';
import { checkDestination, type DestinationPolicy } from './destination.js';
import { PinnedDispatchers } from './pinned-dispatchers.js';
import { redactUrl } from './url-shape.js';

/** Redirects a request follows by default (the MCP SDK's own bound is the same). */
const DEFAULT_MAX_REDIRECTS = 5;

/** Redirect statuses (Fetch Standard, "redirect status"). */
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Headers that carry credentials whatever the server: dropped when a redirect leaves the origin. */
const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'cookie'];

/** Headers that describe a request body: dropped when a redirect turns the request into a GET. */
const BODY_HEADERS = ['content-type', 'content-encoding', 'content-language', 'content-location'];

/** Options of {@link guardedFetch}. */
export interface GuardedFetchOptions {
  /** Redirects followed per request, each target checked like the first URL; one more is an error. Default 5. */
  maxRedirects?: number;
  /**
   * More header names (any case) that carry credentials, such as a registration's `X-Api-Key: cred:<id>`
   * header: like `Authorization`, `Proxy-Authorization` and `Cookie`, they are not sent to another origin
   * when a redirect leads there.
   */
  credentialHeaders?: readonly string[];
}

/** A `fetch` (the MCP SDK's `FetchLike`) guarded by a destination policy; `close()` ends its pooled connections. */
export interface GuardedFetch {
  (input: string | URL, init?: RequestInit): Promise<Response>;
  /**
   * One request past the same check, on the same pinned pools, answered as undici's own answer and without following
   * redirects (a redirect is the caller's to take, through the fetch): the raw exchanges of http-exchange.ts.
   * @throws (rejects) as the fetch does for a refused or unresolvable destination.
   */
  request: PoolRequest;
  /** Destroys the connection pools (requests and streams in flight are aborted). */
  close(): Promise<void>;
}

/**
 * A fetch-compatible function whose requests pass the SSRF guard. Per request it checks the URL's shape
 * and destination ({@link checkDestination}: one resolution, every address checked), then connects to a
 * checked address only, keeping the host name for Host, SNI and the certificate check, so there is no
 * DNS-rebinding window. Redirects (`redirect: 'follow'`, the default) are followed here, each target
 * checked again before anything connects to it, at most `maxRedirects` (default 5); 301/302 after a POST
 * and 303 become a GET without body (Fetch Standard); credential headers are dropped when a redirect leaves
 * the origin. With `redirect: 'manual'` the redirect response is returned as it is (the MCP SDK's
 * same-origin redirect policy follows it through this function again, so its target is checked too);
 * with `redirect: 'error'` a redirect rejects with a TypeError, as fetch does. Response bodies stream
 * (SSE works). Pass it as `fetch` to `StreamableHTTPClientTransport` and `SSEClientTransport` (which use it
 * for their POSTs and for the EventSource GET alike).
 *
 * @throws (rejects) PunkError `EgressRefused` for a refused URL or redirect target (the message names the
 *   URL without userinfo, the reason and how to allow it), `UpstreamUnreachable` for a host that does not
 *   resolve, `TooManyRedirects` past the bound, `UpstreamError` for a 307/308 of a request whose streamed
 *   body cannot be sent again; otherwise whatever fetch rejects with.
 */
export function guardedFetch(policy: DestinationPolicy, options: GuardedFetchOptions = {}): GuardedFetch {
  const dispatchers = new PinnedDispatchers();
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const credentialHeaders = [...CREDENTIAL_HEADERS, ...(options.credentialHeaders ?? []).map((name) => name.toLowerCase())];

  const guarded = async (input: string | URL, init: RequestInit = {}): Promise<Response> => {
    const mode = init.redirect ?? 'follow';
    const headers = new Headers(init.headers);
    let method = (init.method ?? 'GET').toUpperCase();
    let body = init.body;
    let url: string | URL = input;
    let redirectedFrom: URL | undefined;
    for (let redirects = 0; ; redirects++) {
      init.signal?.throwIfAborted();
      const destination = await checkDestination(url, policy).catch((error: unknown) => {
        if (!(redirectedFrom && error instanceof PunkError)) throw error;
        throw new PunkError(error.code, `${error.message} (a redirect from ${redactUrl(redirectedFrom)} led there)`, error.details, {
          cause: error,
        });
      });
      const response = await sendOnPool(await dispatchers.for(destination), destination.url, { ...init, method, headers, body });
      const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get('location') : null;
      if (location === null || mode === 'manual') return response;
      await response.body?.cancel();
      if (mode === 'error')
        throw new TypeError(`fetch failed: ${redactUrl(destination.url)} redirects, and the request's redirect mode is 'error'`);
      let target: URL;
      try {
        target = new URL(location, destination.url);
      } catch {
        throw new PunkError(
          'EgressRefused',
          `upstream URL ${redactUrl(destination.url)} redirects to ${JSON.stringify(redactUrl(location))}, which is not a URL`,
          { url: redactUrl(destination.url) },
        );
      }
      if (redirects === maxRedirects) {
        throw new PunkError(
          'TooManyRedirects',
          `upstream URL ${redactUrl(input)} redirected more than ${maxRedirects} times (the last time to ${redactUrl(target)})`,
          { url: redactUrl(input), maxRedirects },
        );
      }
      if (
        ((response.status === 301 || response.status === 302) && method === 'POST') ||
        (response.status === 303 && method !== 'GET' && method !== 'HEAD')
      ) {
        method = 'GET';
        body = null;
        for (const name of BODY_HEADERS) headers.delete(name);
      } else if (body instanceof ReadableStream || (typeof body === 'object' && body !== null && Symbol.asyncIterator in body)) {
        throw new PunkError(
          'UpstreamError',
          `upstream URL ${redactUrl(destination.url)} answered ${response.status} to ${redactUrl(target)}, and the request's streamed body cannot be sent again`,
          { url: redactUrl(destination.url) },
        );
      }
      if (target.origin !== destination.url.origin) for (const name of credentialHeaders) headers.delete(name);
      redirectedFrom = destination.url;
      url = target;
    }
  };
  const request: PoolRequest = async (url, init) => {
    const destination = await checkDestination(url, policy);
    return requestOnPool(await dispatchers.for(destination), destination.url, init);
  };
  return Object.assign(guarded, { request, close: () => dispatchers.close() });
}
