import express, { type NextFunction, type Request, type Response } from 'express';
import { ledgerTenantQuerySchema, PunkError, runsQuerySchema, type Logger } from '@punk/lib';
import type { LedgerStore } from './store.js';

export { MAX_RUNS_LIMIT } from '@punk/lib';
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

/** What {@link queryOf} needs of a zod object schema of query parameters. */
interface QuerySchema<T> {
  shape: object;
  safeParse(
    input: unknown,
  ): { success: true; data: T } | { success: false; error: { issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }> } };
}

/**
 * The query of `req` parsed with `schema` (`@punk/lib` api-schemas), each parameter given once. A parameter the
 * route does not know is refused, naming it and the accepted ones (a misspelt `tennant=` would otherwise
 * silently answer for the default tenant).
 * @throws PunkError `InvalidParameter` naming the first bad parameter, its rule and its value.
 */
function queryOf<T>(req: Request, schema: QuerySchema<T>): T {
  const accepted = Object.keys(schema.shape);
  const unknown = Object.keys(req.query).filter((name) => !accepted.includes(name));
  if (unknown.length > 0) {
    const names = unknown.map((name) => JSON.stringify(name)).join(', ');
    throw new PunkError(
      'InvalidParameter',
      `unknown query parameter${unknown.length > 1 ? 's' : ''} ${names} of ${req.baseUrl}${req.path}; accepted: ${accepted.join(', ')}`,
      { parameters: unknown, accepted },
    );
  }
  const query: Record<string, string | undefined> = {};
  for (const name of Object.keys(schema.shape)) query[name] = single(req, name);
  const parsed = schema.safeParse(query);
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  const name = String(issue?.path[0]);
  throw badParameter(name, issue?.message ?? 'is invalid', query[name]);
}

/**
 * The ledger's HTTP API, mounted by the CLI at `/api/v1`. JSON only; errors are
 * `{ error: { code, message } }` with 400 (`InvalidParameter`, `AmbiguousRun`),
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
    const query = queryOf(req, runsQuerySchema);
    res.json({
      runs: await store.listRuns({
        tenant: query.tenant ?? DEFAULT_TENANT,
        limit: query.limit ?? DEFAULT_RUNS_LIMIT,
        ...(query.before !== undefined && { before: new Date(query.before) }),
      }),
    });
  });

  router.get('/runs/:id', async (req, res) => {
    const runId = req.params.id;
    const { tenant } = queryOf(req, ledgerTenantQuerySchema);
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
    res.json(await store.verify(queryOf(req, ledgerTenantQuerySchema).tenant ?? DEFAULT_TENANT));
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
