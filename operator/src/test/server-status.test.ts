// The conditions an operator writes for an McpServer, from what it observed: a url server, a Deployment rolling
// out, pods that crash or cannot pull, a problem of the reconcile, the gateway's listing; and the transition
// times that survive a reconcile that changes nothing.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1ContainerStatus, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { conditionSchema, type Condition } from '@punk/lib';
import { serverConditions, transitions, type ObservedServer } from '../server-status.js';

const now = new Date('2026-11-30T10:00:00Z');
const earlier = '2026-11-30T09:00:00.000Z';

function conditions(observed: Partial<ObservedServer>, previous: Condition[] = []): Record<string, Condition> {
  const list = serverConditions({ generation: 4, hasPod: true, pods: [], published: true, ...observed }, previous, now);
  assert.deepEqual(
    list.map((c) => c.type),
    ['Ready', 'Available', 'Progressing', 'Degraded'],
  );
  for (const condition of list) {
    assert.deepEqual(conditionSchema.parse(condition), condition, `${condition.type} is a valid metav1.Condition`);
    assert.equal(condition.observedGeneration, 4);
  }
  return Object.fromEntries(list.map((c) => [c.type, c]));
}

function brief(condition: Condition): string {
  return `${condition.status} ${condition.reason}`;
}

/** A Deployment of `replicas` as the Deployment controller reports it. */
function deployment(replicas: number, status: NonNullable<V1Deployment['status']>, generation = 2): V1Deployment {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'files', namespace: 'team-a', generation },
    spec: { replicas, selector: {}, template: {} },
    status: { observedGeneration: generation, ...status },
  };
}

const rolledOut = (replicas: number) =>
  deployment(replicas, {
    replicas,
    updatedReplicas: replicas,
    readyReplicas: replicas,
    availableReplicas: replicas,
    conditions: [
      { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable', message: 'Deployment has minimum availability.' },
      {
        type: 'Progressing',
        status: 'True',
        reason: 'NewReplicaSetAvailable',
        message: 'ReplicaSet "files-6d4" has successfully progressed.',
      },
    ],
  });

function pod(name: string, statuses: V1ContainerStatus[], init: V1ContainerStatus[] = []): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    status: { phase: 'Pending', containerStatuses: statuses, initContainerStatuses: init },
  };
}

function waiting(name: string, reason: string, message?: string, extra: Partial<V1ContainerStatus> = {}): V1ContainerStatus {
  return {
    name,
    image: `ghcr.io/acme/${name}:1`,
    imageID: '',
    ready: false,
    restartCount: 0,
    state: { waiting: { reason, ...(message && { message }) } },
    ...extra,
  };
}

describe('a url server', () => {
  it('is available with nothing to roll out, and ready once the gateway lists its tools', () => {
    const pending = conditions({ hasPod: false });
    assert.equal(brief(pending.Available!), 'True RemoteServer');
    assert.equal(brief(pending.Progressing!), 'False RemoteServer');
    assert.equal(brief(pending.Degraded!), 'False AsExpected');
    assert.equal(brief(pending.Ready!), 'Unknown ListingPending');
    const listed = conditions({ hasPod: false, listing: { ok: true, toolCount: 7 } });
    assert.equal(brief(listed.Ready!), 'True ToolsListed');
    assert.match(listed.Ready!.message, /listed 7 tools/);
  });

  it('is not ready when the gateway cannot reach it or cannot list its tools', () => {
    const unreachable = conditions({
      hasPod: false,
      listing: { ok: false, reachable: false, error: 'connect ECONNREFUSED 203.0.113.9:443' },
    });
    assert.equal(brief(unreachable.Ready!), 'False ServerUnreachable');
    assert.match(unreachable.Ready!.message, /ECONNREFUSED/);
    const failed = conditions({ hasPod: false, listing: { ok: false, error: 'HTTP 500 from tools/list' } });
    assert.equal(brief(failed.Ready!), 'False ListingFailed');
    assert.match(failed.Ready!.message, /HTTP 500/);
  });
});

