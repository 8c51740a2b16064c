/**
 * `GET /me` (mounted at `/api/v1`): who the caller's bearer token says it is, for the dashboard (which shows only
 * what the caller may do) and for people checking a key. Any valid token of the tenant may ask: 200
 * `{ authentication, kind, subject, tenant, scopes, groups, admin, platformAdmin, expiresAt? }` (`callerViewSchema`),
 * `Cache-Control: no-store`; 401 with the RFC 6750 challenge without a valid token, 403 for a token of another
 * tenant (authenticator.ts). With authentication off the caller is the tenant's anonymous principal, an admin.
 */
import express, { type Router } from 'express';
import { anonymousPrincipal, type callerViewSchema, type Logger } from '@punk/lib';
import type { z } from 'zod';
import { isPlatformAdmin, refuseWith } from './admin-api.js';
import type { Authenticator } from './authenticator.js';

/** Builds the router; mount it at `/api/v1`. */
export function meRouter(options: { auth: Authenticator | undefined; tenant: string; log: Logger }): Router {
  const { auth } = options;
  const router = express.Router();
  router.get('/me', async (req, res) => {
    let caller: z.infer<typeof callerViewSchema>;
    if (!auth) {
      const anonymous = anonymousPrincipal(options.tenant);
      caller = { authentication: false, kind: 'anonymous', ...anonymous, scopes: [], admin: true, platformAdmin: true };
    } else {
      const identified = await auth.identify(req);
      if (!identified.ok) {
        refuseWith(req, res, auth, options.log, identified.refusal);
        return;
      }
      const { principal, kind, expiresAt } = identified;
      const platformAdmin = isPlatformAdmin(auth, principal);
      caller = {
        authentication: true,
        kind,
        subject: principal.subject,
        tenant: principal.tenant,
        scopes: principal.scopes ?? [],
        groups: principal.groups,
        admin: platformAdmin || (principal.scopes?.includes(auth.adminScope) ?? false),
        platformAdmin,
        ...(expiresAt !== undefined && { expiresAt: new Date(expiresAt).toISOString() }),
      };
    }
    res.set('Cache-Control', 'no-store').json(caller);
  });
  return router;
}
