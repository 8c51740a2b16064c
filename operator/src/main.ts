#!/usr/bin/env node
// The operator process: `node operator/dist/main.js`, in a cluster (in-cluster service account) or against
// KUBECONFIG; NATS at PUNK_NATS_URL; options in docs/configuration.md (PUNK_OPERATOR_*).
import { KubeConfig } from '@kubernetes/client-node';
import { runServiceMain } from '@punk/lib/controller';
import { startOperator } from './index.js';
import { operatorOptionsFromConfig } from './options.js';

runServiceMain({
  name: 'operator',
  needsDatabase: false,
  async start({ config, bus, log }) {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    const operator = await startOperator(operatorOptionsFromConfig(config, kubeConfig, bus, log));
    return { stop: () => operator.stop() };
  },
});
