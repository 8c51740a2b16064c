// McpServers whose children cannot be applied, on a real kube-apiserver with the operator running against it: an
// object of a child's name that the McpServer does not control is never taken over (a user's Service,
// another McpServer's egress proxy), and an API server refusal (422) is reported in its clean form.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '@punk/lib';
import { controlPlaneAvailability, type ControlPlane } from './control-plane.js';
import { conditionOf, CustomResources, startOperatorFixture, until, type OperatorFixture } from './harness.js';

const availability = controlPlaneAvailability();

/** One line the operator logged: its level, fields and message. */
interface LogLine {
  level: string;
  fields: Record<string, unknown>;
  message: string | undefined;
}

/** A logger that keeps what the operator logs (every level, children included), so a test can read it. */
function recordingLogger(lines: LogLine[]): Logger {
  const logger: Logger = new Proxy({} as Logger, {
    get: (_, level) => {
      if (level === 'child') return () => logger;
      if (level === 'isLevelEnabled') return () => true;
      if (level === 'level') return 'trace';
      return (fields: unknown, message?: string) =>
        lines.push(
          typeof fields === 'string'
            ? { level: String(level), fields: {}, message: fields }
            : { level: String(level), fields: (fields ?? {}) as Record<string, unknown>, message },
        );
    },
  });
  return logger;
}

/** A stdio McpServer from an image. */
function stdioServer(name: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name },
    spec: { image: 'ghcr.io/example/fs-server:1.0', command: ['fs-server'], ...extra },
  };
}

