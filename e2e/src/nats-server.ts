/**
 * A nats-server with JetStream of a test's own, on a free port, with its
 * store in a temporary directory: tests that fix stream names or restart NATS
 * never touch the shared server on 4222.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './harness.js';

/** Path of the nats-server binary (`PUNK_TEST_NATS_SERVER`, default `/usr/sbin/nats-server`). */
export const natsServerBin = process.env.PUNK_TEST_NATS_SERVER ?? '/usr/sbin/nats-server';

/** A test's own NATS server. */
export interface OwnNats {
  /** `nats://127.0.0.1:<port>`; stays the same across restarts. */
  url: string;
  /** Kills the server (SIGKILL) and waits for its exit; the store directory is kept. */
  kill(): Promise<void>;
  /** Starts it again on the same port and store; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Kills it and removes its store. */
  stop(): Promise<void>;
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = netConnect(port, '127.0.0.1');
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts `nats-server -js -sd <tmp>` on a free port of 127.0.0.1. */
export async function startOwnNats(): Promise<OwnNats> {
  const port = await freePort();
  const storeDir = await mkdtemp(join(tmpdir(), 'punk-nats-'));
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(natsServerBin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
    await waitForPort(port, 10_000);
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    kill,
    start,
    stop: async () => {
      await kill();
      await rm(storeDir, { recursive: true, force: true });
    },
  };
}
