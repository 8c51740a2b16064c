/**
 * The registry and credentials APIs over HTTP, mounted at `/api/v1` by the front (so `punk up`, every
 * mcp-front process and `punk cluster` serve them). Each route is one `punk.gateway.admin` request
 * (`gatewayAdminRequestSchema`); the gateway validates bodies and names the bad field.
 *
 * | route | operation | success |
 * |---|---|---|
 * | `GET /mcp/servers` | `servers.list` | 200 `{ servers }` |
 * | `POST /mcp/servers` | `servers.create` | 201 `{ server }` |
 * | `GET /mcp/servers/:id` | `servers.get` | 200 `{ server }` |
 * | `PUT /mcp/servers/:id` | `servers.update` (full replacement) | 200 `{ server }` |
 * | `DELETE /mcp/servers/:id` | `servers.delete` | 204 |
 * | `POST /mcp/servers/:id/test` | `servers.test` | 200 `{ ok, toolCount, tools, latencyMs, error? }` |
 * | `GET /mcp/servers/:id/tools` | `servers.tools` | 200 `{ tools, listedAt, cached }` |
 * | `POST /mcp/servers/:id/tools/:name/accept` | `servers.acceptTool` | 200 |
 * | `POST /credentials` | `credentials.create` | 201 |
 * | `GET /credentials` | `credentials.list` | 200 |
 * | `GET /credentials/:id` | `credentials.get` | 200 |
 * | `PUT /credentials/:id` | `credentials.replace` (in place, one statement) | 200 |
 * | `DELETE /credentials/:id` | `credentials.delete` | 204 |
 * | `GET /workflows` | `workflows.list` | 200 `{ workflows }` |
 * | `GET /workflows/:name` | `workflows.get` | 200 `{ workflow }` |
 * | `POST /workflows/:name/runs` | `workflows.run` (trigger `api`) | 201 `{ runId, state, result?, error? }` once ended, 202 while running |
 * | `POST /workflows/:name/runs/:runId/cancel` | `workflows.cancel` | 200 `{ runId, state: cancelled }`, 202 while it stops |
 * | `GET /settings` | `settings.get` (governance) | 200 `{ settings }` |
 * | `PUT /settings` | `settings.put` (governance; body `{ key, value }`) | 200 `{ setting }` |
 *
 * The settings routes are requests on `punk.governance.admin` (`governanceAdminRequestSchema`), answered by
 * governance, which owns the tenant settings.
 *
 * With authentication on, every route needs an admin (401/403 otherwise, auth/admin-api.ts `adminGuard`); the
 * tenant is the admin's own, or `?tenant=`: any tenant for a platform admin, only its own for a tenant admin
 * (403 naming the tenant and the platform admin scope otherwise). With it off,
 * everything is open (embedded dev mode), the caller is the anonymous principal and the tenant is the front's
 * or `?tenant=`. Answers are JSON with `Cache-Control: no-store`; errors are `{ error: { code, message } }`
 * with the status of {@link statusOf}.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import {
  anonymousPrincipal,
  deadlines,
  errorMessage,
  parseQuery,
  PunkError,
  refuseOtherMethods,
  subjects,
  tenantQuerySchema,
  type Bus,
  type GatewayAdminRequest,
  type GovernanceAdminRequest,
  type Logger,
  type Principal,
} from '@punk/lib';
import { adminGuard, refuseWith, registrationRefusal } from './auth/admin-api.js';
import { bodyRefusal } from './body-errors.js';
import { checkJsonDepth } from './json-depth.js';
import type { Authenticator } from './auth/authenticator.js';

/** HTTP status of each PunkError code the registry and credentials APIs answer with. */
const STATUSES: Record<string, number> = {
  InvalidRegistration: 400,
  InvalidRequest: 400,
  InvalidParameter: 400,
  InvalidMessage: 400,
  InvalidCredential: 400,
  InvalidCredentialReference: 400,
  EgressRefused: 400,
  UpstreamUnreachable: 400,
  ToolNotPending: 409,
  WorkflowNotReady: 409,
  WorkflowRunNotRunning: 409,
  PolicyDenied: 403,
  InvalidArguments: 400,
  ToolDefinitionMismatch: 409,
  Conflict: 409,
  CredentialKeyNotFound: 422,
  CredentialKeyAmbiguous: 422,
  CredentialNotRefreshable: 422,
  CredentialRefreshFailed: 502,
  CredentialRefreshBusy: 503,
  CredentialsUnavailable: 503,
  StdioRegistrationsDisabled: 400,
  ServerNotFound: 404,
  ConnectionUserRequired: 403,
  CredentialNotFound: 404,
  ToolNotFound: 404,
  ServerExists: 409,
  ServerManaged: 409,
  CredentialExists: 409,
  CredentialManaged: 409,
  UnsupportedMediaType: 415,
  PayloadTooLarge: 413,
  ServerUnavailable: 502,
  ServerStartFailed: 502,
  ServerStartTimeout: 504,
  DatabaseUnavailable: 503,
  BusTimeout: 503,
  BusNoResponders: 503,
  BusUnavailable: 503,
  BusClosed: 503,
};

