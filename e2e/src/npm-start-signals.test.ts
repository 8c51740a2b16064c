/**
 * A signal to `npm start` stops Punk: npm passes SIGTERM and SIGINT on to its script's shell, which `exec`s
 * node (package.json), so the signal reaches `punk up` itself instead of leaving it running re-parented to
 * pid 1 with its port and data-dir lock held. SIGHUP to `punk up` (the terminal closed) stops it too.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { eventually, manifestDir, removeDir, repoRoot } from './harness.js';

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      done(true);
    });
    socket.once('error', () => done(false));
  });
}

/** Whether a process with this pid exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs `npm start` on an empty manifest directory; resolves with npm, the node process under it and the port once ready. */
async function npmStart(dir: string) {
  const npm = spawn('npm', ['start', '--', '--ephemeral', '--port', '0', '--manifests', dir], {
    cwd: repoRoot,
    env: { ...process.env, PUNK_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  npm.stdout.on('data', (chunk) => (output += chunk));
  npm.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => npm.once('exit', (code) => done(code)));
  const port = await eventually(async () => {
    const match = /Punk is ready in \d+ ms: http:\/\/127\.0\.0\.1:(\d+)\//.exec(output);
    return match ? Number(match[1]) : undefined;
  }, 90_000);
  assert.ok(port, `npm start was not ready:\n${output}`);
  // npm's child: with `exec` in the script, the shell became node, which replaced itself (same pid) by node with
  // Punk's V8 flags running services/cli/dist/main.js (services/cli/src/node-flags.ts).
  const children = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(npm.pid)], { encoding: 'utf8' })
    .trim()
    .split('\n');
  const punkLine = children.find((line) => /(scripts\/punk\.mjs|services\/cli\/dist\/main\.js) up/.test(line));
  assert.ok(punkLine, `no punk process under npm: ${children.join('; ')}`);
  return { npm, punkPid: Number(punkLine.trim().split(/\s+/)[0]), port, exited, output: () => output };
}

describe('signals to npm start', () => {
  let dir: string;
  before(async () => (dir = await manifestDir('signals', {})));
  after(() => removeDir(dir));

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`${signal} to npm stops punk up and closes its port`, async () => {
      const started = await npmStart(dir);
      assert.ok(await listening(started.port));
      started.npm.kill(signal);
      await started.exited;
      const gone = await eventually(async () => (alive(started.punkPid) ? undefined : true), 30_000);
      assert.equal(gone, true, `punk up (pid ${String(started.punkPid)}) still runs after ${signal} to npm:\n${started.output()}`);
      assert.equal(await listening(started.port), false, `port ${String(started.port)} still open`);
    });
  }

  test('Ctrl-C in a terminal (SIGINT to npm and to punk up at once) is one clean stop, exit 0', async () => {
    const started = await npmStart(dir);
    process.kill(started.punkPid, 'SIGINT');
    started.npm.kill('SIGINT');
    await started.exited;
    const gone = await eventually(async () => (alive(started.punkPid) ? undefined : true), 30_000);
    assert.equal(gone, true, started.output());
    assert.doesNotMatch(started.output(), /second signal/, 'the two signals of one key press are one stop');
    assert.match(started.output(), /shutting down/);
    assert.equal(await listening(started.port), false);
  });

  test('SIGHUP to punk up stops it', async () => {
    const started = await npmStart(dir);
    process.kill(started.punkPid, 'SIGHUP');
    assert.equal(await started.exited, 0, started.output());
    assert.match(started.output(), /"signal":"SIGHUP"/);
    assert.equal(await listening(started.port), false);
  });
});
