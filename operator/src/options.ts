/**
 * The operator's options from Punk's configuration (`PUNK_OPERATOR_*`, `PUNK_GATEWAY_*`, `PUNK_*_IMAGE`;
 * docs/configuration.md).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { errorMessage, PunkError, type Bus, type Logger, type PunkConfig } from '@punk/lib/controller';
import { packageRegistryEntries } from './server-children.js';
import type { ManagerOptions } from './manager.js';

/**
 * What `startOperator` needs, from `config` and the connections `main.ts` opened.
 * @throws PunkError `InvalidConfig` naming `PUNK_RUNNER_NPM_REGISTRIES` or `PUNK_RUNNER_PYPI_REGISTRIES` when an item
 *   is not a DNS name with an optional `:port`.
 */
export function operatorOptionsFromConfig(config: PunkConfig, kubeConfig: KubeConfig, bus: Bus, log: Logger): ManagerOptions {
  const packageRegistries = { npm: config.runnerNpmRegistries, pypi: config.runnerPypiRegistries };
  for (const [registry, variable] of [
    ['npm', 'PUNK_RUNNER_NPM_REGISTRIES'],
    ['pypi', 'PUNK_RUNNER_PYPI_REGISTRIES'],
  ] as const) {
    try {
      packageRegistryEntries(packageRegistries, registry);
    } catch (error) {
      throw new PunkError('InvalidConfig', `${variable}: ${errorMessage(error)}`, { variable });
    }
  }
  return {
    kubeConfig,
    bus,
    log,
    namespaces: config.operatorNamespaces,
    identity: config.instanceId,
    lease: { namespace: config.operatorLeaseNamespace, name: config.operatorLeaseName },
    resyncMs: config.operatorResyncMs,
    workers: config.operatorWorkers,
    reconcileTimeoutMs: config.operatorReconcileTimeoutMs,
    server: {
      bridgeImage: config.bridgeImage,
      runnerImages: { npm: config.runnerNpmImage, pypi: config.runnerPypiImage },
      packageRegistries,
      gateway: { namespace: config.gatewayNamespace, podLabels: config.gatewayPodLabels },
      clusterDomain: config.clusterDomain,
      ...(config.publicUrl !== undefined && { publicUrl: config.publicUrl }),
    },
  };
}
