/**
 * Per-user connections over HTTP (`spec.auth.perUser`, docs/identity.md, docs/registry-api.md). Any authenticated
 * principal manages its own; each route is one `punk.gateway.admin` request (`connections.*`), answered by the
 * gateway, which keeps the pending flows in Postgres (so any front replica may serve the callback) and the tokens in
 * the vault.
 *
 * | route | success |
 * |---|---|
 * | `GET /api/v1/connections` | 200 `{ items: [{ namespace, name, provider, scopes, connected, connectedAt?, needsReconnect? }] }` |
 * | `POST /api/v1/connections/:namespace/:name` | 200 `{ authorizationUrl }`, and the HttpOnly SameSite=Lax cookie binding the flow to this browser |
 * | `DELETE /api/v1/connections/:namespace/:name` | 204; 404 when not connected |
 * | `GET /connect/callback?code=&state=` (public: the redirect URI) | 302 to `/ui/connections?connected=<namespace>/<name>`, or `?error=<message>` |
 *
 * Writes go through the `/api/v1` Origin guard like every other write (front.ts). A principal's namespace is its
 * tenant: another namespace is a server it has none of (404).
 */
import { createHash } from 'node:crypto';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import {
  anonymousPrincipal,
  connectionBeginReplySchema,
  deadlines,
  errorMessage,
  PunkError,
  subjects,
  type Bus,
  type GatewayAdminRequest,
  type Logger,
  type Principal,
} from '@punk/lib';
import { callerGuard } from './auth/admin-api.js';
import type { Authenticator } from './auth/authenticator.js';
import { statusOf } from './registry-api.js';

/** Path of the redirect URI under the public base. */
export const CONNECT_CALLBACK_PATH = '/connect/callback';

/** Options of {@link connectionsRouter}. */
export interface ConnectionsApiOptions {
  bus: Bus;
  log: Logger;
  auth: Authenticator | undefined;
  tenant: string;
  /** `PUNK_PUBLIC_URL`: the base of the redirect URI; absent, the request's own origin. */
  publicUrl?: string;
}

/** The cookie binding the flow of `state` to the browser that started it (one per flow, so flows may run side by side). */
function cookieName(state: string): string {
  return `punk_connect_${createHash('sha256').update(state).digest('hex').slice(0, 16)}`;
}

/** The value of cookie `name` in the request's `Cookie` header (RFC 6265 §5.4), if any. */
function cookieOf(req: Request, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Builds the router; mount it at the root. */
export function connectionsRouter(options: ConnectionsApiOptions): Router {
  const { bus, log } = options;
  const router = express.Router();
  const base = (req: Request) => (options.publicUrl ?? `${req.protocol}://${req.get('host') ?? 'localhost'}`).replace(/\/+$/, '');
  const basePath = (req: Request) => new URL(base(req)).pathname.replace(/\/+$/, '');
  const ask = (request: GatewayAdminRequest) => bus.request(subjects.gatewayAdmin, request, { timeoutMs: deadlines.gatewayAdminMs });
  const principalOf = (res: Response): Principal => (res.locals['caller'] as Principal | undefined) ?? anonymousPrincipal(options.tenant);
  /** The server of the path, in the caller's own namespace. */
  const serverOf = (req: Request, principal: Principal): string => {
    const namespace = String(req.params['namespace']);
    const name = String(req.params['name']);
    if (namespace !== principal.tenant)
      throw new PunkError('ServerNotFound', `tenant ${principal.tenant} has no server ${namespace}/${name}`, { server: name });
    return name;
  };
  const route =
    (handler: (req: Request, res: Response, principal: Principal) => Promise<void>) =>
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        await handler(req, res, principalOf(res));
      } catch (error) {
        next(error);
      }
    };

  router.use('/api/v1/connections', callerGuard(options.auth, log));
  router.get(
    '/api/v1/connections',
    route(async (_req, res, principal) => {
      res.set('Cache-Control', 'no-store').json(await ask({ op: 'connections.list', tenant: principal.tenant, principal }));
    }),
  );
  router.post(
    '/api/v1/connections/:namespace/:name',
    route(async (req, res, principal) => {
      const server = serverOf(req, principal);
      const reply = connectionBeginReplySchema.parse(
        await ask({
          op: 'connections.begin',
          tenant: principal.tenant,
          principal,
          server,
          redirectUri: `${base(req)}${CONNECT_CALLBACK_PATH}`,
        }),
      );
      const state = new URL(reply.authorizationUrl).searchParams.get('state') ?? '';
      res.cookie(cookieName(state), reply.browserBinding, {
        httpOnly: true,
        sameSite: 'lax',
        secure: base(req).startsWith('https:'),
        path: `${basePath(req)}${CONNECT_CALLBACK_PATH}`,
        maxAge: 10 * 60_000,
      });
      res.set('Cache-Control', 'no-store').json({ authorizationUrl: reply.authorizationUrl });
    }),
  );
  router.delete(
    '/api/v1/connections/:namespace/:name',
    route(async (req, res, principal) => {
      await ask({ op: 'connections.delete', tenant: principal.tenant, principal, server: serverOf(req, principal) });
      res.status(204).set('Cache-Control', 'no-store').end();
    }),
  );
  router.get(CONNECT_CALLBACK_PATH, async (req, res) => {
    const param = (name: string) => (typeof req.query[name] === 'string' ? req.query[name] : undefined);
    const state = param('state') ?? '';
    const page = `${basePath(req)}/ui/connections`;
    res.set('Cache-Control', 'no-store');
    try {
      const browserBinding = cookieOf(req, cookieName(state));
      const code = param('code');
      const error = param('error');
      const errorDescription = param('error_description');
      const done = (await ask({
        op: 'connections.complete',
        state,
        ...(browserBinding !== undefined && { browserBinding }),
        ...(code !== undefined && { code }),
        ...(error !== undefined && { error }),
        ...(errorDescription !== undefined && { errorDescription }),
      })) as { tenant: string; server: string };
      res.clearCookie(cookieName(state), { path: `${basePath(req)}${CONNECT_CALLBACK_PATH}` });
      res.redirect(302, `${page}?connected=${encodeURIComponent(`${done.tenant}/${done.server}`)}`);
    } catch (error) {
      const message = error instanceof PunkError ? error.message : 'the connection failed inside Punk; see its logs';
      log.warn({ err: errorMessage(error) }, 'a per-user connect callback failed');
      res.redirect(302, `${page}?error=${encodeURIComponent(message.slice(0, 300))}`);
    }
  });
  router.use('/api/v1/connections', (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = statusOf(error);
    if (status >= 500) log.warn({ err: errorMessage(error) }, 'connections API request failed');
    res
      .status(status)
      .set('Cache-Control', 'no-store')
      .json({
        error: {
          code: error instanceof PunkError ? error.code : 'Internal',
          message: status === 500 && !(error instanceof PunkError) ? 'the request failed inside Punk; see its logs' : errorMessage(error),
        },
      });
  });
  return router;
}
