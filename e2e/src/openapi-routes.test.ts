/**
 * The OpenAPI document names exactly the routes Punk serves under `/api/v1`: the registry and credentials API,
 * the API keys, the caller (`/me`), the approvals and the ledger (each router as the services build it), and `punk up` serves the document itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Router } from 'express';
import { createLogger, MemoryBus, openDatabase } from '@punk/lib';
import { createLedgerRouter, LedgerStore } from '@punk/ledger';
import { adminRouter, approvalsRouter, connectionsRouter, ingestRouter, meRouter, openApiDocument, registryRouter } from '@punk/mcp-front';
import { manifestDir, removeDir, startPunk } from './harness.js';

/**
 * `METHOD /path/{param}` of every route of an express router; the `all` routes that answer other methods 405
 * (`refuseOtherMethods`) are no operations and are left out.
 */
function routesOf(router: Router): string[] {
  return (router.stack as Array<{ route?: { path: string; methods: Record<string, boolean> } }>)
    .filter((layer) => layer.route)
    .flatMap((layer) =>
      Object.keys(layer.route!.methods)
        .filter((method) => method !== '_all')
        .map((method) => `${method.toUpperCase()} ${layer.route!.path.replace(/:(\w+)/g, '{$1}')}`),
    );
}

test('every route under /api/v1 is documented, and every documented operation is served', async () => {
  const log = createLogger('openapi-test', 'silent');
  const bus = new MemoryBus(log);
  const db = await openDatabase({ dataDir: null, log });
  try {
    const served = new Set([
      ...routesOf(registryRouter({ bus, log, auth: undefined, tenant: 'default', maxBodyBytes: 1024 })),
      ...routesOf(adminRouter({ auth: undefined, tenant: 'default', defaultScopes: [], log })),
      ...routesOf(approvalsRouter({ bus, log, auth: undefined, tenant: 'default' })),
      ...routesOf(ingestRouter({ bus, log, auth: undefined, tenant: 'default' })),
      ...routesOf(meRouter({ auth: undefined, tenant: 'default', log })),
      // Mounted at the root: its /api/v1 routes (the OAuth callback is outside the API).
      ...routesOf(connectionsRouter({ bus, log, auth: undefined, tenant: 'default' }))
        .filter((route) => route.includes(' /api/v1/'))
        .map((route) => route.replace(' /api/v1/', ' /')),
      ...routesOf(createLedgerRouter(new LedgerStore(db), log)),
      // Served by the front itself (front.ts).
      'GET /openapi.json',
    ]);
    const documented = new Set(
      Object.entries(openApiDocument.paths).flatMap(([path, item]) =>
        Object.keys(item)
          .filter((key) => key !== 'parameters')
          .map((method) => `${method.toUpperCase()} ${path}`),
      ),
    );
    assert.deepEqual(
      [...served].filter((route) => !documented.has(route)),
      [],
      'served but not documented',
    );
    assert.deepEqual(
      [...documented].filter((route) => !served.has(route)),
      [],
      'documented but not served',
    );
  } finally {
    await db.close();
    await bus.close();
  }
});

test('punk up serves the document at /api/v1/openapi.json', { timeout: 120_000 }, async () => {
  const manifests = await manifestDir('openapi', {});
  const punk = await startPunk({ manifestDir: manifests });
  try {
    const response = await fetch(`${punk.baseUrl}/api/v1/openapi.json`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), JSON.parse(JSON.stringify(openApiDocument)));
  } finally {
    await punk.stop();
    await removeDir(manifests);
  }
});
