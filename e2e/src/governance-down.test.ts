/**
 * Governance down in the distributed topology (governance, gateway and mcp-front as their own OS processes over
 * NATS): a client's call through mcp-front is refused with an error naming governance, its subject and, for a
 * hung governance (SIGSTOP), the deadline; never a missing gateway or a silent server.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/client';
import { deadlines, subjects } from '@punk/lib';
import { connectClient } from './clients.js';
import { tallyWorld, type TallyWorld } from './distributed.js';
import { startService, type ServiceProcess } from './processes.js';

let world: TallyWorld;
let governance: ServiceProcess;
let front: ServiceProcess;
const running: ServiceProcess[] = [];

before(async () => {
  world = await tallyWorld();
  governance = await startService('governance', world.env);
  running.push(governance, await startService('gateway', world.env));
  front = await startService('mcp-front', world.env);
  running.push(front);
});

after(async () => {
  if (governance.process.pid !== undefined && governance.process.exitCode === null) governance.process.kill('SIGCONT');
  await Promise.all(running.map((s) => s.stop('SIGKILL')));
  await world.setup.killServers();
  await world.stop();
});

/** Calls tally's `count` through the front's per-server endpoint; the JSON-RPC error, or undefined on success. */
async function countError(): Promise<ProtocolError | undefined> {
  const client = await connectClient(`${front.url}/servers/${world.setup.tenant}/tally/mcp`, '2025-11-25');
  try {
    await client.callTool({ name: 'count', arguments: {} });
    return undefined;
  } catch (error) {
    assert.ok(error instanceof ProtocolError, `expected a ProtocolError, got ${String(error)}`);
    return error;
  } finally {
    await client.close();
  }
}

void test('a hung governance (SIGSTOP) makes a call fail at its deadline naming governance and the subject; a dead one names the subject at once', async () => {
  assert.equal(await countError(), undefined, 'with governance up the call succeeds');

  governance.process.kill('SIGSTOP');
  const started = Date.now();
  const hung = await countError();
  governance.process.kill('SIGCONT');
  assert.ok(hung);
  assert.equal(hung.code, -32001);
  assert.equal(
    hung.message,
    `tools/call count on server "tally" was not run: governance did not answer within ${String(deadlines.governanceCheckMs)} ms on subject ${subjects.governanceCheck}`,
  );
  assert.ok(Date.now() - started >= deadlines.governanceCheckMs);

  await governance.stop('SIGKILL');
  const dead = await countError();
  assert.ok(dead);
  assert.equal(dead.code, -32603);
  assert.equal(
    dead.message,
    `tools/call count on server "tally" was not run: governance did not answer on subject ${subjects.governanceCheck}: ` +
      'no governance replica is running (start the governance service)',
  );
  const lines = await world.setup.lines();
  assert.equal(lines.filter((l) => l.startsWith('count done')).length, 1, 'only the call made while governance was up ran');
});
