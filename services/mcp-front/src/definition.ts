/**
 * mcp-front as a process of its own (`node services/mcp-front/dist/main.js`,
 * `punk mcp-front`): the MCP endpoint of `PUNK_TENANT` on `PUNK_HOST:PUNK_PORT`
 * next to `/healthz` and `/readyz`. Any number of replicas may run: 2025-era
 * sessions live in NATS KV and their SSE events in JetStream.
 */
import express from 'express';
import { streams, unauthenticatedExposureWarning, type ServiceDefinition } from '@punk/lib';
import { createFront, frontOptionsOf } from './front.js';
import { ledgerForwardRouter } from './ledger-forward.js';

/**
 * Service definition of mcp-front for `runService`. Ensures stream
 * `PUNK_SSE`; ready once the sessions bucket is open and the bus
 * subscriptions are made (the gateway's catalog is read on first use).
 */
export const mcpFrontService: ServiceDefinition = {
  name: 'mcp-front',
  needsDatabase: false,
  streams: [streams.sse],
  async start({ config, bus, log }) {
    const exposed = unauthenticatedExposureWarning(config, 'the MCP endpoints');
    if (exposed) log.warn(exposed);
    const front = await createFront({
      bus,
      log,
      tenant: config.tenant,
      ...frontOptionsOf(config),
      ...(config.sessionSigningKey && { sessionSigningKey: config.sessionSigningKey }),
    });
    const app = express();
    app.use(front.router);
    // With PUNK_LEDGER_URL the ledger API is served here too, for admins (ledger-forward.ts).
    if (config.ledgerUrl) app.use('/api/v1', ledgerForwardRouter({ ledgerUrl: config.ledgerUrl, adminOnly: front.adminOnly, log }));
    return { http: app, stop: () => front.close() };
  },
};
