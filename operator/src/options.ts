/**
 * The operator's options from Punk's configuration (`PUNK_OPERATOR_*`, `PUNK_GATEWAY_*`, `PUNK_*_IMAGE`;
 * README "Configuration").
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Bus, Logger, PunkConfig } from '@punk/lib';
import type { ManagerOptions } from './manager.js';

/** What `startOperator` needs, from `config` and the connections `main.ts` opened. */
export function operatorOptionsFromConfig(config: PunkConfig, kubeConfig: KubeConfig, bus: Bus, log: Logger): ManagerOptions {
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
      gateway: { namespace: config.gatewayNamespace, podLabels: config.gatewayPodLabels },
      clusterDomain: config.clusterDomain,
      ...(config.publicUrl !== undefined && { publicUrl: config.publicUrl }),
    },
  };
}
