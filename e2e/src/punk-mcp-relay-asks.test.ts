/**
 * `punk mcp --relay` passes on what the deployment asks of its client, against `punk up` serving a server that asks
 * (e2e/fixtures/asking.mjs, `sessionMode: per-client`): the SDK's `Client` drives `punk mcp --relay` over stdio in
 * both eras and answers an elicitation form and a sampling request (in 2026-07-28 they come as `input_required`
 * results and its retry answers them), a 2025 client its roots (and says they changed), sets its log level and gets
 * the messages at that level, and hears the updates of a resource it subscribed to (`resources/subscribe`, or a
 * 2026-07-28 `subscriptions/listen`) until it unsubscribes. A client that declared none of these is not asked. When
 * the deployment restarts, the relay's new session to it is subscribed again and has the client's log level.
 */
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Client } from '@modelcontextprotocol/client';
import { textOf } from './clients.js';
import { eventually, freePort, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from './harness.js';
import { punkMcp } from './punk-mcp-client.js';

const FIXTURE = join(repoRoot, 'e2e/fixtures/asking.mjs');
const NOTE = 'asking://note';

/** A manifest directory serving the fixture as `asking`, and the file of its events. */
async function askingManifests(prefix: string): Promise<{ dir: string; eventLog: string }> {
  const dir = await manifestDir(prefix, {});
  const eventLog = join(dir, 'events.log');
  await writeFile(
    join(dir, 'asking.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: asking }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE)}]
  env: [{ name: EVENT_LOG, value: ${JSON.stringify(eventLog)} }]
  sessionMode: per-client
`,
  );
  return { dir, eventLog };
}

/** The lines of the fixture's event log. */
const eventsOf = async (eventLog: string) => (await readFile(eventLog, 'utf8').catch(() => '')).split('\n');

/** Counts the `notifications/resources/updated` of {@link NOTE} that reach `client`. */
function countUpdates(client: Client): { count: number } {
  const seen = { count: 0 };
  client.setNotificationHandler('notifications/resources/updated', (notification) => {
    if (notification.params.uri === NOTE) seen.count++;
  });
  return seen;
}

describe('punk mcp --relay passes on what the deployment asks of the client', () => {
  let dir: string;
  let eventLog: string;
  let punk: RunningPunk;

  before(async () => {
    ({ dir, eventLog } = await askingManifests('punk-mcp-relay-asks'));
    punk = await startPunk({ manifestDir: dir });
  });

  after(async () => {
    await punk?.stop();
    await removeDir(dir);
  });

  const events = () => eventsOf(eventLog);
  /** Whether no more updates reach the client once the last in flight arrived. */
  const updatesStop = async (seen: { count: number }) => {
    await new Promise((done) => setTimeout(done, 1_000));
    const count = seen.count;
    await new Promise((done) => setTimeout(done, 1_500));
    return seen.count === count;
  };

  for (const era of ['2025', '2026-07-28'] as const) {
    test(
      `a ${era} client answers the deployment's elicitation and sampling through the relay, and one that declared neither is not asked`,
      { timeout: 180_000 },
      async () => {
        const capabilities = { elicitation: { form: {} }, sampling: {} };
        const { client, stderr } = await punkMcp(punk.baseUrl, '', { era, args: ['--relay'], client: { capabilities } });
        try {
          const asked: string[] = [];
          client.setRequestHandler('elicitation/create', (request) => {
            asked.push(request.params.message);
            return Promise.resolve({ action: 'accept' as const, content: { reason: `tested in ${era}` } });
          });
          client.setRequestHandler('sampling/createMessage', (request) => {
            asked.push(JSON.stringify(request.params.messages[0]?.content));
            return Promise.resolve({ role: 'assistant' as const, content: { type: 'text' as const, text: 'teal' }, model: 'test-model' });
          });

          const approved = await client.callTool({ name: 'asking__ask', arguments: {} });
          assert.equal(textOf(approved), `accept tested in ${era}`, stderr());
          const sampled = await client.callTool({ name: 'asking__sample', arguments: {} });
          assert.equal(textOf(sampled), 'sampled teal', stderr());
          assert.deepEqual(asked, ['Why should this run?', JSON.stringify({ type: 'text', text: 'Name a colour' })]);
        } finally {
          await client.close();
        }
        // A client that declared no elicitation is not asked: the deployment refuses the upstream's request at once.
        const { client: plain } = await punkMcp(punk.baseUrl, '', { era, args: ['--relay'] });
        try {
          await assert.rejects(
            plain.callTool({ name: 'asking__ask', arguments: {} }),
            era === '2025' ? /the client of the call did not declare the capability/ : /needs the client capability elicitation/,
          );
        } finally {
          await plain.close();
        }
      },
    );

    test(`a ${era} client hears the updates of a resource it subscribed to, until it unsubscribes`, { timeout: 180_000 }, async () => {
      const { client, stderr } = await punkMcp(punk.baseUrl, '', { era, args: ['--relay'] });
      try {
        assert.equal(client.getServerCapabilities()?.resources?.subscribe, true);
        const seen = countUpdates(client);
        const subscription =
          era === '2025' ? await client.subscribeResource({ uri: NOTE }) : await client.listen({ resourceSubscriptions: [NOTE] });
        assert.ok(await eventually(async () => (seen.count >= 2 ? true : undefined), 30_000), `updates reached the client:\n${stderr()}`);
        assert.ok((await events()).includes(`subscribed ${NOTE}`), 'the server was subscribed');
        if ('close' in subscription) await subscription.close();
        else await client.unsubscribeResource({ uri: NOTE });
        assert.ok(await updatesStop(seen), 'no update after unsubscribing');
      } finally {
        await client.close();
      }
    });
  }

  test('a 2025 client answers roots, says they changed, and gets log messages at its level', { timeout: 180_000 }, async () => {
    const capabilities = { roots: { listChanged: true } };
    const { client, stderr } = await punkMcp(punk.baseUrl, '', { args: ['--relay'], client: { capabilities } });
    try {
      client.setRequestHandler('roots/list', () => Promise.resolve({ roots: [{ uri: 'file:///work/project', name: 'project' }] }));
      const messages: string[] = [];
      client.setNotificationHandler(
        'notifications/message',
        (notification) => void messages.push(`${notification.params.level} ${String(notification.params.data)}`),
      );

      assert.equal(textOf(await client.callTool({ name: 'asking__roots', arguments: {} })), 'file:///work/project', stderr());
      await client.sendRootsListChanged();
      assert.ok(
        await eventually(async () => ((await events()).includes('roots changed') ? true : undefined), 30_000),
        'the server heard the roots change',
      );

      await client.setLoggingLevel('error');
      assert.equal(textOf(await client.callTool({ name: 'asking__log', arguments: {} })), 'logged');
      assert.ok(
        await eventually(async () => (messages.length > 0 ? true : undefined), 30_000),
        `a message reached the client:\n${stderr()}`,
      );
      await new Promise((done) => setTimeout(done, 500));
      assert.deepEqual(messages, ['error an error line']);
    } finally {
      await client.close();
    }
  });
});

