/**
 * The admin API of API keys, mounted at `/api/v1` (JSON; errors are `{ error: { code, message } }`).
 * Every route needs an admin: a tenant admin (scope `PUNK_AUTH_ADMIN_SCOPE`, default `punk:admin`) acts in its
 * own tenant only, a platform admin (scope `PUNK_AUTH_PLATFORM_ADMIN_SCOPE`, default `punk:platform-admin`) in
 * every tenant. 401 with an RFC 6750 challenge without a valid token, 403 `insufficient_scope` without the
 * scope, or naming the tenant and the platform admin scope when a tenant admin reaches into another tenant.
 *
 * - `POST /api-keys` `{ name, tenant?, scopes?, groups? }` → 201 `{ key, id, name, tenant, scopes, groups,
 *   createdAt, createdBy }`: `key` (`pk_…`) is shown this once and stored only as its SHA-256. `tenant`
 *   defaults to the front's, `scopes` to the endpoint's required scopes. Only a platform admin makes keys of
 *   another tenant, or keys carrying the platform admin scope.
 * - `GET /api-keys?tenant=` → `{ apiKeys: [...] }`, the same fields without `key`: a tenant admin's own tenant's,
 *   a platform admin's of `tenant`, or of every tenant without it.
 * - `DELETE /api-keys/:id` → 204; 404 `ApiKeyNotFound` for an unknown id, 403 for a tenant admin and a key of
 *   another tenant. Revocation holds on every replica from the next request on.
 *
 * With authentication off every route answers 404 `AuthenticationOff`.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import {
  apiKeyInputSchema,
  errorMessage,
  noQuerySchema,
  parseQuery,
  PunkError,
  refuseOtherMethods,
  tenantQuerySchema,
  type Logger,
  type Principal,
} from '@punk/lib';
import { bodyRefusal } from '../body-errors.js';
import { checkJsonDepth } from '../json-depth.js';
import type { Authenticator } from './authenticator.js';
import { challengeOf, type Refusal } from './challenge.js';

/** Options of {@link adminRouter}. */
export interface AdminApiOptions {
  /** The front's authenticator; absent when authentication is off. */
  auth: Authenticator | undefined;
  /** The front's tenant: default tenant of new keys. */
  tenant: string;
  /** Default scopes of new keys (the endpoint's required scopes). */
  defaultScopes: readonly string[];
  log: Logger;
}

/** Whether `principal` is a platform admin: it carries the platform admin scope, and acts in every tenant. */
export function isPlatformAdmin(auth: Authenticator, principal: Principal): boolean {
  return principal.scopes?.includes(auth.platformAdminScope) ?? false;
}

/**
 * The refusal of an admin acting in `tenant` (a `?tenant=` value, a body's `tenant`, a key's tenant), or
 * undefined when it may: a platform admin everywhere, a tenant admin in its own tenant only. The refusal is a
 * 403 `insufficient_scope` naming both tenants and the platform admin scope.
 */
function tenantRefusal(auth: Authenticator, admin: Principal, tenant: unknown): Refusal | undefined {
  if (tenant === admin.tenant || isPlatformAdmin(auth, admin)) return undefined;
  const named = typeof tenant === 'string' ? tenant : JSON.stringify(tenant);
  return {
    status: 403,
    error: 'insufficient_scope',
    message: `an admin of tenant ${admin.tenant} acts only in tenant ${admin.tenant}: acting in tenant ${named} needs the scope ${auth.platformAdminScope} (a platform admin)`,
    scopes: [auth.platformAdminScope],
  };
}

/**
 * The refusal of a registration body (`POST`/`PUT /mcp/servers…`) that `admin` may not send, or undefined: a `stdio`
 * server runs its command on Punk's host as Punk's own user (which could read Punk's environment and keys), so it is
 * a platform admin's power; a tenant admin registers `http` and `openapi` servers. A 403 `insufficient_scope`
 * naming the platform admin scope and what a tenant admin may register instead.
 */
export function registrationRefusal(auth: Authenticator, admin: Principal, body: Record<string, unknown>): Refusal | undefined {
  const runsProcess = body['type'] === 'stdio' || body['command'] !== undefined;
  if (!runsProcess || isPlatformAdmin(auth, admin)) return undefined;
  return {
    status: 403,
    error: 'insufficient_scope',
    message: `a stdio server runs its command on Punk's host as Punk's own user: registering or changing one needs the scope ${auth.platformAdminScope} (a platform admin); an admin of tenant ${admin.tenant} may register http and openapi servers`,
    scopes: [auth.platformAdminScope],
  };
}

/**
 * The one tenant the admin of a request passed by {@link adminGuard} may act in (a tenant admin's own), or
 * undefined for a platform admin or with authentication off: what a route reads when the request names no tenant.
 */
