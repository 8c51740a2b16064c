/** The ledger as a process of its own (`node services/ledger/dist/main.js`, `punk ledger`). */
import express from 'express';
import { type ServiceDefinition } from '@punk/lib';
import { startLedger } from './index.js';

/**
 * Service definition of the ledger for `runService`: needs Postgres
 * (`PUNK_DATABASE_URL`), applies its migrations, consumes the ledger stream
 * with the durable `ledger-writer` consumer (shared by every ledger replica;
 * per-tenant advisory locks keep each chain linear) and serves its JSON API
 * under `/api/v1` (`/api/v1/runs`, `/api/v1/ledger/verify`).
 */
export const ledgerService: ServiceDefinition = {
  name: 'ledger',
  needsDatabase: true,
  async start({ bus, db, log }) {
    const ledger = await startLedger({ bus, db: db!, log });
    const app = express();
    app.disable('x-powered-by');
    app.use('/api/v1', ledger.router);
    app.use((req, res) => {
      res
        .status(404)
        .set('Cache-Control', 'no-store')
        .json({ error: { code: 'NotFound', message: `no route for ${req.method} ${req.path}` } });
    });
    return { stop: () => ledger.stop(), http: app };
  },
};