describe('punk mcp --relay when the deployment restarts', () => {
  for (const era of ['2025', '2026-07-28'] as const) {
    const what = era === '2025' ? 'subscribed again and has the log level of the client' : 'listened to again';
    test(`a ${era} client's new session is ${what}`, { timeout: 180_000 }, async () => {
      const port = await freePort();
      const { dir, eventLog } = await askingManifests(`punk-mcp-relay-again-${era}`);
      const start = () => startPunk({ manifestDir: dir, args: ['--ephemeral', '--port', String(port)] });
      let punk = await start();
      const { client, stderr } = await punkMcp(punk.baseUrl, '', { era, args: ['--relay'] });
      try {
        const seen = countUpdates(client);
        if (era === '2025') {
          await client.subscribeResource({ uri: NOTE });
          await client.setLoggingLevel('error');
        } else await client.listen({ resourceSubscriptions: [NOTE] });
        assert.ok(await eventually(async () => (seen.count > 0 ? true : undefined), 30_000), 'updates before the restart');

        await punk.stop();
        await writeFile(eventLog, '');
        punk = await start();
        // A 2025 session: the first request finds the old session gone; the next one makes a new one, subscribed and
        // at the level. A 2026-07-28 listen stream of the deployment: it ended with the old process, and is opened again.
        const messages: string[] = [];
        if (era === '2025') {
          await client.callTool({ name: 'asking__log', arguments: {} });
          client.setNotificationHandler('notifications/message', (notification) => void messages.push(notification.params.level));
          assert.equal(textOf(await client.callTool({ name: 'asking__log', arguments: {} })), 'logged', stderr());
        }
        const before = seen.count;
        assert.ok(
          await eventually(async () => (seen.count > before ? true : undefined), 30_000),
          `updates after the restart:\n${stderr()}`,
        );
        assert.ok((await eventsOf(eventLog)).includes(`subscribed ${NOTE}`), 'the new server process was subscribed');
        if (era === '2025') {
          assert.ok(await eventually(async () => (messages.length > 0 ? true : undefined), 30_000), 'a message after the restart');
          assert.deepEqual([...new Set(messages)], ['error']);
        } else assert.match(stderr(), /the deployment ended the listen stream for asking:\/\/note \(\w+\); listening again/);
      } finally {
        await client.close();
        await punk.stop();
        await removeDir(dir);
      }
    });
  }
});
