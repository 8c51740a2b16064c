/**
 * Every JSON body the front parses (the MCP endpoint, the registry and credentials API, the API-key API) is refused
 * with a 400 naming the depth limit when it nests deeper than MAX_JSON_DEPTH, never a 500 (`Maximum call stack size
 * exceeded`), through a real front (authentication on) in front of the real gateway (scratch Postgres database, a
 * credentials key) on a MemoryBus; bodies of ordinary depth still work.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { destinationPolicyOf, Keyring, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, MemoryBus, streams } from '@punk/lib';
import { listen } from './listen.js';
import { createFront, type Front } from '../index.js';
import { MAX_JSON_DEPTH } from '../json-depth.js';
import { openScratchDb, type ScratchDb } from '../../../lib/dist/test/pgtest.js';

const log = createLogger('json-depth-test', 'silent');
const BOOTSTRAP = randomBytes(24).toString('base64url');
/** Nests 100,000 arrays under `field`: about 200 KB, a depth that overflows any recursive walk. */
const deepBody = (field: string, depth = 100_000) => `{"${field}":${'['.repeat(depth)}${']'.repeat(depth)}}`;

describe('JSON bodies nested too deep', () => {
  const tenant = `depth-${randomBytes(4).toString('hex')}`;
  let bus: MemoryBus;
  let database: ScratchDb;
  let workDir: string;
  let governance: GovernanceService;
  let gateway: Gateway;
  let front: Front;
  let http: HttpServer;
  let base: string;

  /** A request to `base<path>` with the bootstrap admin key; `body` is sent as written. */
  const send = async (method: string, path: string, body?: string) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${BOOTSTRAP}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
      },
      ...(body !== undefined && { body }),
    });
    const text = await response.text();
    return { status: response.status, text };
  };

  before(async () => {
    bus = new MemoryBus(log);
    await bus.ensureStream(streams.ledger);
    database = await openScratchDb(log);
    workDir = await mkdtemp(join(tmpdir(), 'punk-json-depth-'));
    governance = await startGovernance({ bus, log });
    gateway = await startGateway({
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      bus,
      log,
      db: database.db,
      servers: [],
      workDir,
      startTimeoutMs: 60_000,
      callTimeoutMs: 30_000,
      keyring: Keyring.fromConfig({ encryptionKey: `depth:${randomBytes(32).toString('base64')}`, encryptionPreviousKeys: [] }),
    });
    front = await createFront({
      bus,
      log,
      tenant,
      maxBodyBytes: 1024 * 1024,
      callTimeoutMs: 30_000,
      auth: { publicUrl: 'https://punk.example.test', bootstrapAdminKey: BOOTSTRAP },
    });
    ({ http, base } = await listen(front));
  });

  after(async () => {
    await front?.close();
    http?.closeAllConnections();
    if (http) await new Promise((done) => http.close(done));
    await gateway?.stop();
    await governance?.stop();
    await bus?.close();
    await database?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('answers 400 naming the limit on every JSON route, never 500', async () => {
    const limit = new RegExp(`deeper than ${MAX_JSON_DEPTH} levels \\(the limit\\)`);
    const routes: Array<[string, string, string]> = [
      ['POST', '/api/v1/mcp/servers', deepBody('name')],
      ['PUT', '/api/v1/mcp/servers/deep', deepBody('name')],
      ['POST', '/api/v1/mcp/servers/deep/tools/echo/accept', deepBody('fingerprint')],
      ['POST', '/api/v1/credentials', deepBody('data')],
      ['PUT', '/api/v1/credentials/deep', deepBody('data')],
      // The API-key API reads at most 16 KiB: as deep as that allows.
      ['POST', '/api/v1/api-keys', deepBody('name', 8000)],
      ['POST', '/mcp', deepBody('params')],
    ];
    for (const [method, path, body] of routes) {
      const answer = await send(method, path, body);
      assert.equal(answer.status, 400, `${method} ${path}: ${answer.text.slice(0, 300)}`);
      assert.match(answer.text, limit, `${method} ${path}`);
    }
  });

  it('still accepts bodies of ordinary depth', async () => {
    const created = await send(
      'POST',
      '/api/v1/mcp/servers',
      JSON.stringify({ name: 'plain', type: 'http', url: 'http://127.0.0.1:9/mcp' }),
    );
    assert.equal(created.status, 201, created.text);
    const credential = await send('POST', '/api/v1/credentials', JSON.stringify({ id: 'plain', data: { value: 'v' } }));
    assert.equal(credential.status, 201, credential.text);
    const key = await send('POST', '/api/v1/api-keys', JSON.stringify({ name: 'plain' }));
    assert.equal(key.status, 201, key.text);
    // Exactly MAX_JSON_DEPTH levels (the outer object is level 1) passes the check and reaches the schema.
    const atLimit = await send('POST', '/api/v1/mcp/servers', deepBody('name', MAX_JSON_DEPTH - 1));
    assert.equal(atLimit.status, 400, atLimit.text);
    assert.doesNotMatch(atLimit.text, /deeper than/);
  });
});
