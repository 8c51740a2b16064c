/**
 * What a local server process writes reaches the log by stream: stderr at info, an HTTP server's stdout (its
 * chatter, often a line per request, as server-everything's "Received MCP POST request") at debug, so it does not
 * flood punk up's output at the default level; both are kept for the exit's description.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { ServerProcess } from '../process.js';

test("an HTTP server's stdout is logged at debug, its stderr at info", async (t) => {
  const cwd = await mkdtemp(join(tmpdir(), 'punk-process-log-'));
  t.after(() => rm(cwd, { recursive: true, force: true }));
  const lines: Array<{ level: number; msg: string; stream: string }> = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write: (chunk, _encoding, done) => {
        lines.push(JSON.parse(String(chunk)) as { level: number; msg: string; stream: string });
        done();
      },
    }),
  );
  const script = "console.log('Received MCP POST request'); console.error('listening on port 4101'); process.exitCode = 3";
  const proc = new ServerProcess(
    { command: process.execPath, args: ['-e', script], env: {}, cwd, secrets: [], vaultSecrets: [] },
    { log, server: 't/chatty', stdio: false },
  );
  const exit = await proc.exited;
  assert.equal(exit.code, 3);
  const logged = (msg: string) => {
    const line = lines.find((l) => l.msg === msg);
    return [line?.stream, line?.level];
  };
  assert.deepEqual(logged('Received MCP POST request'), ['stdout', 20]);
  assert.deepEqual(logged('listening on port 4101'), ['stderr', 30]);
  assert.match(proc.describeExit(exit), /exited with code 3; stderr: .*listening on port 4101/);
});

test('a command not found says where it was looked for: a bare name on PATH, a relative path from the working directory', async (t) => {
  const cwd = await mkdtemp(join(tmpdir(), 'punk-process-enoent-'));
  t.after(() => rm(cwd, { recursive: true, force: true }));
  const log = pino({ level: 'silent' });
  const describe = async (command: string) => {
    const proc = new ServerProcess(
      { command, args: [], env: {}, cwd, secrets: [], vaultSecrets: [] },
      { log, server: 't/missing', stdio: true },
    );
    return proc.describeExit(await proc.exited);
  };
  assert.equal(await describe('punk-no-such-command-xyz'), 'command "punk-no-such-command-xyz" was not found (ENOENT) on PATH');
  assert.equal(
    await describe('node_modules/.bin/punk-no-such-command'),
    `command "node_modules/.bin/punk-no-such-command" was not found (ENOENT) in the server's working directory ${cwd} (a relative command is found from there): give an absolute path`,
  );
});
