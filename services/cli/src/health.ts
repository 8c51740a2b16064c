import { Router } from 'express';

/**
 * `/healthz` (the process is alive) and `/readyz` (it can serve: the checks
 * pass). Both answer JSON with `Cache-Control: no-store`.
 */
export function healthRouter(checks: { ready: () => Promise<void> }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    res.set('Cache-Control', 'no-store');
    try {
      await checks.ready();
      res.json({ status: 'ready' });
    } catch (error) {
      res.status(503).json({ status: 'not-ready', reason: (error as Error).message });
    }
  });
  return router;
}
