/**
 * The approvals API over HTTP, mounted at `/api/v1` by the front; each route is one `punk.governance.approval`
 * request (`approvalRequestSchema`), answered by governance, which owns approvals (docs/governance.md "Approvals").
 *
 * | route | operation | success |
 * |---|---|---|
 * | `GET /approvals?state=&server=&tool=&subject=` | `list` | 200 `{ approvals }`, newest first |
 * | `GET /approvals/:id` | `get` | 200 `{ approval }` |
 * | `POST /approvals/:id/approve` `{ reason? }` | `decide` | 200 `{ approval }` |
 * | `POST /approvals/:id/deny` `{ reason? }` | `decide` | 200 `{ approval }` |
 *
 * With authentication on, any authenticated caller of the tenant may ask (401 otherwise): it sees the requests it may
 * decide or made, and deciding one it may not is 403 `ApprovalForbidden` naming who may. With it off, the caller acts
 * as an admin of the front's tenant and may decide any request. Errors are `{ error: { code, message } }`.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import {
  anonymousPrincipal,
  approvalDecisionBodySchema,
  approvalsQuerySchema,
  errorMessage,
  noQuerySchema,
  parseQuery,
  refuseOtherMethods,
  PunkError,
  requestApproval,
  type ApprovalCaller,
  type Bus,
  type Logger,
  type Principal,
} from '@punk/lib';
import { callerGuard } from './auth/admin-api.js';
import type { Authenticator } from './auth/authenticator.js';
import { checkJsonDepth } from './json-depth.js';
import { statusOf } from './registry-api.js';

/** HTTP status of the approvals API's own error codes (others: `statusOf` of registry-api.ts). */
const STATUSES: Record<string, number> = {
  ApprovalForbidden: 403,
  ApprovalNotPending: 409,
  ApprovalsUnavailable: 503,
  GovernanceUnavailable: 503,
  GovernanceTimeout: 503,
};

/** Options of {@link approvalsRouter}. */
export interface ApprovalsApiOptions {
  bus: Bus;
  log: Logger;
  /** The front's authenticator; absent when authentication is off. */
  auth: Authenticator | undefined;
  /** The front's tenant: the tenant of callers when authentication is off. */
  tenant: string;
}

/** Builds the router; mount it at `/api/v1`. */
export function approvalsRouter(options: ApprovalsApiOptions): Router {
  const router = express.Router();
  router.use('/approvals', callerGuard(options.auth, options.log));
  const callerOf = (res: Response): ApprovalCaller => {
    const principal = res.locals['caller'] as Principal | undefined;
    if (!principal) return { principal: anonymousPrincipal(options.tenant), admin: true, authOff: true };
    return { principal, admin: res.locals['callerIsAdmin'] === true, authOff: false };
  };
  const answer = async (res: Response, reply: Promise<unknown>) => {
    res
      .status(200)
      .set('Cache-Control', 'no-store')
      .json(await reply);
  };

  router.get('/approvals', async (req, res, next) => {
    try {
      const filter = parseQuery(req.query, approvalsQuerySchema, `${req.baseUrl}${req.path}`);
      const caller = callerOf(res);
      await answer(res, requestApproval(options.bus, { op: 'list', tenant: caller.principal.tenant, caller, filter }));
    } catch (error) {
      next(error);
    }
  });
  router.get('/approvals/:id', async (req, res, next) => {
    try {
      parseQuery(req.query, noQuerySchema, `${req.baseUrl}${req.path}`);
      const caller = callerOf(res);
      await answer(res, requestApproval(options.bus, { op: 'get', tenant: caller.principal.tenant, caller, id: req.params['id']! }));
    } catch (error) {
      next(error);
    }
  });
  const decide = (verdict: 'approve' | 'deny') => [
    express.json({ limit: '16kb', strict: true, type: () => true }),
    checkJsonDepth,
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        parseQuery(req.query, noQuerySchema, `${req.baseUrl}${req.path}`);
        const hasBody = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
        if (hasBody && !req.is('application/json'))
          throw new PunkError('UnsupportedMediaType', 'the body must be JSON, with Content-Type: application/json');
        const parsed = approvalDecisionBodySchema.safeParse(req.body ?? {});
        if (!parsed.success) {
          const issue = parsed.error.issues[0]!;
          throw new PunkError('InvalidRequest', `${issue.path.join('.') || 'body'}: ${issue.message}`);
        }
        const caller = callerOf(res);
        await answer(
          res,
          requestApproval(options.bus, {
            op: 'decide',
            tenant: caller.principal.tenant,
            caller,
            id: String(req.params['id']),
            verdict,
            ...(parsed.data.reason !== undefined && { reason: parsed.data.reason }),
          }),
        );
      } catch (error) {
        next(error);
      }
    },
  ];
  router.post('/approvals/:id/approve', ...decide('approve'));
  router.post('/approvals/:id/deny', ...decide('deny'));

  refuseOtherMethods(router);

  router.use('/approvals', (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    const [status, code, message] =
      type === 'entity.parse.failed'
        ? [400, 'InvalidRequest', 'body: not valid JSON']
        : type === 'entity.too.large'
          ? [413, 'PayloadTooLarge', 'the body is larger than 16 KiB']
          : error instanceof PunkError
            ? [STATUSES[error.code] ?? statusOf(error), error.code, error.message]
            : [500, 'Internal', 'the request failed inside Punk; see its logs'];
    if (status >= 500) options.log.warn({ err: errorMessage(error) }, 'approvals API request failed');
    res.status(status).set('Cache-Control', 'no-store').json({ error: { code, message } });
  });
  return router;
}
