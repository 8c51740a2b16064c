// The operator with the real gateway and governance on one nats-server of the test's own and a scratch Postgres
// database: an McpServer whose url is a real MCP server (server-everything over Streamable HTTP) is served by the
// gateway from PUNK_MCP_SERVERS and becomes Ready with the tools the gateway lists; an McpCredential reaches the
// gateway's vault (credentials.apply) and leaves it when deleted; a deleted McpServer is no longer served.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { destinationPolicyOf, Keyring, startGateway, type Gateway } from '@punk/gateway';
import { startGovernance, type GovernanceService } from '@punk/governance';
import { createLogger, PunkError, streams, subjects, type Bus } from '@punk/lib';
import { openScratchDb, type ScratchDb } from '../../../services/lib/dist/test/pgtest.js';
import type { RunningOperator } from '../index.js';
import { controlPlaneAvailability, startControlPlane, type ControlPlane } from './control-plane.js';
import { conditionOf, createNamespace, CustomResources, freePort, startLeadingOperator, startNats, testOperatorOptions, until, type TestNats } from './harness.js';

const availability = controlPlaneAvailability();
const everythingBin = fileURLToPath(new URL('../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url));
const log = createLogger('gateway-e2e', 'silent');

describe('the operator with the real gateway', { skip: availability.available ? false : availability.reason }, () => {
  let plane: ControlPlane;
  let nats: TestNats;
  let bus: Bus;
  let database: ScratchDb;
  let governance: GovernanceService;
  let gateway: Gateway;
  let operator: RunningOperator;
  let everything: ChildProcess;
  let everythingPort: number;
  let workDir: string;
  let crs: CustomResources;
  let ns: string;

  before(async () => {
    plane = await startControlPlane();
    nats = await startNats();
    bus = await nats.connect('gateway');
    database = await openScratchDb(log);
    workDir = await mkdtemp(join(tmpdir(), 'punk-operator-e2e-'));
    await bus.ensureStream(streams.ledger); // the gateway's audit events (no ledger consumes them here)
    governance = await startGovernance({ bus, log });
    gateway = await startGateway({
      bus,
      log,
      db: database.db,
      servers: [],
      // Authentication off: the gateway may reach private addresses, here server-everything on loopback.
      egress: destinationPolicyOf({ authMode: 'off', upstreamAllowedNetworks: [] }),
      keyring: Keyring.fromConfig({ encryptionKey: randomBytes(32).toString('base64'), encryptionPreviousKeys: [] }),
      workDir,
      startTimeoutMs: 20_000,
      callTimeoutMs: 20_000,
    });
    everythingPort = await freePort();
    everything = spawn(process.execPath, [everythingBin, 'streamableHttp'], { env: { ...process.env, PORT: String(everythingPort) }, stdio: 'ignore' });
    await until('server-everything listening', () => new Promise<boolean>(resolve => {
      const socket = connect(everythingPort, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    }));
    ns = await createNamespace(plane.kubeConfig, 'e2e');
    operator = await startLeadingOperator(testOperatorOptions(plane.kubeConfig, await nats.connect('operator')));
    crs = new CustomResources(plane.kubeConfig);
  });
  after(async () => {
    await operator?.stop();
    await gateway?.stop();
    await governance?.stop();
    everything?.kill();
    await nats?.stop();
    await database?.close();
    await plane?.stop();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it('serves a url McpServer through the gateway and reports Ready with the tools it lists', async () => {
    await crs.create('mcpservers', ns, { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpServer', metadata: { name: 'everything' }, spec: { url: `http://127.0.0.1:${everythingPort}/mcp` } });
    const ready = await until('Ready=True', async () => {
      const o = await crs.get('mcpservers', ns, 'everything');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    }, 60_000);
    assert.equal(conditionOf(ready, 'Ready')?.reason, 'ToolsListed');
    assert.ok(ready.status.toolCount > 0);
    assert.equal(ready.status.toolCount, ready.status.tools.length);
    assert.ok((ready.status.tools as { name: string }[]).some(tool => tool.name === 'echo'), 'server-everything lists echo');
    assert.equal(ready.status.lastError, undefined);

    const served = (await bus.request(subjects.gatewayAdmin, { op: 'servers.get', tenant: ns, id: 'everything' }, { timeoutMs: 10_000 })) as Record<string, unknown>;
    assert.match(JSON.stringify(served), new RegExp(`127\\.0\\.0\\.1:${everythingPort}`), 'the gateway serves the url the operator published');

    await crs.delete('mcpservers', ns, 'everything');
    await until('no longer served', () =>
      bus.request(subjects.gatewayAdmin, { op: 'servers.get', tenant: ns, id: 'everything' }, { timeoutMs: 10_000 }).then(
        () => undefined,
        (error: unknown) => error instanceof PunkError || undefined,
      ),
    );
  });

  it('puts an McpCredential into the vault and removes it when the object is deleted', async () => {
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'github-token' }, stringData: { token: 'ghp-e2e' } } });
    await crs.create('mcpcredentials', ns, { apiVersion: 'mcp.punk.dev/v1alpha1', kind: 'McpCredential', metadata: { name: 'github' }, spec: { secretRef: { name: 'github-token', keys: ['token'] } } });
    const ready = await until('Ready=True', async () => {
      const o = await crs.get('mcpcredentials', ns, 'github');
      return conditionOf(o, 'Ready')?.status === 'True' ? o : undefined;
    });
    assert.deepEqual(ready.status.keys, ['token']);
    assert.equal(ready.status.refreshHealth, 'NotApplicable');
    const stored = (await bus.request(subjects.gatewayAdmin, { op: 'credentials.get', tenant: ns, id: 'github' }, { timeoutMs: 10_000 })) as { credential: { keys: string[] } };
    assert.deepEqual(stored.credential.keys, ['token']);
    assert.ok(!JSON.stringify(stored).includes('ghp-e2e'), 'the vault never answers a value');

    await crs.delete('mcpcredentials', ns, 'github');
    await until('gone from the vault', () =>
      bus.request(subjects.gatewayAdmin, { op: 'credentials.get', tenant: ns, id: 'github' }, { timeoutMs: 10_000 }).then(
        () => undefined,
        (error: unknown) => (error instanceof PunkError && error.code === 'CredentialNotFound') || undefined,
      ),
    );
    await until('the object gone', () => crs.get('mcpcredentials', ns, 'github').then(() => undefined, (e: { code?: number }) => e.code === 404));
  });
});
