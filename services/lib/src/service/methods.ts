/**
 * 405 Method Not Allowed (RFC 9110 §15.5.6): a request for a path a listener or router serves, with a method it
 * does not serve there, gets 405 with an `Allow` header and a JSON error naming the allowed methods.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Answers `req` with 405, `Allow: <allow>` and `{ error: { code: "MethodNotAllowed", message } }` naming them. */
export function methodNotAllowed(req: IncomingMessage, res: ServerResponse, path: string, allow: readonly string[]): void {
  res.writeHead(405, { allow: allow.join(', '), 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(
    JSON.stringify({
      error: { code: 'MethodNotAllowed', message: `${req.method ?? ''} is not allowed on ${path}; allowed: ${allow.join(', ')}` },
    }),
  );
}

/** What {@link refuseOtherMethods} needs of an express Router: its routes so far and `all`. */
export interface RouterWithRoutes {
  /** Its layers; a route's has `path` and (express 5, untyped) `methods`: `{ get: true }`. */
  stack: ReadonlyArray<{ route?: { path: unknown } | undefined }>;
  all(
    path: string,
    handler: (req: IncomingMessage & { baseUrl: string; path: string }, res: ServerResponse, next: () => void) => void,
  ): unknown;
}

/**
 * Call once a router declared its routes: every path it serves then answers other methods with 405 (HEAD is
 * allowed where GET is, as express serves it; OPTIONS is left to whatever comes next, such as CORS).
 */
export function refuseOtherMethods(router: RouterWithRoutes): void {
  const methods = new Map<string, Set<string>>();
  for (const { route } of router.stack) {
    if (typeof route?.path !== 'string') continue;
    const served = methods.get(route.path) ?? new Set<string>();
    const declared = (route as { methods?: Record<string, boolean | undefined> }).methods ?? {};
    for (const [method, on] of Object.entries(declared)) if (on && method !== '_all') served.add(method.toUpperCase());
    methods.set(route.path, served);
  }
  for (const [path, served] of methods) {
    if (served.has('GET')) served.add('HEAD');
    const allow = [...served].sort();
    router.all(path, (req, res, next) => {
      if (served.has(req.method ?? '') || req.method === 'OPTIONS') next();
      else methodNotAllowed(req, res, `${req.baseUrl}${req.path}`, allow);
    });
  }
}
