/**
 * A private nats-server with JetStream for one test file: its own port and store directory, so the buckets and
 * streams a test fills (named as Punk names them, e.g. `PUNK_MCP_SERVERS`) are seen by no other test run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type AddressInfo } from 'node:net';
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
  /** Stops the server and removes its store. */
  stop(): Promise<void>;
}

/** Starts nats-server with JetStream on a free port of 127.0.0.1; resolves once it accepts connections. */
export async function startPrivateNats(): Promise<PrivateNats> {
  const dir = await mkdtemp(join(tmpdir(), 'punk-nats-'));
  const port = await freePort();
  let server: ChildProcess;
  const start = async () => {
    server = spawn(binary, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
    await listening(port);
  };
  const halt = async () => {
    if (server.exitCode !== null || server.signalCode !== null) return;
    server.kill();
    await once(server, 'exit');
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    restart: async () => {
      await halt();
      await start();
    },
    stop: async () => {
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise(resolve => server.close(resolve));
  return port;
}

async function listening(port: number): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const up = await new Promise<boolean>(resolve => {
      const socket = connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (up) return;
    await new Promise(r => setTimeout(r, 50));
  }
  throw new Error(`nats-server did not listen on 127.0.0.1:${port}`);
}
