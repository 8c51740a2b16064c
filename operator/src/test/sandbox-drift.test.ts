// Drift the operator does not own, on a real kube-apiserver with the operator running against it: another field
// manager ("intruder") patches a server's Deployment in fields server-side apply leaves alone (hostNetwork, a hostPath
// volume, a privileged sidecar, an added capability); each is reported as Degraded SandboxDrift naming the field and
// the manager, with a Warning Event; undoing the change clears it. A field the operator sets
// (automountServiceAccountToken) is put back instead.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { controlPlaneAvailability } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

describe('the operator reporting sandbox drift it does not own', { skip: availability.available ? false : availability.reason }, () => {
  let fixture: OperatorFixture;
  let crs: CustomResources;
  let apps: AppsV1Api;
  let core: CoreV1Api;
  let ns: string;

  before(async () => {
    fixture = await startOperatorFixture('drift');
    ({ crs, ns } = fixture);
    apps = fixture.plane.kubeConfig.makeApiClient(AppsV1Api);
    core = fixture.plane.kubeConfig.makeApiClient(CoreV1Api);
  });
  after(() => fixture?.stop());

  /** Creates stdio server `name` and waits for its Deployment. */
  async function server(name: string) {
    await crs.create('mcpservers', ns, {
      apiVersion: 'mcp.punk.dev/v1alpha1',
      kind: 'McpServer',
      metadata: { name },
      spec: { image: 'ghcr.io/example/fs-server:1.0', command: ['fs-server'] },
    });
    await until(`${name}'s Deployment`, () => apps.readNamespacedDeployment({ name, namespace: ns }));
    await until(`${name} Degraded=False`, async () => conditionOf(await crs.get('mcpservers', ns, name), 'Degraded')?.status === 'False');
  }

  /** Patches Deployment `name`'s pod spec as field manager intruder (strategic merge). */
  const intrude = (name: string, podSpec: object) =>
    apps.patchNamespacedDeployment(
      { name, namespace: ns, fieldManager: 'intruder', body: { spec: { template: { spec: podSpec } } } },
      strategic,
    );

  /** Waits for Degraded SandboxDrift on `name` and its Event, both naming `field` and the manager. */
  async function driftReported(name: string, field: string) {
    const live = await until(`${name} Degraded SandboxDrift`, async () => {
      const o = await crs.get('mcpservers', ns, name);
      return conditionOf(o, 'Degraded')?.reason === 'SandboxDrift' ? o : undefined;
    });
    const message = conditionOf(live, 'Degraded')!.message;
    assert.equal(conditionOf(live, 'Degraded')!.status, 'True');
    assert.ok(message.startsWith(`Deployment ${ns}/${name} drifted from its sandbox: `), message);
    assert.ok(message.includes(field), `${message} names ${field}`);
    assert.match(message, /\(set by intruder\)/);
    const event = await until('the Warning Event', async () => {
      const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${name}` });
      return list.items.find((e) => e.reason === 'SandboxDrift' && e.type === 'Warning');
    });
    assert.ok(event.message?.includes(field), `the Event names ${field}: ${event.message}`);
    return message;
  }

  it('reports hostNetwork set by another field manager, and clears when it is undone', async () => {
    await server('net');
    await intrude('net', { hostNetwork: true });
    const message = await driftReported('net', 'spec.template.spec.hostNetwork is true');
    assert.equal((await crs.get('mcpservers', ns, 'net')).status.lastError, message);
    await intrude('net', { hostNetwork: false });
    await until(
      'Degraded=False again',
      async () => conditionOf(await crs.get('mcpservers', ns, 'net'), 'Degraded')?.reason === 'AsExpected',
    );
  });

  it('reports a hostPath volume', async () => {
    await server('hostpath');
    await intrude('hostpath', { volumes: [{ name: 'node-root', hostPath: { path: '/' } }] });
    await driftReported('hostpath', 'spec.template.spec.volumes[name=node-root].hostPath mounts / of the node');
  });

  it('reports an added privileged container', async () => {
    await server('sidecar');
    await intrude('sidecar', { containers: [{ name: 'sidecar', image: 'example.com/tool:1', securityContext: { privileged: true } }] });
    await driftReported('sidecar', 'spec.template.spec.containers[name=sidecar] was added');
  });

  it("reports a capability added to the server container's securityContext", async () => {
    await server('caps');
    await intrude('caps', { containers: [{ name: 'server', securityContext: { capabilities: { add: ['NET_ADMIN'] } } }] });
    await driftReported('caps', 'spec.template.spec.containers[name=server].securityContext.capabilities.add is ["NET_ADMIN"]');
  });

  it('puts back automountServiceAccountToken, a field the operator sets, rather than reporting it', async () => {
    await server('token');
    await apps.patchNamespacedDeployment(
      {
        name: 'token',
        namespace: ns,
        fieldManager: 'intruder',
        body: [{ op: 'replace', path: '/spec/template/spec/automountServiceAccountToken', value: true }],
      },
      jsonPatch,
    );
    await until(
      'automountServiceAccountToken false again',
      async () =>
        (await apps.readNamespacedDeployment({ name: 'token', namespace: ns })).spec?.template.spec?.automountServiceAccountToken === false,
    );
    assert.equal(conditionOf(await crs.get('mcpservers', ns, 'token'), 'Degraded')?.reason, 'AsExpected');
  });
});
