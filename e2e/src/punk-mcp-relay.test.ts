/**
 * `punk mcp --relay` against `punk up` with authentication on, serving mcp-front's aggregation fixture
 * (services/mcp-front/src/test/fixtures/aggregate-upstream.mjs: tools, a tool reporting progress, one waiting until
 * cancelled, one growing the tool list, resources and a prompt). The SDK's `Client` drives `punk mcp --relay` over
 * stdio in both eras with a non-admin key: the platform tools and the deployment's beside them, a relayed call,
 * progress under the client's own token, a cancellation the upstream server sees, a resource, a prompt, a completion,
 * a JSON-RPC error passed through unchanged, and the deployment's list_changed re-announced. Started before the
 * deployment, it serves the platform tools and offers resources and prompts all the same, relays once the deployment
 * answers, and again after it restarted.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { textOf } from './clients.js';
import { eventually, freePort, manifestDir, removeDir, repoRoot, startPunk, type RunningPunk, createApiKey } from './harness.js';
import { PLATFORM_TOOLS, punkMcp } from './punk-mcp-client.js';

const BOOTSTRAP = randomBytes(24).toString('base64url');
const FIXTURE = join(repoRoot, 'services/mcp-front/src/test/fixtures/aggregate-upstream.mjs');

describe('punk mcp --relay against punk up', () => {
  let dir: string;
  let eventLog: string;
  let punk: RunningPunk;
  let userKey: string;
  const admin = { authorization: `Bearer ${BOOTSTRAP}` };

  before(async () => {
    dir = await manifestDir('punk-mcp-relay', {});
    eventLog = join(dir, 'events.log');
    await writeFile(
      join(dir, 'agg.yaml'),
      `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: agg }
spec:
  image: local/aggregate
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(FIXTURE)}, full]
  env: [{ name: EVENT_LOG, value: ${JSON.stringify(eventLog)} }]
`,
    );
    punk = await startPunk({
      manifestDir: dir,
      env: { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'https://punk.example.test', PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: BOOTSTRAP },
    });
    userKey = (await createApiKey(punk.baseUrl, BOOTSTRAP, { name: 'relay user' })).key;
  });

  after(async () => {
    await punk?.stop();
    await removeDir(dir);
  });

  /** Lines of the fixture's event log that start with `cancelled `. */
  const cancellations = async () =>
    (await readFile(eventLog, 'utf8').catch(() => '')).split('\n').filter((line) => line.startsWith('cancelled ')).length;
  /** Runs of `agg/<tool>` with a `tool.called` event, as the ledger lists them. */
  const calledRuns = async (tool: string) => {
    const response = await fetch(`${punk.baseUrl}/api/v1/runs?server=agg&tool=${tool}&type=tool.called&limit=500`, { headers: admin });
    return ((await response.json()) as { runs: unknown[] }).runs.length;
  };

  for (const era of ['2025', '2026-07-28'] as const) {
    test(`a ${era} client reaches the deployment's tools, resources and prompts beside Punk's own`, { timeout: 180_000 }, async () => {
      const { client, stderr } = await punkMcp(punk.baseUrl, userKey, { era, args: ['--relay'] });
      try {
        assert.equal(client.getNegotiatedProtocolVersion(), era === '2025' ? '2025-11-25' : era);
        const capabilities = client.getServerCapabilities();
        assert.ok(capabilities?.tools && capabilities.resources && capabilities.prompts, JSON.stringify(capabilities));

        const names = (await client.listTools()).tools.map((t) => t.name);
        for (const tool of [...PLATFORM_TOOLS, 'agg__t00', 'agg__progress', 'agg__wait', 'agg__grow']) {
          assert.ok(names.includes(tool), `${tool} is listed: ${names.join(', ')}`);
        }
        assert.equal(new Set(names).size, names.length, 'every name once');

        assert.equal(textOf(await client.callTool({ name: 'agg__t00', arguments: {} })), 'full:t00');
        const own = await client.callTool({ name: 'punk_search_tools', arguments: { query: 'progress' } });
        assert.equal((own.structuredContent as { matches: Array<{ name: string }> }).matches[0]?.name, 'agg__progress');

        // Progress of the upstream server reaches the client under its own token.
        const seen: number[] = [];
        const progressed = await client.callTool(
          { name: 'agg__progress', arguments: {} },
          { onprogress: (progress) => seen.push(progress.progress) },
        );
        assert.equal(textOf(progressed), 'done');
        assert.deepEqual(seen, [1, 2, 3]);

        // A cancelled call is cancelled at the upstream server: once the ledger has the call, the client aborts.
        const before = { runs: await calledRuns('wait'), cancelled: await cancellations() };
        const abort = new AbortController();
        const waiting = client.callTool({ name: 'agg__wait', arguments: {} }, { signal: abort.signal });
        waiting.catch(() => undefined);
        assert.ok(
          await eventually(async () => ((await calledRuns('wait')) > before.runs ? true : undefined), 30_000),
          'the wait call reached the gateway',
        );
        abort.abort('the user changed their mind');
        await assert.rejects(waiting);
        assert.ok(
          await eventually(async () => ((await cancellations()) > before.cancelled ? true : undefined), 30_000),
          `the upstream server saw the cancellation:\n${stderr()}`,
        );

        const { resources } = await client.listResources();
        assert.deepEqual(
          resources.map((r) => r.uri),
          ['fix://static/a', 'fix://static/b'],
        );
        const read = await client.readResource({ uri: 'fix://static/b' });
        assert.deepEqual(read.contents, [{ uri: 'fix://static/b', text: 'content of fix://static/b' }]);
        const { resourceTemplates } = await client.listResourceTemplates();
        assert.equal(resourceTemplates.length, 1);

        const { prompts } = await client.listPrompts();
        assert.deepEqual(
          prompts.map((p) => p.name),
          ['agg__greet'],
        );
        const prompt = await client.getPrompt({ name: 'agg__greet', arguments: { name: 'ada' } });
        assert.deepEqual(prompt.messages, [{ role: 'user', content: { type: 'text', text: 'hello ada from full' } }]);
        const completed = await client.complete({
          ref: { type: 'ref/prompt', name: 'agg__greet' },
          argument: { name: 'name', value: 'al' },
        });
        assert.deepEqual(completed.completion.values, ['alice@greet', 'albert@greet']);

        // The deployment's JSON-RPC error comes through with its code.
        await assert.rejects(client.getPrompt({ name: 'agg__no-such-prompt' }), (error: { code?: number; message: string }) => {
          assert.equal(typeof error.code, 'number', error.message);
          assert.match(error.message, /no-such-prompt/);
          return true;
        });
        // The relay spoke the client's era to the deployment too.
        assert.match(stderr(), new RegExp(`relaying http://[^ ]+/mcp \\(protocol ${era === '2025' ? '2025-11-25' : era}\\)`));
      } finally {
        await client.close();
      }
    });

    test(`a ${era} client hears the deployment's tool list change`, { timeout: 180_000 }, async () => {
      let heard = 0;
      const { client } = await punkMcp(punk.baseUrl, userKey, { era, args: ['--relay'] });
      client.setNotificationHandler('notifications/tools/list_changed', () => void heard++);
      const subscription = era === '2025' ? undefined : await client.listen({ toolsListChanged: true });
      try {
        // Each grow adds a tool and announces it; the first may come before the relay's own stream to the deployment is open.
        assert.ok(
          await eventually(async () => {
            await client.callTool({ name: 'agg__grow', arguments: {} });
            await new Promise((done) => setTimeout(done, 500));
            return heard > 0 ? true : undefined;
          }, 30_000),
          'list_changed reached the client',
        );
        const names = (await client.listTools(undefined, { cacheMode: 'refresh' })).tools.map((t) => t.name);
        assert.ok(names.includes('agg__grown0'), names.join(', '));
        assert.ok(names.includes('punk_list_runs'), 'the platform tools stay listed');
      } finally {
        await subscription?.close();
        await client.close();
      }
    });
  }
});

