/**
 * A finished call leaves nothing behind: after many tools/call through one pooled stdio connection, the objects
 * of each call (here, the client link it carried) can be collected. A wait tied to the server process's exit
 * once kept every call's closures until the process ended, about 3 KiB per call in `punk up`.
 */
import { strict as assert } from 'node:assert';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createLogger } from '@punk/lib';
import type { ClientLink } from '../client-channel.js';
import { Upstream } from '../upstream.js';
import { fixture, manifest } from './harness.js';

// A full collection on demand, so that "can be collected" is a fact the test observes rather than a guess.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const CALLS = 200;
let workDir: string;
let upstream: Upstream;

before(async () => {
  workDir = await mkdtemp(join(tmpdir(), 'punk-call-retention-'));
  upstream = new Upstream({
    server: manifest('t', 'counter', { image: 'local/counter', command: [process.execPath, fixture('counter.mjs')] }),
    log: createLogger('call-retention-test', 'silent'),
    workDir,
    startTimeoutMs: 20_000,
    callTimeoutMs: 20_000,
    onState: () => undefined,
    onListChanged: () => undefined,
    onResourceUpdated: () => undefined,
  });
  upstream.start();
  await upstream.firstStart;
  assert.equal(upstream.state, 'ready', upstream.error);
});

after(async () => {
  await upstream.stop();
  await rm(workDir, { recursive: true, force: true });
});

/**
 * Makes `CALLS` calls, each with a link of its own, and returns weak references to the links. In a function of its
 * own: a suspended async function keeps its locals (the last link) alive, so the test's own frame must not hold one.
 */
async function callWithLinks(): Promise<WeakRef<ClientLink>[]> {
  const links: WeakRef<ClientLink>[] = [];
  for (let i = 0; i < CALLS; i++) {
    const link: ClientLink = { sessionId: `s-${i}`, supports: () => false, notify: () => undefined, request: async () => ({}) };
    links.push(new WeakRef(link));
    const outcome = await upstream.callTool('count', {}, { progressToken: i }, link);
    assert.equal(outcome.ok, true);
  }
  return links;
}

describe('a finished call', () => {
  it('is not retained by the pooled connection', async () => {
    const links = await callWithLinks();
    // Collections run between turns of the event loop: a few rounds let pending callbacks of the last call settle.
    let retained = CALLS;
    for (let round = 0; round < 20 && retained > 0; round++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      gc();
      retained = links.filter((ref) => ref.deref() !== undefined).length;
    }
    assert.equal(retained, 0, `${retained} of ${CALLS} finished calls are still reachable from the upstream`);
  });
});
