/**
 * The gateway as a process of its own (`node services/gateway/dist/main.js`,
 * `punk gateway`): McpServer manifests from `PUNK_MANIFESTS`, server working
 * directories in a temporary directory removed at stop.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { formatManifestError, loadManifestDirectory, streams, type ServiceDefinition } from '@punk/lib';
import { Keyring } from './credentials/index.js';
import { destinationPolicyOf } from './egress/index.js';
import { startGateway } from './service.js';

/**
 * Service definition of the gateway for `runService`. Needs Postgres (`PUNK_DATABASE_URL`: the registry,
 * schema `gateway`, migrated at start). Ensures the ledger stream (events wait there while no ledger runs),
 * starts every server of the manifests (stdio servers as children of this process, `url` servers by
 * connection) and every registered server, and is ready once each has connected or failed its first start.
 * A bad manifest is logged with its file and field; the valid ones are served. stdio registrations are
 * refused here (they would run on the gateway's host): only `punk up` accepts them.
 */
export const gatewayService: ServiceDefinition = {
  name: 'gateway',
  needsDatabase: true,
  streams: [streams.ledger],
  async start({ config, bus, db, log }) {
    const manifestDir = resolve(config.manifests);
    const loaded = await loadManifestDirectory(manifestDir, config.tenant);
    for (const error of loaded.errors) log.error({ manifestError: error }, `manifest error: ${formatManifestError(error)}`);
    const workDir = await mkdtemp(join(tmpdir(), `punk-gateway-${config.instanceId}-`));
    const gateway = await startGateway({
      bus,
      log,
      db: db!,
      servers: loaded.servers.map((entry) => entry.server),
      workDir,
      startTimeoutMs: config.serverStartTimeoutMs,
      callTimeoutMs: config.callTimeoutMs,
      maxResultBytes: config.maxResultBytes,
      env: { PUNK_MANIFEST_DIR: manifestDir },
      instanceId: config.instanceId,
      upstream: {
        idleTimeoutMs: config.upstreamIdleTimeoutMs,
        maxConcurrentCalls: config.upstreamMaxConcurrentCalls,
        maxQueuedCalls: config.upstreamMaxQueuedCalls,
        queueTimeoutMs: config.upstreamQueueTimeoutMs,
        maxCallsPerPrincipal: config.upstreamMaxCallsPerPrincipal,
      },
      egress: destinationPolicyOf(config),
      keyring: Keyring.fromConfig(config),
      toolPinning: config.toolPinning,
      workflowLimits: {
        maxNodes: config.workflowMaxNodes,
        maxRunMs: config.workflowMaxRunMs,
        maxResultBytes: config.workflowMaxResultBytes,
      },
    });
    if (!config.encryptionKey)
      log.warn('PUNK_ENCRYPTION_KEY is not set: the credentials API answers 503 and cred: references do not resolve');
    await gateway.ready();
    return {
      stop: async () => {
        await gateway.stop();
        await rm(workDir, { recursive: true, force: true });
      },
    };
  },
};
