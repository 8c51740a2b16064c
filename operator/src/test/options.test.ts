// The operator's settings as an administrator writes them in the environment: read into startOperator's options,
// and a bad value refused with its variable named.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger, loadConfig, MemoryBus } from '@punk/lib';
import { operatorOptionsFromConfig } from '../index.js';

describe('operator options from PUNK_* variables', () => {
  it('reads namespaces, gateway pods, images, lease, resync and workers', () => {
    const config = loadConfig({
      PUNK_OPERATOR_NAMESPACES: 'team-a, team-b',
      PUNK_GATEWAY_NAMESPACE: 'punk',
      PUNK_GATEWAY_POD_LABELS: 'app.kubernetes.io/name=gateway,tier=edge',
      PUNK_BRIDGE_IMAGE: 'registry.local/bridge:1',
      PUNK_RUNNER_NPM_IMAGE: 'registry.local/npm:1',
      PUNK_RUNNER_PYPI_IMAGE: 'registry.local/pypi:1',
      PUNK_CLUSTER_DOMAIN: 'corp.internal',
      PUNK_OPERATOR_LEASE_NAMESPACE: 'punk',
      PUNK_OPERATOR_LEASE_NAME: 'operator-lock',
      PUNK_OPERATOR_RESYNC_MS: '60000',
      PUNK_OPERATOR_WORKERS: '8',
      PUNK_OPERATOR_RECONCILE_TIMEOUT_MS: '30000',
      PUNK_INSTANCE_ID: 'operator-0',
      PUNK_RUNNER_NPM_REGISTRIES: 'npm.mirror.local:8443',
    });
    const options = operatorOptionsFromConfig(config, new KubeConfig(), new MemoryBus(), createLogger('test', 'silent'));
    assert.deepEqual(options.namespaces, ['team-a', 'team-b']);
    assert.deepEqual(options.server, {
      bridgeImage: 'registry.local/bridge:1',
      runnerImages: { npm: 'registry.local/npm:1', pypi: 'registry.local/pypi:1' },
      packageRegistries: { npm: ['npm.mirror.local:8443'], pypi: ['pypi.org:443', 'files.pythonhosted.org:443'] },
      gateway: { namespace: 'punk', podLabels: { 'app.kubernetes.io/name': 'gateway', tier: 'edge' } },
      clusterDomain: 'corp.internal',
    });
    assert.deepEqual(options.lease, { namespace: 'punk', name: 'operator-lock' });
    assert.equal(options.identity, 'operator-0');
    assert.equal(options.resyncMs, 60000);
    assert.equal(options.workers, 8);
    assert.equal(options.reconcileTimeoutMs, 30000);
  });

  it('watches every namespace by default', () => {
    const options = operatorOptionsFromConfig(loadConfig({}), new KubeConfig(), new MemoryBus(), createLogger('test', 'silent'));
    assert.deepEqual(options.namespaces, []);
    assert.deepEqual(options.server.gateway, { namespace: 'punk-system', podLabels: { 'app.kubernetes.io/name': 'punk-gateway' } });
  });

  it('refuses a bad value, naming the variable', () => {
    assert.throws(() => loadConfig({ PUNK_GATEWAY_POD_LABELS: 'app' }), /PUNK_GATEWAY_POD_LABELS="app": entry "app" must be key=value/);
    assert.throws(
      () => loadConfig({ PUNK_OPERATOR_NAMESPACES: 'ok,Not_A_Namespace' }),
      /PUNK_OPERATOR_NAMESPACES entry 2="Not_A_Namespace"/,
    );
    assert.throws(() => loadConfig({ PUNK_OPERATOR_WORKERS: '0' }), /PUNK_OPERATOR_WORKERS="0": must be an integer from 1 to 64/);
  });

  it('refuses a package registry that is not host[:port], naming its variable', () => {
    const config = loadConfig({ PUNK_RUNNER_PYPI_REGISTRIES: 'pypi.org:443,https://files.example.com/simple' });
    assert.throws(
      () => operatorOptionsFromConfig(config, new KubeConfig(), new MemoryBus(), createLogger('test', 'silent')),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, 'InvalidConfig');
        assert.match(error.message, /^PUNK_RUNNER_PYPI_REGISTRIES: packageRegistries\.pypi\[1\]/);
        return true;
      },
    );
  });
});