export function confinedTenant(res: Response): string | undefined {
  return res.locals['confinedTenant'] as string | undefined;
}

/**
 * Express middleware that lets only admins through (before any body is read) and puts their principal in
 * `res.locals.admin`: 401 with an RFC 6750 challenge without a valid token, 403 `insufficient_scope` without
 * the admin or platform admin scope, and 403 (`tenantRefusal`) for a tenant admin whose `?tenant=` names
 * another tenant (JSON `{ error: { code, message } }`; cross-tenant refusals are logged as warnings). A
 * tenant admin's tenant is then {@link confinedTenant}. With authentication off (`auth` undefined) it lets
 * everyone through (`whenOff: 'open'`, the ledger and servers APIs of `punk up`) or answers 404
 * `AuthenticationOff` (`'refuse'`, the API keys, which mean nothing without it).
 */
export function adminGuard(auth: Authenticator | undefined, whenOff: 'open' | 'refuse', log: Logger): RequestHandler {
  return async (req, res, next) => {
    if (!auth) {
      if (whenOff === 'open') next();
      else fail(res, 404, 'AuthenticationOff', 'API keys need authentication: set PUNK_AUTH_MODE=on and PUNK_PUBLIC_URL');
      return;
    }
    const identified = await auth.identify(req);
    if (!identified.ok) {
      refuseWith(req, res, auth, log, identified.refusal);
      return;
    }
    const admin = identified.principal;
    const platform = isPlatformAdmin(auth, admin);
    if (!platform && !admin.scopes?.includes(auth.adminScope)) {
      const message = `this API needs the scope ${auth.adminScope} (an admin of tenant ${admin.tenant}) or ${auth.platformAdminScope} (a platform admin)`;
      refuseWith(req, res, auth, log, { status: 403, error: 'insufficient_scope', message, scopes: [auth.adminScope] });
      return;
    }
    const asked = req.query['tenant'];
    const refusal = asked === undefined ? undefined : tenantRefusal(auth, admin, asked);
    if (refusal) {
      refuseWith(req, res, auth, log, refusal, admin);
      return;
    }
    res.locals['admin'] = admin;
    if (!platform) res.locals['confinedTenant'] = admin.tenant;
    next();
  };
}

/**
 * Express middleware that lets through any caller with a valid token (401 with an RFC 6750 challenge otherwise),
 * its principal in `res.locals.caller` and whether it holds an admin scope in `res.locals.callerIsAdmin`: the
 * approvals API, where named approvers decide without being admins. With authentication off it lets everyone through.
 */
export function callerGuard(auth: Authenticator | undefined, log: Logger): RequestHandler {
  return async (req, res, next) => {
    if (!auth) {
      next();
      return;
    }
    const identified = await auth.identify(req);
    if (!identified.ok) {
      refuseWith(req, res, auth, log, identified.refusal);
      return;
    }
    const { principal } = identified;
    res.locals['caller'] = principal;
    res.locals['callerIsAdmin'] = isPlatformAdmin(auth, principal) || (principal.scopes?.includes(auth.adminScope) ?? false);
    next();
  };
}

/**
 * Answers a refusal (status, RFC 6750 challenge, `{ error }` body). One naming the platform admin scope (an
 * admin reaching into another tenant) is logged as a warning with the admin's subject and tenant.
 */
export function refuseWith(req: Request, res: Response, auth: Authenticator, log: Logger, refusal: Refusal, admin?: Principal): void {
  if (admin && refusal.scopes?.includes(auth.platformAdminScope)) {
    log.warn(
      { method: req.method, path: req.originalUrl.split('?')[0], subject: admin.subject, tenant: admin.tenant, reason: refusal.message },
      'admin request refused',
    );
  }
  const challenge = challengeOf(refusal, auth.metadataUrl(''));
  if (challenge) res.set('WWW-Authenticate', challenge);
  fail(res, refusal.status, REFUSAL_CODES[refusal.status], refusal.message);
}

