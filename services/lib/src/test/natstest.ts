/**
 * A private nats-server with JetStream for one test file: its own port and store directory, so the buckets and
 * streams a test fills (named as Punk names them, e.g. `PUNK_MCP_SERVERS`) are seen by no other test run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Path of the nats-server binary (`PUNK_TEST_NATS_SERVER`, default `/usr/sbin/nats-server`). */
const binary = process.env.PUNK_TEST_NATS_SERVER ?? '/usr/sbin/nats-server';

/** A running private nats-server. */
export interface PrivateNats {
  /** `nats://127.0.0.1:<port>`. */
  url: string;
  /** Stops the server and starts it again on the same port and store (clients reconnect). */
  restart(): Promise<void>;
  /** Kills the server (SIGKILL: no clean shutdown) and waits for its exit; the store is kept. */
  kill(): Promise<void>;
  /** Starts a stopped server again on the same port and store; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops the server and removes its store. */
  stop(): Promise<void>;
}

/**
 * Starts nats-server with JetStream on a free port of 127.0.0.1; resolves once it accepts connections.
 * `serverArgs` are more nats-server flags (e.g. `--user u --pass p` to require authentication).
 */
export async function startPrivateNats(serverArgs: readonly string[] = []): Promise<PrivateNats> {
  const dir = await mkdtemp(join(tmpdir(), 'punk-nats-'));
  let port = -1;
  let server: ChildProcess;
  // The first start lets nats-server pick a free port (-p -1) and reads it from its ports file: a port probed free
  // and bound later could be taken by another test file's server in between, and both would share one server.
  const start = async () => {
    server = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir, '--ports_file_dir', dir, ...serverArgs], {
      stdio: 'ignore',
    });
    if (port === -1) port = await portOf(server, dir);
    await listening(port);
  };
  const halt = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (server.exitCode !== null || server.signalCode !== null) return;
    server.kill(signal);
    await once(server, 'exit');
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    restart: async () => {
      await halt();
      await start();
    },
    kill: () => halt('SIGKILL'),
    start,
    stop: async () => {
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The client port nats-server `server` wrote into its ports file in `dir` (`nats-server_<pid>.ports`). */
async function portOf(server: ChildProcess, dir: string): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (server.exitCode !== null) throw new Error(`nats-server exited with code ${server.exitCode} before it listened`);
    const text = await readFile(join(dir, `nats-server_${server.pid}.ports`), 'utf8').catch(() => undefined);
    const url = text && (JSON.parse(text) as { nats?: string[] }).nats?.[0];
    if (url) return Number(new URL(url).port);
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('nats-server wrote no ports file within 5 s');
}

async function listening(port: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nats-server did not listen on 127.0.0.1:${port}`);
}