/**
 * The HTTP status of an error: from the table above; else by the code's shape (`…NotFound` 404, `…Exists` 409,
 * `Invalid…` 400); else 500.
 */
export function statusOf(error: unknown): number {
  if (!(error instanceof PunkError)) return 500;
  const known = STATUSES[error.code];
  if (known !== undefined) return known;
  if (error.code.endsWith('NotFound')) return 404;
  if (error.code.endsWith('Exists')) return 409;
  if (error.code.startsWith('Invalid')) return 400;
  return 500;
}

/** The paths this router serves (each guarded, each with its error handler). */
const API_PATHS = ['/mcp/servers', '/credentials', '/settings', '/workflows'];

/** Options of {@link registryRouter}. */
export interface RegistryApiOptions {
  bus: Bus;
  log: Logger;
  /** The front's authenticator; absent when authentication is off. */
  auth: Authenticator | undefined;
  /** The front's tenant: the tenant of anonymous callers without `?tenant=`. */
  tenant: string;
  /** Largest accepted body, in bytes (`PUNK_MAX_BODY_BYTES`); 413 above it. */
  maxBodyBytes: number;
}

/** Builds the router; mount it at `/api/v1`. */
export function registryRouter(options: RegistryApiOptions): Router {
  const router = express.Router();
  const guard = adminGuard(options.auth, 'open', options.log);
  router.use(API_PATHS, guard);
  const parseJson = express.json({ limit: options.maxBodyBytes, strict: false, type: () => true });
  /** Parses a JSON body and checks its depth (400 malformed or nested too deep, 413 too large). */
  const parse = (req: Request, res: Response, next: NextFunction) =>
    parseJson(req, res, (error?: unknown) => (error === undefined || error === null ? checkJsonDepth(req, res, next) : next(error)));
  /** A JSON body: 415 without a JSON content type (before reading it), then parsed (400 malformed or nested too deep, 413 too large). */
  const json = [
    (req: Request, res: Response, next: NextFunction) => {
      if (req.is('application/json')) next();
      else fail(res, 415, 'UnsupportedMediaType', 'the body must be JSON, with Content-Type: application/json');
    },
    parse,
  ];

  /**
   * Who is calling and for which tenant (`?tenant=`, the only query parameter of these routes).
   * @throws PunkError `InvalidParameter` for a bad tenant or any other query parameter.
   */
  const callerOf = (req: Request, res: Response): { principal: Principal; tenant: string } => {
    const admin = res.locals['admin'] as Principal | undefined;
    const principal = admin ?? anonymousPrincipal(options.tenant);
    const { tenant } = parseQuery(req.query, tenantQuerySchema, `${req.baseUrl}${req.path}`);
    return { principal, tenant: tenant ?? principal.tenant };
  };

  /** The parsed body when it is a JSON object; undefined after answering 400 when it is not. */
  const bodyOf = (req: Request, res: Response): Record<string, unknown> | undefined => {
    const body: unknown = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      fail(res, 400, 'InvalidRequest', 'body: must be a JSON object');
      return undefined;
    }
    return body as Record<string, unknown>;
  };

  /** A registration body `principal` may send; undefined after answering 400 (not an object) or 403 (a stdio server, not a platform admin). */
  const registrationOf = (req: Request, res: Response, principal: Principal): Record<string, unknown> | undefined => {
    const body = bodyOf(req, res);
    const refusal = body && options.auth ? registrationRefusal(options.auth, principal, body) : undefined;
    if (!refusal) return body;
    refuseWith(req, res, options.auth!, options.log, refusal, principal);
    return undefined;
  };

  /** Sends one admin request and answers with its reply (`status`, or 204 without a body). */
  const forward = async (res: Response, request: GatewayAdminRequest | GovernanceAdminRequest, status: 200 | 201 | 204 = 200) => {
    const subject = request.op.startsWith('settings.') ? subjects.governanceAdmin : subjects.gatewayAdmin;
    const reply = await options.bus.request(subject, request, { timeoutMs: deadlines.gatewayAdminMs });
    if (status === 204) res.status(204).set('Cache-Control', 'no-store').end();
    else res.status(status).set('Cache-Control', 'no-store').json(reply);
  };

  /** Sends a workflow run's admin request: 202 while the run is still running, else `ended` (201 started, 200 cancelled). */
  const answerRun = async (res: Response, request: GatewayAdminRequest, ended: 200 | 201) => {
    const reply = (await options.bus.request(subjects.gatewayAdmin, request, { timeoutMs: deadlines.gatewayAdminMs })) as {
      state?: unknown;
    };
    res
      .status(reply.state === 'running' ? 202 : ended)
      .set('Cache-Control', 'no-store')
      .json(reply);
  };

  const route =
    (handler: (req: Request, res: Response, caller: { principal: Principal; tenant: string }) => Promise<void>) =>
    async (req: Request, res: Response, next: NextFunction) => {
      try {
        await handler(req, res, callerOf(req, res));
      } catch (error) {
        next(error);
      }
    };
  const id = (req: Request) => String(req.params['id']);

  router.get(
    '/mcp/servers',
    route((_req, res, { tenant }) => forward(res, { op: 'servers.list', tenant })),
  );
  router.post(
    '/mcp/servers',
    json,
    route(async (req, res, { tenant, principal }) => {
      const body = registrationOf(req, res, principal);
      if (body) await forward(res, { op: 'servers.create', tenant, principal, body }, 201);
    }),
  );
  router.get(
    '/mcp/servers/:id',
    route((req, res, { tenant }) => forward(res, { op: 'servers.get', tenant, id: id(req) })),
  );
  router.put(
    '/mcp/servers/:id',
    json,
    route(async (req, res, { tenant, principal }) => {
      const body = registrationOf(req, res, principal);
      if (body) await forward(res, { op: 'servers.update', tenant, principal, id: id(req), body });
    }),
  );
  router.delete(
    '/mcp/servers/:id',
    route((req, res, { tenant, principal }) => forward(res, { op: 'servers.delete', tenant, principal, id: id(req) }, 204)),
  );
  router.post(
    '/mcp/servers/:id/test',
    route((req, res, { tenant, principal }) => forward(res, { op: 'servers.test', tenant, principal, id: id(req) })),
  );
  router.get(
    '/mcp/servers/:id/tools',
    route((req, res, { tenant }) => forward(res, { op: 'servers.tools', tenant, id: id(req) })),
  );
  // The body is optional here: `{ fingerprint }` of the reviewed definition, or nothing.
  router.post(
    '/mcp/servers/:id/tools/:tool/accept',
    (req: Request, res: Response, next: NextFunction) => (hasBody(req) ? json[0]!(req, res, () => parse(req, res, next)) : next()),
    route(async (req, res, { tenant, principal }) => {
      const body = hasBody(req) ? bodyOf(req, res) : {};
      if (body) await forward(res, { op: 'servers.acceptTool', tenant, principal, id: id(req), tool: String(req.params['tool']), body });
    }),
  );
  router.post(
    '/credentials',
    json,
    route(async (req, res, { tenant, principal }) => {
      const body = bodyOf(req, res);
      if (body) await forward(res, { op: 'credentials.create', tenant, principal, body }, 201);
    }),
  );
  router.get(
    '/credentials',
    route((_req, res, { tenant }) => forward(res, { op: 'credentials.list', tenant })),
  );
  router.get(
    '/credentials/:id',
    route((req, res, { tenant }) => forward(res, { op: 'credentials.get', tenant, id: id(req) })),
  );
  router.put(
    '/credentials/:id',
    json,
    route(async (req, res, { tenant, principal }) => {
      const body = bodyOf(req, res);
      if (body) await forward(res, { op: 'credentials.replace', tenant, principal, id: id(req), body });
    }),
  );
  router.delete(
    '/credentials/:id',
    route((req, res, { tenant, principal }) => forward(res, { op: 'credentials.delete', tenant, principal, id: id(req) }, 204)),
  );

  router.get(
    '/workflows',
    route((_req, res, { tenant }) => forward(res, { op: 'workflows.list', tenant })),
  );
  router.get(
    '/workflows/:name',
    route((req, res, { tenant }) => forward(res, { op: 'workflows.get', tenant, name: String(req.params['name']) })),
  );
  router.post(
    '/workflows/:name/runs',
    (req: Request, res: Response, next: NextFunction) => (hasBody(req) ? json[0]!(req, res, () => parse(req, res, next)) : next()),
    route(async (req, res, { tenant, principal }) => {
      const body = hasBody(req) ? bodyOf(req, res) : {};
      if (!body) return;
      const request: GatewayAdminRequest = { op: 'workflows.run', tenant, principal, name: String(req.params['name']), body };
      await answerRun(res, request, 201);
    }),
  );
  router.post(
    '/workflows/:name/runs/:runId/cancel',
    route(async (req, res, { tenant, principal }) => {
      const request: GatewayAdminRequest = {
        op: 'workflows.cancel',
        tenant,
        principal,
        name: String(req.params['name']),
        runId: String(req.params['runId']),
      };
      await answerRun(res, request, 200);
    }),
  );

  router.get(
    '/settings',
    route((_req, res, { tenant }) => forward(res, { op: 'settings.get', tenant })),
  );
  router.put(
    '/settings',
    json,
    route(async (req, res, { tenant, principal }) => {
      const body = bodyOf(req, res);
      if (body) await forward(res, { op: 'settings.put', tenant, principal, body });
    }),
  );

  refuseOtherMethods(router);

  router.use(API_PATHS, (error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const type = (error as { type?: unknown })?.type;
    if (type === 'entity.parse.failed') {
      fail(res, 400, 'InvalidRequest', 'body: not valid JSON');
      return;
    }
    if (type === 'entity.too.large') {
      fail(res, 413, 'PayloadTooLarge', `the body is larger than ${options.maxBodyBytes} bytes (PUNK_MAX_BODY_BYTES)`);
      return;
    }
    const refusal = bodyRefusal(error);
    if (refusal) {
      fail(res, refusal.status, refusal.code, refusal.message);
      return;
    }
    const status = statusOf(error);
    if (status >= 500) options.log.warn({ err: errorMessage(error) }, 'registry API request failed');
    fail(
      res,
      status,
      error instanceof PunkError ? error.code : 'Internal',
      status === 500 && !(error instanceof PunkError) ? 'the request failed inside Punk; see its logs' : errorMessage(error),
    );
  });
  return router;
}

/** Whether a request carries a body (RFC 9112 §6.3: a Content-Length above 0, or Transfer-Encoding). */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

function fail(res: Response, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.status(status).set('Cache-Control', 'no-store').json({ error: { code, message } });
}