describe(
  'the operator with children it does not own and children the API server refuses',
  { skip: availability.available ? false : availability.reason },
  () => {
    let fixture: OperatorFixture;
    let plane: ControlPlane;
    let crs: CustomResources;
    let apps: AppsV1Api;
    let core: CoreV1Api;
    let ns: string;
    const lines: LogLine[] = [];

    before(async () => {
      fixture = await startOperatorFixture('conflicts', { operator: { log: recordingLogger(lines) } });
      ({ plane, crs, ns } = fixture);
      apps = plane.kubeConfig.makeApiClient(AppsV1Api);
      core = plane.kubeConfig.makeApiClient(CoreV1Api);
    });
    after(() => fixture?.stop());

    /** The McpServer once its Degraded condition has `reason`. */
    function degradedWith(name: string, reason: string) {
      return until(`${name} Degraded with ${reason}`, async () => {
        const live = await crs.get('mcpservers', ns, name);
        return conditionOf(live, 'Degraded')?.status === 'True' && conditionOf(live, 'Degraded')?.reason === reason ? live : undefined;
      });
    }

    it('leaves a Service of the same name untouched, applies nothing and is Degraded ChildConflict; a rename works', async () => {
      const userService = await core.createNamespacedService({
        namespace: ns,
        body: { metadata: { name: 'builder', labels: { team: 'a' } }, spec: { ports: [{ port: 9000 }], selector: { team: 'a' } } },
      });
      await crs.create('mcpservers', ns, stdioServer('builder'));
      const live = await degradedWith('builder', 'ChildConflict');
      assert.equal(
        conditionOf(live, 'Degraded')!.message,
        `Service ${ns}/builder exists and is not owned by this McpServer; rename the McpServer or delete the Service`,
      );
      assert.equal(conditionOf(live, 'Ready')?.status, 'False');
      const event = await until('a Warning Event', async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=builder' });
        return list.items.find((e) => e.reason === 'ChildConflict' && e.type === 'Warning');
      });
      assert.match(event.message ?? '', /^Degraded=True: Service .*\/builder exists and is not owned by this McpServer/);
      // One Event for the first status: it leads with Degraded and names the other conditions' transitions after it.
      for (const type of ['Ready', 'Available', 'Progressing'])
        assert.match(event.message ?? '', new RegExp(`; ${type}=(True|False|Unknown) [A-Z]\\w+`), `the Event names ${type}`);

      const untouched = await core.readNamespacedService({ name: 'builder', namespace: ns });
      assert.equal(untouched.metadata!.ownerReferences, undefined, 'no owner reference added');
      assert.deepEqual(untouched.spec?.selector, { team: 'a' }, 'selector unchanged');
      assert.equal(untouched.metadata!.resourceVersion, userService.metadata!.resourceVersion, 'not written at all');
      assert.ok(!untouched.metadata!.managedFields?.some((f) => f.manager === 'punk-operator'), 'punk-operator manages none of its fields');
      for (const read of [
        () => apps.readNamespacedDeployment({ name: 'builder', namespace: ns }),
        () => core.readNamespacedServiceAccount({ name: 'punk-mcp-server', namespace: ns }),
      ]) {
        await assert.rejects(read(), (e: { code?: number }) => e.code === 404, 'nothing else of the server is applied');
      }

      // The same server under another name runs, and the user's Service is still untouched.
      await crs.create('mcpservers', ns, stdioServer('builder-mcp'));
      const deployment = await until("the renamed server's Deployment", () =>
        apps.readNamespacedDeployment({ name: 'builder-mcp', namespace: ns }),
      );
      assert.equal(deployment.spec!.template.spec!.serviceAccountName, 'punk-mcp-server');
      assert.equal(
        (await core.readNamespacedService({ name: 'builder', namespace: ns })).metadata!.resourceVersion,
        userService.metadata!.resourceVersion,
      );
    });

    it("refuses an McpServer named like another's egress proxy, and leaves a user's own w-egress Deployment alone", async () => {
      // The API server refuses the name itself (the suffix is the egress proxy's), naming metadata.name.
      await assert.rejects(crs.create('mcpservers', ns, stdioServer('w-egress')), (e: { code?: number; body?: string }) => {
        assert.equal(e.code, 422);
        assert.match(String(e.body), /metadata\.name/);
        assert.match(String(e.body), /-egress/);
        return true;
      });
      // A Deployment w-egress of the user's own: McpServer w, which needs an egress proxy of that name, is Degraded.
      const own = await apps.createNamespacedDeployment({
        namespace: ns,
        body: {
          metadata: { name: 'w-egress', labels: { app: 'mine' } },
          spec: {
            selector: { matchLabels: { app: 'mine' } },
            template: { metadata: { labels: { app: 'mine' } }, spec: { containers: [{ name: 'mine', image: 'example.com/mine:1' }] } },
          },
        },
      });
      await crs.create('mcpservers', ns, stdioServer('w', { sandbox: { egress: [{ host: 'api.example.com', ports: [443] }] } }));
      const live = await degradedWith('w', 'ChildConflict');
      assert.match(
        conditionOf(live, 'Degraded')!.message,
        new RegExp(`^Deployment ${ns}/w-egress exists and is not owned by this McpServer; rename the McpServer or delete the Deployment`),
      );
      const kept = await apps.readNamespacedDeployment({ name: 'w-egress', namespace: ns });
      assert.equal(kept.metadata!.resourceVersion, own.metadata!.resourceVersion, "the user's Deployment is not rewritten");
      assert.equal(kept.metadata!.ownerReferences, undefined, 'and gets no owner');
      await assert.rejects(
        apps.readNamespacedDeployment({ name: 'w', namespace: ns }),
        (e: { code?: number }) => e.code === 404,
        'nothing of w is applied',
      );
    });

    it("reports a child the API server refuses (422) with its message, not the client's dump", async () => {
      await crs.create('mcpservers', ns, stdioServer('refused', { podTemplate: { spec: { dnsPolicy: 'Sometimes' } } }));
      const live = await degradedWith('refused', 'ApplyFailed');
      const message = conditionOf(live, 'Degraded')!.message;
      assert.match(message, /^applying the children failed: HTTP 422: Deployment\.apps "refused" is invalid: .*dnsPolicy/);
      assert.doesNotMatch(message, /HTTP-Code|Headers|Body:/);
      assert.equal(live.status.lastError, message);
      const event = await until('the Event', async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=refused' });
        return list.items.find((e) => e.reason === 'ApplyFailed');
      });
      assert.doesNotMatch(event.message ?? '', /HTTP-Code|Headers/);
      // Not retried hot: the reconcile ends with a slow requeue instead of failing into the queue's back-off.
      const slow = await until('the slow retry logged', () =>
        lines.find((l) => l.message === 'the children cannot be applied; retrying slowly' && l.fields.server === `${ns}/refused`),
      );
      assert.match(String(slow.fields.err), /^HTTP 422: /);
      assert.deepEqual(
        lines.filter((l) => l.message === 'reconcile failed; retrying' && l.fields.object === `McpServer/${ns}/refused`),
        [],
        "never handed to the queue's exponential retries",
      );

      // An edit that fixes the spec is applied at once (the slow retry does not delay it).
      await crs.patchSpec('mcpservers', ns, 'refused', { podTemplate: null });
      await until('the Deployment once valid', () => apps.readNamespacedDeployment({ name: 'refused', namespace: ns }));
      const fixed = await until(
        'Degraded=False',
        async () =>
          conditionOf(await crs.get('mcpservers', ns, 'refused'), 'Degraded')?.status === 'False' && crs.get('mcpservers', ns, 'refused'),
      );
      assert.equal(conditionOf(fixed, 'Degraded')?.reason, 'AsExpected');
      assert.equal(conditionOf(fixed, 'Degraded')?.message, 'the children are applied and no pod reports a problem');
    });
  },
);
