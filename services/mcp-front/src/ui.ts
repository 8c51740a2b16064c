/**
 * The dashboard at `/ui` (workspace `ui/`, built by Vite into `ui/dist`; docs/dashboard.md): its files, served by
 * every mcp-front and so by `punk up`, `punk cluster` and the chart's ingress.
 *
 * | path | answer |
 * |---|---|
 * | `GET /` | 302 to `/ui/` |
 * | `GET /ui/config.json` | the dashboard's sign-in configuration (`dashboardConfigSchema`: authentication on or off, the OAuth issuer, client id, scopes and resource), `Cache-Control: no-cache` |
 * | `/ui/assets/<file>` | the file, `Cache-Control: public, max-age=31536000, immutable` (names carry a content hash); 404 when absent |
 * | `/ui/<file>` of `ui/dist` (`favicon.svg`) | the file, `Cache-Control: no-cache` |
 * | any other `/ui` or `/ui/…` path | `index.html`, `Cache-Control: no-cache` (a client-side route: the app picks the view) |
 *
 * The files are public as `/api/v1/openapi.json` is: they hold no data, and the sign-in page must load before a
 * key is known; every data call of the app carries its key to `/api/v1`, which authenticates it. The Origin rule of
 * the MCP endpoints applies (cors.ts): a request whose `Origin` is neither absent nor the endpoint's own nor
 * configured answers 403. Only GET and HEAD (405 otherwise). Every answer carries a strict Content-Security-Policy
 * (only this origin's scripts, styles and API; no inline script, no frames, no other origin but, with the OAuth
 * sign-in, the issuer's for its metadata and token endpoint), `nosniff`, no referrer and `frame-ancestors 'none'`.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerResponse } from 'node:http';
import express, { type Request, type Response, type Router } from 'express';
import type { z } from 'zod';
import { refuseOtherMethods, type dashboardConfigSchema } from '@punk/lib';
import { DEFAULT_ADMIN_SCOPE, type AuthOptions } from './auth/authenticator.js';
import { ResourceUrls } from './auth/metadata.js';
import type { OriginPolicy } from './cors.js';

/** What the dashboard needs before a sign-in (`GET /ui/config.json`). */
export type DashboardConfig = z.infer<typeof dashboardConfigSchema>;

/** Where the dashboard is served. */
export const UI_PATH = '/ui';

/**
 * The Content-Security-Policy of every dashboard answer (CSP Level 3): `connect-src` adds `connectOrigins` (the
 * OAuth issuer's origin, whose metadata and token endpoint the sign-in calls) to this origin.
 */
export function uiContentSecurityPolicy(connectOrigins: readonly string[] = []): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    ["connect-src 'self'", ...connectOrigins].join(' '),
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The dashboard's configuration from the front's authentication options: off without them; the OAuth sign-in when
 * they name a dashboard client (`resource` is the public URL, an audience every route accepts: authenticator.ts).
 */
export function dashboardConfigOf(auth: AuthOptions | undefined): DashboardConfig {
  if (!auth) return { authentication: false };
  if (!auth.dashboard || !auth.issuer) return { authentication: true };
  const scopes =
    auth.dashboard.scopes.length > 0
      ? auth.dashboard.scopes
      : [...new Set([auth.adminScope ?? DEFAULT_ADMIN_SCOPE, ...(auth.requiredScopes ?? [])])];
  return {
    authentication: true,
    oauth: { issuer: auth.issuer, clientId: auth.dashboard.clientId, scopes, resource: new ResourceUrls(auth.publicUrl).canonical() },
  };
}

/** The directory of the built dashboard (`ui/dist` of the `@punk/ui` workspace), found through its package. */
export function uiDistDir(): string {
  return join(dirname(fileURLToPath(import.meta.resolve('@punk/ui/package.json'))), 'dist');
}

/** Answers with a JSON error as the rest of Punk does (`{ error: { code, message } }`). */
function fail(res: Response, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  res
    .status(status)
    .set({ 'Cache-Control': 'no-store', ...headers })
    .json({ error: { code, message } });
}

/**
 * The router of `/` and `/ui…`; mount it at the root of the front's router.
 * @param options.origins the front's Origin policy.
 * @param options.config what `/ui/config.json` answers (default: authentication off); its issuer's origin joins `connect-src`.
 * @param options.dir the built dashboard (default {@link uiDistDir}); when it has no index.html every page answers
 *   503 saying how to build it.
 */
export function uiRouter(options: { origins: OriginPolicy; config?: DashboardConfig; dir?: string }): Router {
  const dir = options.dir ?? uiDistDir();
  const config = options.config ?? { authentication: false };
  const csp = uiContentSecurityPolicy(config.oauth ? [new URL(config.oauth.issuer).origin] : []);
  const index = join(dir, 'index.html');
  const router = express.Router();
  router.get('/', (_req, res) => {
    res.set('Cache-Control', 'no-cache').redirect(302, `${UI_PATH}/`);
  });
  refuseOtherMethods(router);
  router.use(UI_PATH, (req, res, next) => {
    res.set({
      'Content-Security-Policy': csp,
      'X-Content-Type-Options': 'nosniff',
      'Referrer-Policy': 'no-referrer',
      'Cross-Origin-Opener-Policy': 'same-origin',
    });
    if (!options.origins.allows(req)) {
      fail(
        res,
        403,
        'Forbidden',
        `Origin ${JSON.stringify(req.headers.origin)} may not load the dashboard (allowed: its own origin and PUNK_ALLOWED_ORIGINS)`,
      );
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      fail(res, 405, 'MethodNotAllowed', `${req.method} is not allowed on the dashboard's files; use GET`, { Allow: 'GET, HEAD' });
      return;
    }
    if (!existsSync(index)) {
      fail(res, 503, 'DashboardNotBuilt', `the dashboard is not built (no ${index}): run \`npm run build\` at the repository root`);
      return;
    }
    next();
  });
  router.get(`${UI_PATH}/config.json`, (_req, res) => void res.set('Cache-Control', 'no-cache').json(config));
  router.use(
    `${UI_PATH}/assets`,
    express.static(join(dir, 'assets'), { immutable: true, maxAge: '365d', index: false, redirect: false, fallthrough: true }),
    (req: Request, res: Response) => fail(res, 404, 'NotFound', `no dashboard asset ${req.originalUrl.split('?')[0]}`),
  );
  const noCache = (res: ServerResponse) => res.setHeader('Cache-Control', 'no-cache');
  router.use(UI_PATH, express.static(dir, { index: false, redirect: false, cacheControl: false, setHeaders: noCache }));
  router.use(UI_PATH, (_req, res) => {
    res.set('Cache-Control', 'no-cache').sendFile(index, { cacheControl: false });
  });
  return router;
}