/** Builds the router; mount it at `/api/v1`. */
export function adminRouter(options: AdminApiOptions): Router {
  const router = express.Router();
  const { auth } = options;
  const requireAdmin = adminGuard(auth, 'refuse', options.log);
  const adminOf = (res: Response): Principal => res.locals['admin'] as Principal;

  router.post(
    '/api-keys',
    requireAdmin,
    express.json({ limit: '16kb', strict: true, type: () => true }),
    checkJsonDepth,
    async (req, res) => {
      parseQuery(req.query, noQuerySchema, `${req.baseUrl}${req.path}`);
      if (!req.is('application/json')) {
        fail(res, 415, 'UnsupportedMediaType', 'the body must be JSON, with Content-Type: application/json');
        return;
      }
      const parsed = apiKeyInputSchema.safeParse(req.body ?? {});
      if (!parsed.success) {
        const issue = parsed.error.issues[0]!;
        fail(res, 400, 'InvalidRequest', `${issue.path.join('.') || 'body'}: ${issue.message}`);
        return;
      }
      const admin = adminOf(res);
      const tenant = parsed.data.tenant ?? options.tenant;
      const scopes = parsed.data.scopes ?? [...options.defaultScopes];
      const refusal =
        tenantRefusal(auth!, admin, tenant) ??
        (scopes.includes(auth!.platformAdminScope) && !isPlatformAdmin(auth!, admin)
          ? {
              status: 403 as const,
              error: 'insufficient_scope' as const,
              message: `only a platform admin (scope ${auth!.platformAdminScope}) makes keys with the scope ${auth!.platformAdminScope}; an admin of tenant ${admin.tenant} may make keys of tenant ${admin.tenant} with any other scopes`,
              scopes: [auth!.platformAdminScope],
            }
          : undefined);
      if (refusal) {
        refuseWith(req, res, auth!, options.log, refusal, admin);
        return;
      }
      const createdBy = admin.subject;
      const { key, info } = await auth!.keys.create({
        name: parsed.data.name,
        tenant,
        scopes,
        groups: parsed.data.groups ?? [],
        createdBy,
      });
      options.log.info({ id: info.id, name: info.name, tenant: info.tenant, scopes: info.scopes, by: createdBy }, 'API key created');
      const warnings = unknownPunkScopes(scopes, [auth!.adminScope, auth!.platformAdminScope, ...options.defaultScopes]);
      res
        .status(201)
        .set('Cache-Control', 'no-store')
        .json({ key, ...info, ...(warnings.length > 0 && { warnings }) });
    },
  );

  router.get('/api-keys', requireAdmin, async (req, res) => {
    const { tenant } = parseQuery(req.query, tenantQuerySchema, `${req.baseUrl}${req.path}`);
    res.set('Cache-Control', 'no-store').json({ apiKeys: await auth!.keys.list(tenant ?? confinedTenant(res)) });
  });

  router.delete('/api-keys/:id', requireAdmin, async (req, res) => {
    parseQuery(req.query, noQuerySchema, `${req.baseUrl}${req.path}`);
    const id = String(req.params['id']);
    const confined = confinedTenant(res);
    if (confined !== undefined) {
      const found = await auth!.keys.find(id);
      const refusal = found && tenantRefusal(auth!, adminOf(res), found.tenant);
      if (refusal) {
        refuseWith(req, res, auth!, options.log, refusal, adminOf(res));
        return;
      }
    }
    await auth!.keys.revoke(id);
    options.log.info({ id, by: adminOf(res).subject }, 'API key revoked');
    res.status(204).set('Cache-Control', 'no-store').end();
  });

  refuseOtherMethods(router);

  router.use('/api-keys', (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    const refusal = bodyRefusal(error);
    if (type === 'entity.parse.failed') fail(res, 400, 'InvalidRequest', 'the body must be a JSON object');
    else if (type === 'entity.too.large') fail(res, 413, 'PayloadTooLarge', 'the body is larger than 16 KiB');
    else if (refusal) fail(res, refusal.status, refusal.code, refusal.message);
    else if (error instanceof PunkError && error.code === 'ApiKeyNotFound') fail(res, 404, error.code, error.message);
    else if (error instanceof PunkError && error.code === 'InvalidParameter') fail(res, 400, error.code, error.message);
    else {
      options.log.error({ err: errorMessage(error) }, 'admin API failed');
      fail(res, 503, 'Unavailable', `API keys could not be read or written: ${errorMessage(error)}`);
    }
  });
  return router;
}

/** The `error.code` of each refusal status. */
const REFUSAL_CODES: Record<Refusal['status'], string> = {
  400: 'InvalidRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  503: 'Unavailable',
};

function fail(res: Response, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.status(status).set('Cache-Control', 'no-store').json({ error: { code, message } });
}

/**
 * A sentence for each `punk:` scope of `scopes` that is none of `known` (the admin and platform-admin scopes, the
 * endpoint's required ones): Punk reads only those, so another is most likely a misspelling. Other scopes are the
 * deployment's own (policies and OAuth may use them) and pass without a word.
 */
function unknownPunkScopes(scopes: readonly string[], known: readonly string[]): string[] {
  return scopes
    .filter((scope) => scope.startsWith('punk:') && !known.includes(scope))
    .map(
      (scope) =>
        `scope ${scope} is not one Punk defines (${[...new Set(known)].join(', ')}): the key has it as given, but it makes no admin`,
    );
}
