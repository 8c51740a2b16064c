/**
 * The admin API of API keys, mounted at `/api/v1` (JSON; errors are `{ error: { code, message } }`).
 * Every route needs a caller with the admin scope (`PUNK_AUTH_ADMIN_SCOPE`, default `punk:admin`):
 * 401 with an RFC 6750 challenge without a valid token, 403 `insufficient_scope` without the scope.
 *
 * - `POST /api-keys` `{ name, tenant?, scopes?, groups? }` → 201 `{ key, id, name, tenant, scopes, groups,
 *   createdAt, createdBy }`: `key` (`pk_…`) is shown this once and stored only as its SHA-256. `tenant`
 *   defaults to the front's, `scopes` to the endpoint's required scopes.
 * - `GET /api-keys?tenant=` → `{ apiKeys: [...] }`, the same fields without `key`.
 * - `DELETE /api-keys/:id` → 204; 404 `ApiKeyNotFound` for an unknown id. Revocation holds on every replica
 *   from the next request on.
 *
 * With authentication off every route answers 404 `AuthenticationOff`.
 */
import express, { type NextFunction, type Request, type RequestHandler, type Response, type Router } from 'express';
import { apiKeyInputSchema, errorMessage, PunkError, tenantSchema, type Logger, type Principal } from '@punk/lib';
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

/**
 * Express middleware that lets only callers with the admin scope through (before any body is read) and puts
 * their principal in `res.locals.admin`: 401 with an RFC 6750 challenge without a valid token, 403
 * `insufficient_scope` without the scope (JSON `{ error: { code, message } }`). With authentication off
 * (`auth` undefined) it lets everyone through (`whenOff: 'open'`, the ledger and servers APIs of `punk up`)
 * or answers 404 `AuthenticationOff` (`'refuse'`, the API keys, which mean nothing without it).
 */
export function adminGuard(auth: Authenticator | undefined, whenOff: 'open' | 'refuse'): RequestHandler {
  return async (req, res, next) => {
    if (!auth) {
      if (whenOff === 'open') next();
      else fail(res, 404, 'AuthenticationOff', 'API keys need authentication: set PUNK_AUTH_MODE=on and PUNK_PUBLIC_URL');
      return;
    }
    const identified = await auth.identify(req);
    let refusal: Refusal;
    if (identified.ok) {
      if (identified.principal.scopes?.includes(auth.adminScope)) {
        res.locals['admin'] = identified.principal;
        next();
        return;
      }
      refusal = {
        status: 403,
        error: 'insufficient_scope',
        message: `this API needs the scope ${auth.adminScope}`,
        scopes: [auth.adminScope],
      };
    } else {
      refusal = identified.refusal;
    }
    const challenge = challengeOf(refusal, auth.metadataUrl(''));
    if (challenge) res.set('WWW-Authenticate', challenge);
    fail(res, refusal.status, REFUSAL_CODES[refusal.status], refusal.message);
  };
}

/** Builds the router; mount it at `/api/v1`. */
export function adminRouter(options: AdminApiOptions): Router {
  const router = express.Router();
  const { auth } = options;
  const requireAdmin = adminGuard(auth, 'refuse');
  const adminOf = (res: Response): Principal => res.locals['admin'] as Principal;

  router.post(
    '/api-keys',
    requireAdmin,
    express.json({ limit: '16kb', strict: true, type: () => true }),
    checkJsonDepth,
    async (req, res) => {
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
      const createdBy = adminOf(res).subject;
      const { key, info } = await auth!.keys.create({
        name: parsed.data.name,
        tenant: parsed.data.tenant ?? options.tenant,
        scopes: parsed.data.scopes ?? [...options.defaultScopes],
        groups: parsed.data.groups ?? [],
        createdBy,
      });
      options.log.info({ id: info.id, name: info.name, tenant: info.tenant, scopes: info.scopes, by: createdBy }, 'API key created');
      res
        .status(201)
        .set('Cache-Control', 'no-store')
        .json({ key, ...info });
    },
  );

  router.get('/api-keys', requireAdmin, async (req, res) => {
    const tenant = req.query['tenant'];
    if (tenant !== undefined && (typeof tenant !== 'string' || !tenantSchema.safeParse(tenant).success)) {
      fail(res, 400, 'InvalidParameter', `query parameter tenant must be one DNS label, got ${JSON.stringify(tenant)}`);
      return;
    }
    res.set('Cache-Control', 'no-store').json({ apiKeys: await auth!.keys.list(tenant) });
  });

  router.delete('/api-keys/:id', requireAdmin, async (req, res) => {
    const id = String(req.params['id']);
    await auth!.keys.revoke(id);
    options.log.info({ id, by: adminOf(res).subject }, 'API key revoked');
    res.status(204).set('Cache-Control', 'no-store').end();
  });

  router.use('/api-keys', (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    const refusal = bodyRefusal(error);
    if (type === 'entity.parse.failed') fail(res, 400, 'InvalidRequest', 'the body must be a JSON object');
    else if (type === 'entity.too.large') fail(res, 413, 'PayloadTooLarge', 'the body is larger than 16 KiB');
    else if (refusal) fail(res, refusal.status, refusal.code, refusal.message);
    else if (error instanceof PunkError && error.code === 'ApiKeyNotFound') fail(res, 404, error.code, error.message);
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