describe('punk mcp --relay started before the deployment', () => {
  test(
    'it serves the platform tools, says the deployment is down, relays once it answers, and again after a restart',
    { timeout: 180_000 },
    async () => {
      const port = await freePort();
      const baseUrl = `http://127.0.0.1:${String(port)}`;
      const dir = await manifestDir('punk-mcp-relay-late', {});
      await copyFile(join(repoRoot, 'examples/memory.yaml'), join(dir, 'memory.yaml'));
      const { client, stderr } = await punkMcp(baseUrl, '', { args: ['--relay'] });
      let punk: RunningPunk | undefined;
      try {
        assert.deepEqual((await client.listTools()).tools.map((t) => t.name).sort(), [...PLATFORM_TOOLS].sort());
        // What the deployment may serve is offered all the same: a client asks for it once the deployment answers.
        const capabilities = client.getServerCapabilities();
        assert.ok(capabilities?.resources?.subscribe && capabilities.prompts && capabilities.completions, JSON.stringify(capabilities));
        assert.match(stderr(), /not relaying http:\/\/127\.0\.0\.1:\d+\/mcp yet \(the deployment at .* cannot be reached/);
        const down = await client.callTool({ name: 'memory__read_graph', arguments: {} });
        assert.equal(down.isError, true);
        assert.match(textOf(down), /cannot be reached/);

        punk = await startPunk({ manifestDir: dir, args: ['--ephemeral', '--port', String(port)] });
        const names = (await client.listTools()).tools.map((t) => t.name);
        assert.ok(names.includes('memory__read_graph') && names.includes('punk_list_servers'), names.join(', '));
        const graph = await client.callTool({ name: 'memory__read_graph', arguments: {} });
        assert.notEqual(graph.isError, true, textOf(graph));
        // The memory server's resource is there; it has no prompts: their list is empty, and a get says what is missing.
        assert.deepEqual(
          (await client.listResources()).resources.map((r) => r.uri),
          ['memory://knowledge-graph'],
        );
        assert.equal((await client.readResource({ uri: 'memory://knowledge-graph' })).contents.length, 1);
        assert.deepEqual((await client.listPrompts()).prompts, []);
        await assert.rejects(client.getPrompt({ name: 'memory__none' }), /offers no prompts/);

        // The deployment goes away and comes back (a new process: the old session is gone): the relay connects again.
        await punk.stop();
        const gone = await client.callTool({ name: 'memory__read_graph', arguments: {} });
        assert.equal(gone.isError, true);
        punk = await startPunk({ manifestDir: dir, args: ['--ephemeral', '--port', String(port)] });
        const back = await client.callTool({ name: 'memory__read_graph', arguments: {} });
        assert.notEqual(back.isError, true, textOf(back));
        assert.match(stderr(), /lost http:\/\/127\.0\.0\.1:\d+\/mcp .*connecting again at the next request/);
      } finally {
        await client.close();
        await punk?.stop();
        await removeDir(dir);
      }
    },
  );
});