describe('a url server with an invalid spec', () => {
  const problem = { reason: 'InvalidSpec', message: 'spec.url: Invalid URL' };

  it('never published: Degraded and not Available, so not Ready', () => {
    const c = conditions({ hasPod: false, problem, published: false });
    assert.equal(brief(c.Degraded!), 'True InvalidSpec');
    assert.equal(brief(c.Available!), 'False InvalidSpec');
    assert.equal(c.Available!.message, 'the server is not published to the gateways: spec.url: Invalid URL');
    assert.equal(brief(c.Ready!), 'False InvalidSpec');
  });

  it('whose last good generation is still published: Available (the gateways serve it) and Degraded', () => {
    const c = conditions({ hasPod: false, problem, published: true });
    assert.equal(brief(c.Available!), 'True RemoteServer');
    assert.match(c.Available!.message, /last generation that could run; generation 4 cannot/);
    assert.equal(brief(c.Degraded!), 'True InvalidSpec');
  });
});

describe('a pod server', () => {
  it('without its Deployment yet is progressing and not available', () => {
    const c = conditions({});
    assert.equal(brief(c.Available!), 'False DeploymentMissing');
    assert.equal(brief(c.Progressing!), 'True DeploymentPending');
    assert.equal(brief(c.Degraded!), 'False AsExpected');
    assert.equal(brief(c.Ready!), 'False DeploymentMissing');
  });

  it('with a spec error is degraded with the error, and not progressing', () => {
    const c = conditions({ problem: { reason: 'InvalidSpec', message: 'spec.command: a stdio server from an image needs spec.command' } });
    assert.equal(brief(c.Degraded!), 'True InvalidSpec');
    assert.match(c.Degraded!.message, /^spec\.command: /);
    assert.equal(brief(c.Progressing!), 'False InvalidSpec');
  });

  it('while the Deployment controller has not seen the new generation is progressing', () => {
    const d = rolledOut(1);
    d.metadata!.generation = 3;
    const c = conditions({ deployment: d, listing: { ok: true, toolCount: 2 } });
    assert.equal(brief(c.Progressing!), 'True RolloutPending');
    assert.equal(brief(c.Available!), 'True ReplicasAvailable');
    assert.equal(brief(c.Ready!), 'True ToolsListed', 'the old pods still serve');
  });

  it('while replicas are updated, old ones terminate or new ones become available is rolling out', () => {
    const base = { conditions: [] };
    assert.match(
      conditions({ deployment: deployment(3, { ...base, replicas: 4, updatedReplicas: 1, availableReplicas: 3 }) }).Progressing!.message,
      /1 of 3 replicas updated/,
    );
    assert.match(
      conditions({ deployment: deployment(3, { ...base, replicas: 4, updatedReplicas: 3, availableReplicas: 3 }) }).Progressing!.message,
      /1 old replicas pending termination/,
    );
    const waitingForAvailable = conditions({
      deployment: deployment(3, { ...base, replicas: 3, updatedReplicas: 3, availableReplicas: 0 }),
    });
    assert.equal(brief(waitingForAvailable.Progressing!), 'True RollingOut');
    assert.match(waitingForAvailable.Progressing!.message, /0 of 3 updated replicas available/);
    assert.equal(brief(waitingForAvailable.Available!), 'False ReplicasUnavailable');
  });

  it('once rolled out and listed is ready, available, not progressing, not degraded', () => {
    const c = conditions({ deployment: rolledOut(2), listing: { ok: true, toolCount: 12 } });
    assert.equal(brief(c.Ready!), 'True ToolsListed');
    assert.equal(brief(c.Available!), 'True ReplicasAvailable');
    assert.match(c.Available!.message, /2 of 2 replicas available/);
    assert.equal(brief(c.Progressing!), 'False RolloutComplete');
    assert.equal(brief(c.Degraded!), 'False AsExpected');
  });

  it('available but unreachable through its bridge is not ready', () => {
    const c = conditions({
      deployment: rolledOut(1),
      listing: { ok: false, reachable: false, error: 'connect ECONNREFUSED 10.0.0.12:8080' },
    });
    assert.equal(brief(c.Ready!), 'False BridgeUnreachable');
    const failed = conditions({ deployment: rolledOut(1), listing: { ok: false, reachable: true, error: 'tools/list: Method not found' } });
    assert.equal(brief(failed.Ready!), 'False ListingFailed');
  });

  it('scaled to zero is not available', () => {
    const c = conditions({
      deployment: deployment(0, { replicas: 0, conditions: [{ type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable' }] }),
    });
    assert.equal(brief(c.Available!), 'False ScaledToZero');
    assert.equal(brief(c.Ready!), 'False ScaledToZero');
  });

  it('past its progress deadline is degraded and no longer progressing', () => {
    const d = deployment(1, {
      replicas: 1,
      updatedReplicas: 1,
      conditions: [
        {
          type: 'Progressing',
          status: 'False',
          reason: 'ProgressDeadlineExceeded',
          message: 'ReplicaSet "files-6d4" has timed out progressing.',
        },
      ],
    });
    const c = conditions({ deployment: d });
    assert.equal(brief(c.Progressing!), 'False ProgressDeadlineExceeded');
    assert.equal(brief(c.Degraded!), 'True ProgressDeadlineExceeded');
    assert.match(c.Degraded!.message, /timed out progressing/);
  });

  it("whose pods cannot be created is degraded with the Deployment's ReplicaFailure", () => {
    const d = deployment(1, {
      replicas: 0,
      conditions: [
        {
          type: 'ReplicaFailure',
          status: 'True',
          reason: 'FailedCreate',
          message: 'pods "files-6d4-x" is forbidden: exceeded quota: compute',
        },
      ],
    });
    const c = conditions({ deployment: d });
    assert.equal(brief(c.Degraded!), 'True ReplicaFailure');
    assert.match(c.Degraded!.message, /exceeded quota/);
  });
});

describe('pods in trouble', () => {
  const rolling = deployment(2, { replicas: 2, updatedReplicas: 2, availableReplicas: 0, conditions: [] });

  it('crash-looping: CrashLoopBackOff with the last exit', () => {
    const crashing = waiting('server', 'CrashLoopBackOff', 'back-off 40s restarting failed container=server', {
      restartCount: 4,
      lastState: { terminated: { exitCode: 137, reason: 'OOMKilled' } },
    });
    const c = conditions({ deployment: rolling, pods: [pod('files-1', [crashing])] });
    assert.equal(brief(c.Degraded!), 'True CrashLoopBackOff');
    assert.match(c.Degraded!.message, /pod files-1 container server: .*code 137 \(OOMKilled\), 4 restarts/);
    assert.equal(brief(c.Ready!), 'False ReplicasUnavailable');
  });

  it("unable to pull an image, even the bridge's in the init container: ImageMissing, counted over the pods", () => {
    const pods = [
      pod(
        'files-1',
        [waiting('server', 'PodInitializing')],
        [waiting('install-bridge', 'ImagePullBackOff', 'Back-off pulling image "ghcr.io/punk/bridge:0.1.0"')],
      ),
      pod('files-2', [waiting('server', 'ErrImagePull', 'manifest unknown')]),
      pod('files-3', [waiting('server', 'CrashLoopBackOff')]),
    ];
    const c = conditions({ deployment: rolling, pods });
    assert.equal(brief(c.Degraded!), 'True ImageMissing');
    assert.match(
      c.Degraded!.message,
      /pod files-1 container install-bridge: image ghcr.io\/acme\/install-bridge:1 cannot be pulled \(ImagePullBackOff\).*\(and 1 more\)/,
    );
  });

  it('waiting for a Secret that does not exist: SecretMissing', () => {
    const c = conditions({
      deployment: rolling,
      pods: [pod('files-1', [waiting('server', 'CreateContainerConfigError', 'secret "api-keys" not found')])],
    });
    assert.equal(brief(c.Degraded!), 'True SecretMissing');
    assert.match(c.Degraded!.message, /secret "api-keys" not found/);
    const key = conditions({
      deployment: rolling,
      pods: [pod('files-1', [waiting('server', 'CreateContainerConfigError', "couldn't find key acme in Secret team-a/api-keys")])],
    });
    assert.equal(brief(key.Degraded!), 'True ContainerConfigError');
  });

  it('that no node fits: Unschedulable', () => {
    const unschedulable: V1Pod = {
      metadata: { name: 'files-1' },
      status: {
        phase: 'Pending',
        conditions: [
          { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/3 nodes are available: 3 Insufficient memory.' },
        ],
      },
    };
    const c = conditions({ deployment: rolling, pods: [unschedulable] });
    assert.equal(brief(c.Degraded!), 'True Unschedulable');
    assert.match(c.Degraded!.message, /Insufficient memory/);
  });

  it('while a reconcile problem is known, the problem is the reason', () => {
    const c = conditions({
      deployment: rolling,
      pods: [pod('files-1', [waiting('server', 'CrashLoopBackOff')])],
      problem: { reason: 'CredentialMissing', message: 'spec.env[0].valueFrom.credentialRef.name: no McpCredential github' },
    });
    assert.equal(brief(c.Degraded!), 'True CredentialMissing');
  });

  it('a reason that is not CamelCase is made one, so the status stays writable', () => {
    const c = conditions({ problem: { reason: 'Secret Missing!', message: 'x' } });
    assert.equal(c.Degraded!.reason, 'SecretMissing');
  });
});

describe('transition times and transitions', () => {
  it('keeps lastTransitionTime while a status holds, and moves it when the status changes', () => {
    const first = serverConditions(
      { generation: 4, hasPod: true, published: true, pods: [], deployment: rolledOut(1) },
      [],
      new Date(earlier),
    );
    for (const condition of first) assert.equal(condition.lastTransitionTime, earlier);
    const same = serverConditions({ generation: 5, hasPod: true, published: true, pods: [], deployment: rolledOut(1) }, first, now);
    for (const condition of same) assert.equal(condition.lastTransitionTime, earlier, `${condition.type} unchanged`);
    assert.deepEqual(transitions(first, same), []);

    const listed = serverConditions(
      { generation: 5, hasPod: true, published: true, pods: [], deployment: rolledOut(1), listing: { ok: true, toolCount: 1 } },
      same,
      now,
    );
    const byType = Object.fromEntries(listed.map((c) => [c.type, c]));
    assert.equal(byType.Ready!.lastTransitionTime, now.toISOString());
    assert.equal(byType.Available!.lastTransitionTime, earlier);
    const changed = transitions(same, listed);
    assert.deepEqual(
      changed.map((t) => `${t.type}: ${t.from?.status} -> ${t.to.status}`),
      ['Ready: Unknown -> True'],
    );
  });

  it('reports a new reason under the same status as a transition, without moving the time', () => {
    const crash = {
      generation: 4,
      hasPod: true,
      published: true,
      deployment: rolledOut(1),
      pods: [pod('p', [waiting('server', 'CrashLoopBackOff')])],
    };
    const before = serverConditions(crash, [], new Date(earlier));
    const after = serverConditions({ ...crash, pods: [pod('p', [waiting('server', 'ImagePullBackOff')])] }, before, now);
    const degraded = after.find((c) => c.type === 'Degraded')!;
    assert.equal(degraded.lastTransitionTime, earlier);
    assert.deepEqual(
      transitions(before, after).map((t) => `${t.type} ${t.from?.reason} -> ${t.to.reason}`),
      ['Degraded CrashLoopBackOff -> ImageMissing'],
    );
  });

  it('lists every condition as new when there were none', () => {
    const next = serverConditions({ generation: 1, hasPod: false, published: true, pods: [] }, [], now);
    assert.deepEqual(
      transitions([], next).map((t) => [t.type, t.from]),
      [
        ['Ready', undefined],
        ['Available', undefined],
        ['Progressing', undefined],
        ['Degraded', undefined],
      ],
    );
  });
});

/** Every observation the reconciler can hand serverConditions, as the product of each part's cases. */
function everyObservation(): { label: string; observed: ObservedServer }[] {
  const unavailable = deployment(1, { replicas: 1, updatedReplicas: 1, availableReplicas: 0, conditions: [] });
  const pending = rolledOut(1);
  pending.metadata!.generation = 3;
  const deadline = deployment(1, {
    replicas: 1,
    updatedReplicas: 1,
    conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'timed out progressing' }],
  });
  const failure = deployment(1, {
    replicas: 0,
    conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'exceeded quota' }],
  });
  const deployments: [string, V1Deployment | undefined][] = [
    ['no Deployment', undefined],
    ['rolled out', rolledOut(2)],
    ['unavailable', unavailable],
    ['scaled to zero', deployment(0, { replicas: 0, conditions: [] })],
    ['rollout pending', pending],
    ['past its deadline', deadline],
    ['replica failure', failure],
  ];
  const podSets: [string, V1Pod[]][] = [
    ['no pods', []],
    ['a crash-looping pod', [pod('files-1', [waiting('server', 'CrashLoopBackOff', 'back-off')])]],
    ['a pod without its image', [pod('files-2', [waiting('server', 'ImagePullBackOff')])]],
  ];
  const problems: [string, ObservedServer['problem']][] = [
    ['no problem', undefined],
    ['InvalidSpec', { reason: 'InvalidSpec', message: 'spec.url: Invalid URL' }],
    ['SecretMissing', { reason: 'SecretMissing', message: 'spec.env[0].valueFrom.secretKeyRef.name: Secret s not found' }],
    ['SandboxDrift', { reason: 'SandboxDrift', message: 'Deployment team-a/files: spec.template.spec.hostNetwork is true' }],
  ];
  const listings: [string, ObservedServer['listing']][] = [
    ['not listed', undefined],
    ['listed', { ok: true, toolCount: 3 }],
    ['listing failed', { ok: false, reachable: true, error: 'Method not found' }],
    ['unreachable', { ok: false, reachable: false, error: 'ECONNREFUSED' }],
  ];
  const out: { label: string; observed: ObservedServer }[] = [];
  for (const hasPod of [true, false])
    for (const [dLabel, d] of hasPod ? deployments : deployments.slice(0, 1))
      for (const [pLabel, pods] of hasPod ? podSets : podSets.slice(0, 1))
        for (const [problemLabel, problem] of problems)
          for (const [lLabel, listing] of listings)
            for (const [published, scaledToZero] of [
              [true, false],
              [false, false],
              [true, true],
            ] as const) {
              const observed: ObservedServer = {
                generation: 4,
                hasPod,
                pods,
                published,
                scaledToZero,
                ...(d && { deployment: d }),
                ...(problem && { problem }),
                ...(listing && { listing }),
              };
              const label = [
                hasPod ? 'pod server' : 'url server',
                dLabel,
                pLabel,
                problemLabel,
                lLabel,
                published ? 'published' : 'unpublished',
                scaledToZero ? 'scaled to zero' : 'scaled up',
              ];
              out.push({ label: label.join(', '), observed });
            }
  return out;
}

describe('conditions never contradict each other', () => {
  const observations = everyObservation();
  const failures = new Set(['ProgressDeadlineExceeded']);

  it(`holds over all ${observations.length} observations the reconciler can produce`, () => {
    for (const { label, observed } of observations) {
      const c = Object.fromEntries(serverConditions(observed, [], now).map((x) => [x.type, x])) as Record<string, Condition>;
      const { Ready, Available, Progressing, Degraded } = c as Record<'Ready' | 'Available' | 'Progressing' | 'Degraded', Condition>;
      const at = (rule: string) =>
        `${label}: ${rule} (${Object.values(c)
          .map((x) => `${x.type}=${brief(x)}`)
          .join(', ')})`;
      for (const x of Object.values(c)) assert.notEqual(x.message, '', at(`${x.type} has a message`));
      if (Ready.status === 'True') {
        assert.equal(Available.status, 'True', at('Ready=True only when Available'));
        assert.equal(observed.listing?.ok, true, at('Ready=True only when the gateway listed the tools'));
      }
      if (Available.status !== 'True') {
        assert.equal(Ready.status, 'False', at('not Available: not Ready'));
        assert.equal(Ready.reason, Available.reason, at('not Ready for the reason it is not Available'));
      }
      if (Available.status === 'True') {
        assert.ok(observed.published, at('Available=True only when published to the gateways'));
        if (observed.hasPod) assert.ok((observed.deployment?.status?.availableReplicas ?? 0) > 0, at('Available=True only with a replica'));
      }
      if (observed.scaledToZero) assert.equal(brief(Available), 'False ScaledToZero', at('scaled to zero: not Available, saying so'));
      assert.equal(Degraded.status === 'False', Degraded.reason === 'AsExpected', at('Degraded=False exactly when AsExpected'));
      if (observed.problem) assert.equal(brief(Degraded), `True ${observed.problem.reason}`, at('a problem is Degraded with its reason'));
      if (Degraded.status === 'False') assert.ok(!observed.problem, at('no problem when not Degraded'));
      if (!observed.hasPod) assert.equal(Progressing.status, 'False', at('a url server never progresses'));
      if (Progressing.status === 'False' && (failures.has(Progressing.reason) || Progressing.reason === observed.problem?.reason))
        assert.equal(Degraded.status, 'True', at('a failed rollout is Degraded'));
      if (Progressing.status === 'True')
        assert.ok(['DeploymentPending', 'RolloutPending', 'RollingOut'].includes(Progressing.reason), at('Progressing=True for a rollout'));
      if (Degraded.status === 'False' && observed.hasPod && !observed.deployment)
        assert.doesNotMatch(Degraded.message, /applied/, at('"the children are applied" only with a Deployment'));
      if (Degraded.status === 'False' && !observed.published)
        assert.doesNotMatch(Degraded.message, /published to/, at('"published" only when published'));
    }
  });
});
