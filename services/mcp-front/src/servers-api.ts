import { Router } from 'express';
import { PunkError, catalogReplySchema, deadlines, parseMessage, requestGateway, subjects, type Bus } from '@punk/lib';

/**
 * `GET /mcp/servers` (mounted under `/api/v1` by the front, so `punk up`, every
 * mcp-front process and `punk cluster` serve it): the servers of a tenant as
 * the gateway sees them: state, last error and counts. Read-only for now;
 * servers loaded from manifests are `managed`.
 *
 * Query: `tenant` (default: the configured tenant).
 * Answers `{ servers: [{ name, namespace, state, lastError?, managed, toolCount, resourceCount, promptCount, protocolVersion? }] }`.
 */
export function serversRouter(bus: Bus, defaultTenant: string): Router {
  const router = Router();
  router.get('/mcp/servers', async (req, res) => {
    res.set('Cache-Control', 'no-store');
    const tenant = typeof req.query.tenant === 'string' && req.query.tenant !== '' ? req.query.tenant : defaultTenant;
    try {
      const reply = parseMessage(catalogReplySchema, subjects.gatewayCall, await requestGateway(bus, { method: 'catalog/list', tenant }, deadlines.catalogMs));
      res.json({
        servers: reply.servers.map(s => ({
          name: s.name,
          namespace: s.namespace,
          state: s.state,
          ...(s.lastError !== undefined && { lastError: s.lastError }),
          managed: true,
          toolCount: s.tools.length,
          resourceCount: s.resources.length,
          promptCount: s.prompts.length,
          ...(s.protocolVersion !== undefined && { protocolVersion: s.protocolVersion }),
        })),
      });
    } catch (error) {
      const code = error instanceof PunkError ? error.code : 'Internal';
      res.status(503).json({ error: { code, message: (error as Error).message } });
    }
  });
  return router;
}
