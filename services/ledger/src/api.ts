import express, { type NextFunction, type Request, type Response } from 'express';
import { PunkError, type Logger } from '@punk/lib';
import type { LedgerStore } from './store.js';

/** Largest `limit` of `GET /runs`. */
export const MAX_RUNS_LIMIT = 500;
const DEFAULT_RUNS_LIMIT = 50;
const DEFAULT_TENANT = 'default';

function badParameter(name: string, rule: string, value: unknown): PunkError {
  return new PunkError('InvalidParameter', `query parameter ${name} ${rule}, got ${JSON.stringify(value)}`, { parameter: name });
}

/** A single query-string value, or `undefined`; repeated or nested values are refused. */
function single(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badParameter(name, 'must be given once as a plain value', value);
  return value;
}

/**
 * Refuses a query parameter the route does not know, naming it and the accepted ones (a misspelt
 * `tennant=` would otherwise silently answer for the default tenant).
 * @throws PunkError `InvalidParameter`.
 */
function onlyParameters(req: Request, accepted: readonly string[]): void {
  const unknown = Object.keys(req.query).filter((name) => !accepted.includes(name));
  if (unknown.length === 0) return;
  const names = unknown.map((name) => JSON.stringify(name)).join(', ');
  throw new PunkError(
    'InvalidParameter',
    `unknown query parameter${unknown.length > 1 ? 's' : ''} ${names} of ${req.baseUrl}${req.path}; accepted: ${accepted.join(', ')}`,
    { parameters: unknown, accepted },
  );
}

function tenantOf(req: Request): string {
  const tenant = single(req, 'tenant') ?? DEFAULT_TENANT;
  if (tenant.length === 0) throw badParameter('tenant', 'must not be empty', tenant);
  return tenant;
}

/**
 * The ledger's HTTP API, mounted by the CLI at `/api/v1`. JSON only; errors are
 * `{ error: { code, message } }` with 400 (`InvalidParameter`, also for a query parameter the route does
 * not know, `AmbiguousRun`),
 * 404 (`RunNotFound`), 503 (`DatabaseUnavailable`) or 500 (`InternalError`).
 *
 * - `GET /runs?tenant=&limit=&before=`: `{ runs: RunSummary[] }`, most recently active first;
 *   `tenant` defaults to `default`, `limit` to 50 (1 to 500), `before` is an RFC 3339 time
 *   (runs whose last event occurred strictly earlier; pass the last run's `lastAt` to page).
 * - `GET /runs/:id?tenant=`: `{ run, events }`, events in chain order with `hash` and `prevHash`.
 * - `GET /ledger/verify?tenant=`: the `VerifyResult` of the tenant's chain.
 */
export function createLedgerRouter(store: LedgerStore, log: Logger): express.Router {
  const router = express.Router();

  router.get('/runs', async (req, res) => {
    onlyParameters(req, ['tenant', 'limit', 'before']);
    const tenant = tenantOf(req);
    const limitText = single(req, 'limit');
    let limit = DEFAULT_RUNS_LIMIT;
    if (limitText !== undefined) {
      limit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
      if (!(limit >= 1 && limit <= MAX_RUNS_LIMIT))
        throw badParameter('limit', `must be an integer from 1 to ${MAX_RUNS_LIMIT}`, limitText);
    }
    const beforeText = single(req, 'before');
    let before: Date | undefined;
    if (beforeText !== undefined) {
      before = new Date(beforeText);
      if (!/^\d{4}-\d{2}-\d{2}T/.test(beforeText) || Number.isNaN(before.getTime())) {
        throw badParameter('before', 'must be an RFC 3339 date-time', beforeText);
      }
    }
    res.json({ runs: await store.listRuns({ tenant, limit, ...(before && { before }) }) });
  });

  router.get('/runs/:id', async (req, res) => {
    onlyParameters(req, ['tenant']);
    const runId = String(req.params.id);
    const tenant = single(req, 'tenant');
    const found = await store.getRun(runId, tenant);
    if (found === 'ambiguous') {
      throw new PunkError('AmbiguousRun', `run ${runId} exists in several tenants; add ?tenant=`, { runId });
    }
    if (!found) {
      const where = tenant === undefined ? '' : ` in tenant ${tenant}`;
      throw new PunkError('RunNotFound', `no run ${runId}${where} in the ledger`, { runId });
    }
    res.json(found);
  });

  router.get('/ledger/verify', async (req, res) => {
    onlyParameters(req, ['tenant']);
    res.json(await store.verify(tenantOf(req)));
  });

  router.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (error instanceof PunkError) {
      const status = { InvalidParameter: 400, AmbiguousRun: 400, RunNotFound: 404, DatabaseUnavailable: 503 }[error.code] ?? 500;
      if (status >= 500) log.error({ err: error }, 'ledger API request failed');
      res.status(status).json({ error: { code: error.code, message: error.message } });
      return;
    }
    log.error({ err: error }, 'ledger API request failed');
    res.status(500).json({ error: { code: 'InternalError', message: 'the ledger could not answer this request; see its log' } });
  });

  return router;
}
