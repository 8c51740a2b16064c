/**
 * Punk in its distributed topology with the conformance fixture behind it:
 * a nats-server and a Postgres database of its own, governance, ledger, two
 * gateway and two mcp-front replicas as separate OS processes, and the
 * cluster's round-robin proxy in front of the fronts (so consecutive
 * requests of one client land on different replicas). The fixture is an
 * McpServer `conformance` of the tenant, reached over Streamable HTTP (its
 * url) and, as `conformance-stdio`, over stdio (a child process of the
 * gateway); the SDK-style upstream (sdk-server.ts) likewise as `sdk` and
 * `sdk-stdio`.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { startProxy, type Proxy } from '@punk/cli';
import { createLogger } from '@punk/lib';
import { scratchDatabase } from '../distributed.js';
import { manifestDir as makeManifestDir, removeDir, repoRoot } from '../harness.js';
import { startOwnNats, type OwnNats } from '../nats-server.js';
import { startService, type ServiceProcess } from '../processes.js';
import { startFixtureHttp, type FixtureHttpServer } from './fixture-server.js';
import { startSdkHttp } from './sdk-server.js';

/** A running topology. */
export interface ConformanceTopology {
  /** The fixture's own URL (`http://127.0.0.1:<port>/mcp`). */
  fixtureUrl: string;
  /** The SDK-style upstream's own URL (sdk-server.ts), behind Punk as `sdk` and, over stdio, `sdk-stdio`. */
  sdkUrl: string;
  /** The proxy's base URL; `/mcp`, `/servers/conformance/mcp`, `/servers/conformance-stdio/mcp` below it. */
  baseUrl: string;
  services: ServiceProcess[];
  /** Stops everything it started and removes its data. */
  stop(): Promise<void>;
}

/**
 * Starts the fixture and the topology around it; resolves once every
 * service is ready. On failure everything started is stopped again.
 */
export async function startConformanceTopology(): Promise<ConformanceTopology> {
  const tenant = `conf-${randomBytes(3).toString('hex')}`;
  let nats: OwnNats | undefined;
  let db: { url: string; drop(): Promise<void> } | undefined;
  let fixture: FixtureHttpServer | undefined;
  let sdk: FixtureHttpServer | undefined;
  let proxy: Proxy | undefined;
  let manifestDir: string | undefined;
  const services: ServiceProcess[] = [];
  const stop = async () => {
    await proxy?.close();
    await Promise.all(services.map((s) => s.stop('SIGTERM')));
    await fixture?.close();
    await sdk?.close();
    await nats?.stop();
    await db?.drop();
    if (manifestDir) await removeDir(manifestDir);
  };
  try {
    [nats, db, fixture, sdk] = await Promise.all([startOwnNats(), scratchDatabase(), startFixtureHttp(0), startSdkHttp(0)]);
    manifestDir = await makeManifestDir('conformance', {
      'conformance.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: conformance, namespace: ${tenant} }
spec:
  url: ${fixture.url}
  transport: streamable-http
`,
      'conformance-stdio.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: conformance-stdio, namespace: ${tenant} }
spec:
  image: local/conformance-fixture
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/dist/conformance/fixture-server.js'))}, "--stdio"]
  transport: stdio
`,
      'sdk.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: sdk, namespace: ${tenant} }
spec:
  url: ${sdk.url}
  transport: streamable-http
`,
      'sdk-stdio.yaml': `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: sdk-stdio, namespace: ${tenant} }
spec:
  image: local/conformance-sdk
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/dist/conformance/sdk-server.js'))}, "--stdio"]
  transport: stdio
`,
    });
    const env = {
      PUNK_NATS_URL: nats.url,
      PUNK_DATABASE_URL: db.url,
      PUNK_MANIFESTS: manifestDir,
      PUNK_TENANT: tenant,
      PUNK_LOG_LEVEL: 'warn',
      PUNK_SESSION_SIGNING_KEY: randomBytes(32).toString('base64url'),
      // The suite opens a session per scenario from one address, far above the per-client default of 30 a minute.
      PUNK_INITIALIZE_RATE_LIMIT: '100000',
    };
    services.push(...(await Promise.all([startService('governance', env), startService('ledger', env)])));
    services.push(...(await Promise.all([startService('gateway', env), startService('gateway', env)])));
    services.push(...(await Promise.all([startService('mcp-front', env), startService('mcp-front', env)])));
    const fronts = services.filter((s) => s.name === 'mcp-front').map((s) => s.url);
    const ledgers = services.filter((s) => s.name === 'ledger').map((s) => s.url);
    proxy = await startProxy({ host: '127.0.0.1', port: 0, backends: { fronts, ledgers }, log: createLogger('conformance-proxy', 'warn') });
    return { fixtureUrl: fixture.url, sdkUrl: sdk.url, baseUrl: proxy.url, services, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
