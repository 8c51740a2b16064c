/**
 * Every tool keeps a unique name on `/mcp`, through a real front and gateway and SDK v2 clients: a server
 * (fixtures/file-tools.mjs) lists 15 tools, one with a long name whose shortened form is exactly another's literal
 * 64-character name; a second server lists one name twice, which no endpoint can expose twice: that is logged and
 * shown on the server's status (`nameConflicts` of the servers API).
 */
import { strict as assert } from 'node:assert';
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createLogger, MAX_NAME_LENGTH, namespacedName } from '@punk/lib';
import { fileToolsServer, startReplicaSet, type ReplicaSet } from './replica-harness.js';

const log = createLogger('tool-names-test', process.env.TEST_LOG_LEVEL ?? 'silent');

const long = `summarize-${'every-section-of-the-file-'.repeat(3)}in-plain-words`;
/** The shortened exposed name of `long`, which is also the literal exposed name of `literal`. */
const shortened = namespacedName('files', long);
const literal = shortened.slice('files__'.length);
const tool = (name: string) => ({ name, description: `The ${name} tool.`, inputSchema: { type: 'object' } });
const tools = [tool(long), tool(literal), ...Array.from({ length: 13 }, (_, i) => tool(`tool-${String(i)}`))];

describe('unique tool names on /mcp', () => {
  let set: ReplicaSet;
  let dir = '';
  let client: Client | undefined;

  before(async () => {
    set = await startReplicaSet(log, {
      prefix: 'tool-names',
      servers: (tenant, workDir) => {
        dir = workDir;
        writeFileSync(join(dir, 'files-tools.json'), JSON.stringify(tools));
        writeFileSync(join(dir, 'dup-tools.json'), JSON.stringify([tool('echo'), tool('echo')]));
        return [fileToolsServer('files', tenant, dir), fileToolsServer('dup', tenant, dir)];
      },
    });
  });

  after(async () => {
    await client?.close();
    await set.stop();
  });

  it("keeps a long name whose shortened form is another tool's literal 64-character name, and routes both", async () => {
    assert.equal(shortened.length, MAX_NAME_LENGTH);
    assert.equal(namespacedName('files', literal), shortened, 'the fixture is the colliding pair');
    assert.ok(literal < long, 'the literal name sorts first: the order in which the long one used to be dropped');
    client = new Client({ name: 'tool-names-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${set.a.base}/mcp`)));
    const listed = (await client.listTools()).tools;
    const files = listed.filter((t) => t.description?.startsWith('The ') && !t.name.startsWith('dup__'));
    assert.equal(files.length, 15, `15 tools exposed for 15 tools: ${files.map((t) => t.name).join(', ')}`);
    assert.equal(new Set(listed.map((t) => t.name)).size, listed.length, 'names are unique');
    assert.ok(listed.every((t) => /^[A-Za-z0-9_-]{1,64}$/.test(t.name)));
    const literalTool = listed.find((t) => t.name === shortened);
    assert.equal(literalTool?.description, `The ${literal} tool.`, 'the literal name stays literal');
    const renamed = listed.find((t) => t.description === `The ${long} tool.`);
    assert.ok(renamed && renamed.name !== shortened && renamed.name.length === MAX_NAME_LENGTH);

    for (const name of [renamed.name, shortened]) await client.callTool({ name, arguments: {} });
    const calls = (await readFile(join(dir, 'files-calls.log'), 'utf8')).split('\n').filter(Boolean);
    assert.deepEqual(calls, [long, literal], 'each exposed name reaches its own tool');
  });

  it('shows a name no endpoint can expose on the server status', async () => {
    const status = async (name: string) =>
      ((await (await fetch(`${set.b.base}/api/v1/mcp/servers/${name}`)).json()) as { server: { nameConflicts?: string[] } }).server;
    const dup = await status('dup');
    assert.equal(dup.nameConflicts?.length, 1, JSON.stringify(dup));
    assert.match(String(dup.nameConflicts[0]), /server dup lists echo more than once; the first is kept/);
    assert.equal((await status('files')).nameConflicts, undefined, 'every tool of files has a name');
    const listed = (await fetch(`${set.b.base}/api/v1/mcp/servers`).then((r) => r.json())) as {
      servers: { name: string; nameConflicts?: string[] }[];
    };
    assert.equal(listed.servers.find((s) => s.name === 'dup')?.nameConflicts?.length, 1);
  });
});
