/**
 * The ledger API through mcp-front, for the distributed topology (`PUNK_LEDGER_URL`): the ledger processes do not
 * authenticate, so with authentication on their API stays internal, and a front serves `/api/v1/runs…` and
 * `/api/v1/ledger/…` instead, to admins only (its `adminOnly` guard), passing each request on to the ledger
 * replica unchanged but for the tenant: a tenant admin's request that names none reads its own tenant. The
 * ledger's answer (status and JSON body) goes back as it is; the ledger's URL is never named to the caller.
 */
import express, { type RequestHandler, type Router } from 'express';
import type { Logger } from '@punk/lib';
import { confinedTenant } from './auth/admin-api.js';

/** How long the ledger may take to answer one request, in milliseconds; then 504. */
const LEDGER_TIMEOUT_MS = 30_000;

/**
 * A router for `/api/v1` serving the ledger paths (`/runs`, `/runs/<id>`, `/ledger/…`, any method: the ledger
 * answers 405 for what it does not serve) through `adminOnly` and on to `ledgerUrl` (a base URL such as
 * `http://punk-ledger:8080`). A ledger that does not answer is a 502 `LedgerUnavailable` (504 after
 * {@link LEDGER_TIMEOUT_MS}) naming no internal address.
 */
export function ledgerForwardRouter(options: { ledgerUrl: string; adminOnly: RequestHandler; log: Logger }): Router {
  const router = express.Router();
  const forward: RequestHandler = async (req, res) => {
    const url = new URL(req.originalUrl, options.ledgerUrl);
    const tenant = confinedTenant(res);
    if (tenant !== undefined && !url.searchParams.has('tenant')) url.searchParams.set('tenant', tenant);
    const closed = new AbortController();
    res.once('close', () => closed.abort());
    try {
      const answer = await fetch(url, {
        method: req.method,
        headers: { accept: 'application/json' },
        signal: AbortSignal.any([closed.signal, AbortSignal.timeout(LEDGER_TIMEOUT_MS)]),
      });
      const body = await answer.text();
      res
        .status(answer.status)
        .set('Content-Type', answer.headers.get('content-type') ?? 'application/json')
        .set('Cache-Control', 'no-store');
      const allow = answer.headers.get('allow');
      if (allow) res.set('Allow', allow);
      res.send(body);
    } catch (error) {
      if (closed.signal.aborted) return;
      const timedOut = error instanceof Error && error.name === 'TimeoutError';
      options.log.warn({ err: error instanceof Error ? error.message : String(error), path: req.path }, 'the ledger did not answer');
      res
        .status(timedOut ? 504 : 502)
        .set('Cache-Control', 'no-store')
        .json({
          error: {
            code: 'LedgerUnavailable',
            message: timedOut
              ? `the ledger did not answer within ${String(LEDGER_TIMEOUT_MS / 1000)} s; try again`
              : 'the ledger cannot be reached from mcp-front (PUNK_LEDGER_URL); try again once a ledger replica runs',
          },
        });
    }
  };
  router.use(['/runs', '/ledger'], options.adminOnly, forward);
  return router;
}
