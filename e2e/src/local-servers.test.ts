/**
 * The servers `punk up` starts as its own child processes: Punk connects only to a process it started (a taken
 * port fails naming the process holding it), nothing it starts outlives it whatever ends it (SIGKILL included,
 * or a signal while servers are still starting), the servers listen on loopback only, and a slow server does not
 * hold the others (its own `startTimeout`).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { test } from 'node:test';
import { connectClient, textOf } from './clients.js';
import { freePort, manifestDir, removeDir, startPunk, type RunningPunk } from './harness.js';

const everythingBin = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/** An McpServer manifest of a local server (`spec` as YAML flow mappings, one per line). */
function manifest(name: string, spec: string[]): string {
  return [
    'apiVersion: mcp.punk.dev/v1alpha1',
    'kind: McpServer',
    `metadata: { name: ${name} }`,
    'spec:',
    ...spec.map((l) => `  ${l}`),
  ].join('\n');
}

/** server-everything over Streamable HTTP on `port`, as examples/everything-http.yaml runs it. */
function everythingHttp(name: string, port: number): string {
  return manifest(name, [
    'package: { registry: npm, name: "@modelcontextprotocol/server-everything" }',
    'args: [streamableHttp]',
    'transport: streamable-http',
    `port: ${String(port)}`,
    `env: [{ name: PORT, value: "${String(port)}" }]`,
  ]);
}

