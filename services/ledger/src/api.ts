import express, { type NextFunction, type Request, type Response } from 'express';
import {
  encodeRunsCursor,
  ledgerTenantQuerySchema,
  ledgerVerifyQuerySchema,
  parseQuery,
  PunkError,
  refuseOtherMethods,
  runsQuerySchema,
  type Logger,
} from '@punk/lib';
import type { LedgerStore } from './store.js';

export { MAX_RUNS_LIMIT } from '@punk/lib';
const DEFAULT_RUNS_LIMIT = 50;
const DEFAULT_TENANT = 'default';

/** The query of `req` parsed with `schema` (`parseQuery` of @punk/lib). @throws PunkError `InvalidParameter`. */
function queryOf<T>(req: Request, schema: Parameters<typeof parseQuery<T>>[1]): T {
  return parseQuery(req.query, schema, `${req.baseUrl}${req.path}`);
}

/**
 * The ledger's HTTP API, mounted by the CLI at `/api/v1`. JSON only; errors are
 * `{ error: { code, message } }` with 400 (`InvalidParameter`, `AmbiguousRun`),
 * 404 (`RunNotFound`), 503 (`DatabaseUnavailable`) or 500 (`InternalError`).
 *
 * - `GET /runs?tenant=&limit=&cursor=&before=&server=&tool=&subject=&type=&outcome=&trigger=&since=&until=`:
 *   `{ runs: RunSummary[], nextCursor? }` (`runsPageSchema`), most recently active first (last event time, then run
 *   id); `tenant` defaults to `default`, `limit` to 50 (1 to 500); `nextCursor`, present while there are more runs,
 *   is the `cursor` of the next page (lib's runs-cursor.ts; one not minted here is a 400 naming `cursor`); `before`
 *   is an RFC 3339 time (runs whose last event occurred strictly earlier); the filters are exact values combined
 *   with AND (`type`: an event type the run holds; `since`: last event at or after; `until`: first event at or
 *   before); an unknown parameter is a 400 naming it.
 * - `GET /runs/:id?tenant=`: `{ run, events }`, events in chain order with `hash` and `prevHash`.
 * - `GET /ledger/verify?tenant=&from=&maxEvents=`: the `VerifyResult` of one bounded, incremental verification of
 *   the tenant's chain (see `verifyChain`); `from=genesis` starts again from the first event.
 *
 * `options.confinedTenant` names the one tenant a request's caller may read (a tenant admin's, as the guard in
 * front of this router resolved it, which also refused a `?tenant=` naming another): a request without `tenant`
 * reads that tenant instead of `default` (or, for one run, every tenant). `options.caughtUp`, awaited before each
 * read, makes a read see every event appended before it (`punk up`, whose ledger commits in group-commit batches); if
 * it fails (a consumer that cannot store), the read answers with what is stored and the failure is logged.
 */
export function createLedgerRouter(
  store: LedgerStore,
  log: Logger,
  options: { confinedTenant?: (res: Response) => string | undefined; caughtUp?: () => Promise<void> } = {},
): express.Router {
  const router = express.Router();
  const confined = (res: Response) => options.confinedTenant?.(res);
  const { caughtUp } = options;
  if (caughtUp)
    router.use(['/runs', '/ledger'], async (_req, _res, next) => {
      await caughtUp().catch((error: unknown) =>
        log.warn({ err: error }, 'the ledger has not stored every appended event; reading what it has'),
      );
      next();
    });

  router.get('/runs', async (req, res) => {
    const query = queryOf(req, runsQuerySchema);
    const limit = query.limit ?? DEFAULT_RUNS_LIMIT;
    // One run more than the page: whether there is a next page, without an empty last one.
    const runs = await store.listRuns({
      tenant: query.tenant ?? confined(res) ?? DEFAULT_TENANT,
      limit: limit + 1,
      ...(query.cursor !== undefined && { after: query.cursor }),
      ...(query.before !== undefined && { before: new Date(query.before) }),
      ...(query.since !== undefined && { since: new Date(query.since) }),
      ...(query.until !== undefined && { until: new Date(query.until) }),
      ...(query.server !== undefined && { server: query.server }),
      ...(query.tool !== undefined && { tool: query.tool }),
      ...(query.subject !== undefined && { subject: query.subject }),
      ...(query.type !== undefined && { type: query.type }),
      ...(query.outcome !== undefined && { outcome: query.outcome }),
      ...(query.trigger !== undefined && { trigger: query.trigger }),
    });
    const page = runs.slice(0, limit);
    res.json({ runs: page, ...(runs.length > limit && { nextCursor: encodeRunsCursor(page.at(-1)!) }) });
  });

  router.get('/runs/:id', async (req, res) => {
    const runId = req.params.id;
    const tenant = queryOf(req, ledgerTenantQuerySchema).tenant ?? confined(res);
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
    const query = queryOf(req, ledgerVerifyQuerySchema);
    res.json(
      await store.verify(query.tenant ?? confined(res) ?? DEFAULT_TENANT, {
        ...(query.from !== undefined && { from: query.from }),
        ...(query.maxEvents !== undefined && { maxEvents: query.maxEvents }),
      }),
    );
  });

  refuseOtherMethods(router);

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
