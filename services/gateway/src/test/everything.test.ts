import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { catalogReplySchema, PunkError } from '@punk/lib';
import { descendantPids, freePort, installed, manifest, startHarness } from './harness.js';

const everythingBin = installed('@modelcontextprotocol/server-everything/dist/index.js');

test('server-everything over stdio: list, call echo, read a resource, get a prompt, all on the ledger', async (t) => {
  const h = await startHarness((tenant) => [
    manifest(tenant, 'everything', { package: { name: '@modelcontextprotocol/server-everything' }, args: ['stdio'] }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();

  const catalog = catalogReplySchema.parse(await h.call({ method: 'catalog/list' }));
  assert.equal(catalog.servers.length, 1);
  const server = catalog.servers[0]!;
  assert.equal(server.state, 'ready', server.lastError);
  assert.ok(
    server.tools.some((tool) => tool.name === 'echo'),
    'echo is listed',
  );
  assert.ok(server.resources.length > 0 || server.resourceTemplates.length > 0, 'resources are listed');
  assert.ok(server.prompts.length > 0, 'prompts are listed');
  assert.match(server.protocolVersion ?? '', /^2025-/);

  const echoed = (await h.call({ method: 'tools/call', server: 'everything', name: 'echo', arguments: { message: 'hello punk' } })) as {
    content: { text: string }[];
  };
  assert.match(echoed.content[0]!.text, /hello punk/);

  const resource = server.resources[0]!;
  assert.ok(resource, 'resources are listed');
  const read = (await h.call({ method: 'resources/read', server: 'everything', uri: resource.uri })) as { contents: { uri: string }[] };
  assert.equal(read.contents[0]!.uri, resource.uri);
  const prompt = server.prompts.find(
    (p) => !Array.isArray(p.arguments) || (p.arguments as { required?: boolean }[]).every((a) => !a.required),
  )!;
  const got = (await h.call({ method: 'prompts/get', server: 'everything', name: prompt.name })) as { messages: unknown[] };
  assert.ok(got.messages.length > 0);

  const types = h.events.map((e) => e.type);
  for (const type of [
    'resource.read',
    'resource.completed',
    'tool.called',
    'tool.completed',
    'prompt.got',
    'prompt.completed',
    'server.state_changed',
  ]) {
    assert.ok(types.includes(type as never), `ledger holds ${type}`);
  }
  const called = h.events.find((e) => e.type === 'tool.called')!;
  assert.deepEqual(called.data.arguments, { message: 'hello punk' });
  assert.equal(called.data.sideEffectLevel, 1);
  // The gateway's decision to allow the call travels in tool.called: no event of its own.
  assert.equal((called.data.decision as { decision: string }).decision, 'allow');
  assert.equal((called.data.decision as { kind: string }).kind, 'tool');
  assert.ok(!h.events.some((e) => e.type === 'governance.decision'), 'allowed uses carry their decision');
  const completed = h.events.find((e) => e.type === 'tool.completed')!;
  assert.equal(completed.data.isError, false);
  assert.equal(typeof completed.data.durationMs, 'number');

  // An unknown tool is a ToolNotFound naming tool and server.
  await assert.rejects(h.call({ method: 'tools/call', server: 'everything', name: 'no_such_tool' }), (error: unknown) => {
    assert.ok(error instanceof PunkError);
    assert.equal(error.code, 'ToolNotFound');
    assert.match(error.message, /no_such_tool.*everything/);
    return true;
  });
  // An unknown server is a ServerNotFound.
  await assert.rejects(h.call({ method: 'tools/call', server: 'nope', name: 'echo' }), { code: 'ServerNotFound' });
});

test('server-everything over streamable HTTP, started by the gateway on a free port', async (t) => {
  const port = await freePort();
  const h = await startHarness((tenant) => [
    manifest(tenant, 'everything-http', {
      image: 'ghcr.io/example/everything:1',
      command: [process.execPath, everythingBin, 'streamableHttp'],
      transport: 'streamable-http',
      port,
      env: [{ name: 'PORT', value: String(port) }],
    }),
  ]);
  t.after(() => h.close());
  await h.gateway.ready();
  const [server] = h.gateway.catalog(h.tenant);
  assert.equal(server!.state, 'ready', server!.lastError);
  assert.ok(server!.tools.some((tool) => tool.name === 'echo'));
  assert.match(server!.protocolVersion ?? '', /^2025-/, 'the auto probe fell back to the 2025 era');
  const echoed = (await h.call({ method: 'tools/call', server: 'everything-http', name: 'echo', arguments: { message: 'over http' } })) as {
    content: { text: string }[];
  };
  assert.match(echoed.content[0]!.text, /over http/);
});

test('filesystem server restricted to a directory reads a file there', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'punk-fs-'));
  await writeFile(join(dir, 'note.txt'), 'the quick brown fox');
  const h = await startHarness((tenant) => [
    manifest(tenant, 'files', {
      package: { name: '@modelcontextprotocol/server-filesystem' },
      args: ['$(ALLOWED_DIR)'],
      env: [{ name: 'ALLOWED_DIR', value: dir }],
      tools: { deny: ['write_file', 'edit_file'] },
    }),
  ]);
  t.after(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });
  await h.gateway.ready();
  const [server] = h.gateway.catalog(h.tenant);
  assert.equal(server!.state, 'ready', server!.lastError);
  assert.ok(!server!.tools.some((tool) => tool.name === 'write_file'), 'denied tools are not listed');
  const read = (await h.call({
    method: 'tools/call',
    server: 'files',
    name: 'read_text_file',
    arguments: { path: join(dir, 'note.txt') },
  })) as { content: { text: string }[] };
  assert.match(read.content[0]!.text, /quick brown fox/);
  const denied = (await h.call({
    method: 'tools/call',
    server: 'files',
    name: 'write_file',
    arguments: { path: join(dir, 'x'), content: 'x' },
  })) as { isError?: boolean; content: { text: string }[] };
  assert.equal(denied.isError, true);
  assert.match(denied.content[0]!.text, /spec\.tools\.deny lists it/);
  const outside = (await h.call({
    method: 'tools/call',
    server: 'files',
    name: 'read_text_file',
    arguments: { path: '/etc/hostname' },
  })) as { isError?: boolean };
  assert.equal(outside.isError, true, 'reads outside the allowed directory fail');
});

test('stop() leaves no server process running', async () => {
  const port = await freePort();
  const h = await startHarness((tenant) => [
    manifest(tenant, 'c', {
      image: 'x:1',
      command: [process.execPath, everythingBin, 'streamableHttp'],
      transport: 'streamable-http',
      port,
      env: [{ name: 'PORT', value: String(port) }],
    }),
    manifest(tenant, 'a', { package: { name: '@modelcontextprotocol/server-everything' }, args: ['stdio'] }),
    manifest(tenant, 'b', {
      package: { name: '@modelcontextprotocol/server-memory' },
      env: [{ name: 'MEMORY_FILE_PATH', value: '$(HOME)/memory.jsonl' }],
    }),
  ]);
  await h.gateway.ready();
  assert.deepEqual(
    h.gateway.catalog(h.tenant).map((s) => s.state),
    ['ready', 'ready', 'ready'],
  );
  const before = await descendantPids();
  assert.ok(before.length >= 3, `three server processes run (saw ${before.length})`);
  await h.close();
  assert.deepEqual(await descendantPids(), [], 'no descendant process is left');
});
