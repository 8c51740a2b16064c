/**
 * The ledger API through mcp-front (ledger-forward.ts) over real HTTP, in front of a stand-in ledger that answers
 * with the path and query it received: the ledger paths reach it behind the guard (a tenant admin's request that
 * names no tenant gets its own), its status and JSON come back unchanged, other paths are not taken, and a ledger
 * that does not answer is a 502 `LedgerUnavailable` naming no internal address.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import express, { type RequestHandler } from 'express';
import { createLogger } from '@punk/lib';
import { ledgerForwardRouter } from '../ledger-forward.js';

const listening = (server: Server) =>
  new Promise<string>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${String((server.address() as AddressInfo).port)}`)),
  );

describe('the ledger API through mcp-front', () => {
  let ledger: Server;
  let front: Server;
  let frontUrl: string;
  let deadFront: Server;
  let deadFrontUrl: string;
  let ledgerUrl: string;

  before(async () => {
    ledger = createServer((req, res) => {
      const status = req.url?.startsWith('/api/v1/runs/missing') ? 404 : 200;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ method: req.method, url: req.url }));
    });
    ledgerUrl = await listening(ledger);
    // The guard as adminGuard leaves it for a tenant admin of `acme` (a header stands in for its key); 401 without one.
    const guard: RequestHandler = (req, res, next) => {
      if (!req.headers['x-admin']) {
        res.status(401).json({ error: { code: 'Unauthorized', message: 'no token' } });
        return;
      }
      if (req.headers['x-admin'] === 'acme') res.locals['confinedTenant'] = 'acme';
      next();
    };
    const app = (url: string) => {
      const router = express();
      router.use('/api/v1', ledgerForwardRouter({ ledgerUrl: url, adminOnly: guard, log: createLogger('test', 'silent') }));
      router.use((_req, res) => res.status(404).json({ error: { code: 'NotFound' } }));
      return createServer(router);
    };
    front = app(ledgerUrl);
    frontUrl = await listening(front);
    const nothing = createServer();
    const nowhere = await listening(nothing);
    await new Promise((done) => nothing.close(done));
    deadFront = app(nowhere);
    deadFrontUrl = await listening(deadFront);
  });

  after(async () => {
    for (const server of [ledger, front, deadFront]) {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    }
  });

  const get = async (base: string, path: string, admin?: string) => {
    const response = await fetch(`${base}${path}`, { headers: admin ? { 'x-admin': admin } : {} });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('passes admins on to the ledger, a tenant admin to its own tenant, and answers as the ledger did', async () => {
    assert.deepEqual(await get(frontUrl, '/api/v1/runs?limit=5', 'platform'), {
      status: 200,
      body: { method: 'GET', url: '/api/v1/runs?limit=5' },
    });
    assert.deepEqual((await get(frontUrl, '/api/v1/ledger/verify', 'acme')).body, {
      method: 'GET',
      url: '/api/v1/ledger/verify?tenant=acme',
    });
    // A tenant named by the caller stays as it is (the guard refused one that is not its own).
    assert.deepEqual((await get(frontUrl, '/api/v1/runs/r1?tenant=acme', 'acme')).body.url, '/api/v1/runs/r1?tenant=acme');
    assert.equal((await get(frontUrl, '/api/v1/runs/missing-run', 'platform')).status, 404);
    assert.equal((await get(frontUrl, '/api/v1/runs')).status, 401);
    assert.equal((await get(frontUrl, '/api/v1/mcp/servers', 'platform')).status, 404, 'other paths are not the ledger');
  });

  it('a ledger that does not answer is a 502 naming no internal address', async () => {
    const { status, body } = await get(deadFrontUrl, '/api/v1/runs', 'platform');
    assert.equal(status, 502);
    const error = body['error'] as { code: string; message: string };
    assert.equal(error.code, 'LedgerUnavailable');
    assert.match(error.message, /PUNK_LEDGER_URL/);
    assert.doesNotMatch(error.message, /127\.0\.0\.1|http:/);
  });
});