/** The live (not zombie) descendants of `root`, with their command lines, from /proc. */
async function processTree(root: number): Promise<Map<number, string>> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields && fields[0] !== 'Z') parents.set(Number(entry), Number(fields[1]));
  }
  const tree = new Map<number, string>();
  const walk = async (pid: number): Promise<void> => {
    for (const [child, parent] of parents) {
      if (parent !== pid) continue;
      tree.set(child, (await readFile(`/proc/${String(child)}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' '));
      await walk(child);
    }
  };
  await walk(root);
  return tree;
}

/** Whether `pid` runs (a zombie has exited). */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8').catch(() => undefined);
  return stat !== undefined && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      resolve(false);
    });
  });
}

/** Polls until `condition` holds, for at most `timeoutMs`; the last value. */
async function eventually(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Asserts that none of `pids` runs within 10 s, naming those left. */
async function assertAllGone(pids: Map<number, string>, what: string): Promise<void> {
  const gone = await eventually(async () => (await Promise.all([...pids.keys()].map(alive))).every((a) => !a), 10_000);
  if (gone) return;
  const left = [];
  for (const [pid, command] of pids) if (await alive(pid)) left.push(`${String(pid)} ${command}`);
  for (const pid of pids.keys()) process.kill(pid, 'SIGKILL');
  assert.fail(`${what}; still running:\n${left.join('\n')}`);
}

/** The state and last error of server `name` on the servers API of `punk`. */
async function serverState(punk: RunningPunk, name: string): Promise<{ state: string; lastError?: string }> {
  const res = await fetch(`${punk.baseUrl}/api/v1/mcp/servers/${name}`);
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { server: { state: string; lastError?: string } }).server;
}

void test('a port another process holds fails the server, naming the port and that process; calls never reach it', async (t) => {
  const port = await freePort();
  // Another server-everything on that port, not started by this Punk (a second `npm start`, say).
  const other = spawn(process.execPath, [everythingBin, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'ignore',
  });
  t.after(() => other.kill('SIGKILL'));
  assert.ok(await eventually(() => listening(port), 20_000), 'the other server listens');
  const dir = await manifestDir('taken-port', { 'http.yaml': everythingHttp('everything-http', port) });
  const punk = await startPunk({ manifestDir: dir });
  t.after(async () => {
    await punk.stop();
    await removeDir(dir);
  });
  const banner = /servers: (.*)/.exec(punk.output())?.[1] ?? '';
  assert.match(
    banner,
    new RegExp(`everything-http \\(failed: .*port ${String(port)} is already in use by pid ${String(other.pid)} \\(`),
    banner,
  );
  // It stays failed while the other process holds the port (it is retried after backoff, and fails the same way).
  await new Promise((resolve) => setTimeout(resolve, 2_500));
  const state = await serverState(punk, 'everything-http');
  assert.equal(state.state, 'failed');
  assert.match(state.lastError ?? '', new RegExp(`port ${String(port)} is already in use by pid ${String(other.pid)}`));
});

void test('a server whose port is answered by a process outside its own process tree is never ready', async (t) => {
  const port = await freePort();
  // The command leaves behind a server in a session of its own (no longer Punk's child), then waits.
  const dir = await manifestDir('foreign-listener', {
    'escape.yaml': manifest('escape', [
      'image: local/escape:1',
      `command: [sh, -c, '(setsid "$0" "$1" streamableHttp &); exec sleep 300', ${JSON.stringify(process.execPath)}, ${JSON.stringify(everythingBin)}]`,
      'transport: streamable-http',
      `port: ${String(port)}`,
      `env: [{ name: PORT, value: "${String(port)}" }]`,
      'startTimeout: 20s',
    ]),
  });
  const punk = await startPunk({ manifestDir: dir });
  t.after(async () => {
    await punk.stop();
    await removeDir(dir);
  });
  const banner = /servers: (.*)/.exec(punk.output())?.[1] ?? '';
  const escaped = Number(new RegExp(`port ${String(port)} is answered by pid (\\d+)`).exec(banner)?.[1]);
  if (escaped) t.after(() => process.kill(escaped, 'SIGKILL'));
  assert.match(banner, /escape \(failed: .*not by the process Punk started/, banner);
  assert.ok(escaped > 0, `the message names the process that answered: ${banner}`);
});

void test('SIGKILL of punk up leaves none of its server processes (a sh wrapper and its child, an HTTP server) running', async (t) => {
  const port = await freePort();
  const dir = await manifestDir('sigkill', {
    'http.yaml': everythingHttp('everything-http', port),
    'wrapped.yaml': manifest('wrapped', [
      'image: local/wrapped:1',
      // Not exec'd: sh stays the server's parent.
      `command: [sh, -c, '"$0" "$1" stdio; exit $?', ${JSON.stringify(process.execPath)}, ${JSON.stringify(everythingBin)}]`,
    ]),
  });
  t.after(() => removeDir(dir));
  const punk = await startPunk({ manifestDir: dir });
  const tree = await processTree(punk.process.pid ?? 0);
  const commands = [...tree.values()];
  assert.ok(
    commands.some((c) => c.startsWith('sh -c')),
    `the sh wrapper runs: ${commands.join('\n')}`,
  );
  assert.ok(commands.filter((c) => c.includes('server-everything')).length >= 2, `the servers run: ${commands.join('\n')}`);
  assert.ok(await listening(port));
  punk.process.kill('SIGKILL');
  await punk.stop();
  await assertAllGone(tree, 'every process punk up started ends with it');
  assert.equal(await listening(port), false, `port ${String(port)} is free again`);
});

void test('SIGTERM while one server is still starting and another is in its handshake leaves nothing running', async (t) => {
  const port = await freePort();
  const dir = await manifestDir('sigterm-starting', {
    // Listens, never answers: the HTTP handshake hangs.
    'mute.yaml': manifest('mute', [
      'image: local/mute:1',
      `command: [${JSON.stringify(process.execPath)}, -e, "require('node:net').createServer(() => {}).listen(Number(process.env.PORT))"]`,
      'transport: streamable-http',
      `port: ${String(port)}`,
      `env: [{ name: PORT, value: "${String(port)}" }]`,
    ]),
    // A sh wrapper whose child never speaks MCP: stdio handshake pending.
    'slow.yaml': manifest('slow', ['image: local/slow:1', "command: [sh, -c, 'sleep 300; exit 1']"]),
  });
  t.after(() => removeDir(dir));
  // Signalled as soon as both servers run, whatever punk up is doing then.
  const punk = await startPunk({ manifestDir: dir, until: 'spawned', env: { PUNK_SERVER_START_TIMEOUT_MS: '120000' } });
  let tree = new Map<number, string>();
  const started = await eventually(async () => {
    tree = await processTree(punk.process.pid ?? 0);
    return [...tree.values()].some((c) => c.startsWith('sleep')) && (await listening(port));
  }, 40_000);
  assert.ok(started, `both servers are starting: ${[...tree.values()].join('\n')}`);
  const code = await punk.stop();
  await assertAllGone(tree, 'a stop during the servers start ends their processes');
  assert.equal(code, 0, punk.output().slice(-2000));
  assert.equal(await listening(port), false, `port ${String(port)} is free again`);
  assert.doesNotMatch(punk.output(), /Punk is ready/, 'a stop during the start announces no ready Punk');
});

void test('a slow server does not hold the others: they are served while it is starting, and its own startTimeout ends its start', async (t) => {
  const dir = await manifestDir('slow-start', {
    'everything.yaml': manifest('everything', [
      'package: { registry: npm, name: "@modelcontextprotocol/server-everything" }',
      'args: [stdio]',
    ]),
    'slow.yaml': manifest('slow', ['image: local/slow:1', "command: [sh, -c, 'exec sleep 300']", 'startTimeout: 12s']),
  });
  const punk = await startPunk({ manifestDir: dir, until: 'serving', env: { PUNK_SERVER_START_TIMEOUT_MS: '120000' } });
  t.after(async () => {
    await punk.stop();
    await removeDir(dir);
  });
  const ready = await eventually(async () => (await serverState(punk, 'everything')).state === 'ready', 20_000);
  assert.ok(ready, 'the fast server is ready');
  assert.equal((await serverState(punk, 'slow')).state, 'starting', 'the slow server reports starting');
  assert.equal((await fetch(`${punk.baseUrl}/readyz`)).status, 200, 'punk up is ready while a server starts');
  const client = await connectClient(`${punk.baseUrl}/mcp`, '2025-11-25');
  try {
    const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'not held' } });
    assert.match(textOf(echo), /not held/);
  } finally {
    await client.close();
  }
  assert.equal((await serverState(punk, 'slow')).state, 'starting', 'the call was served while the slow server was starting');
  // Its manifest's startTimeout (12 s), not PUNK_SERVER_START_TIMEOUT_MS (120 s), ends its start.
  assert.ok(await eventually(async () => (await serverState(punk, 'slow')).state === 'failed', 30_000));
  assert.match((await serverState(punk, 'slow')).lastError ?? '', /did not complete its MCP handshake within 12000 ms/);
});

void test('the example HTTP server listens on loopback only', async (t) => {
  const port = await freePort();
  const dir = await manifestDir('loopback', { 'http.yaml': everythingHttp('everything-http', port) });
  const punk = await startPunk({ manifestDir: dir });
  t.after(async () => {
    await punk.stop();
    await removeDir(dir);
  });
  assert.equal((await serverState(punk, 'everything-http')).state, 'ready');
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const listeners = [...(await readFile('/proc/net/tcp', 'utf8')).split('\n'), ...(await readFile('/proc/net/tcp6', 'utf8')).split('\n')]
    .map((line) => line.trim().split(/\s+/))
    .flatMap(([, local, , state]) => (state === '0A' && local?.endsWith(`:${hex}`) ? [local.split(':')[0]] : []));
  assert.deepEqual(listeners, ['0100007F'], `only 127.0.0.1:${String(port)} listens (got ${listeners.join(', ')})`);
});
