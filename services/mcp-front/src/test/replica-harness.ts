/**
 * What the multi-replica tests of mcp-front share: a nats-server of the
 * test's own on a free port, front replicas with their own NATS connection
 * and HTTP port, and the server-everything manifest.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mcpServerSpecSchema, NatsBus, type Logger, type McpServer } from '@punk/lib';
import express from 'express';
import { createFront, type Front, type FrontOptions } from '../index.js';

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise(resolve => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Starts a nats-server with JetStream on a free port and a temporary store; resolves once it accepts connections. */
export async function startNats(log: Logger): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'punk-nats-'));
  const child: ChildProcess = spawn('/usr/sbin/nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir], { stdio: 'ignore' });
  const url = `nats://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      await (await NatsBus.connect({ url, name: 'probe', log })).close();
      break;
    } catch {
      await new Promise(resolve => setTimeout(resolve, 100));
    }
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM');
      await new Promise(resolve => child.once('exit', resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** One front replica: its base URL, the front, its own NATS connection and HTTP server. */
export interface Replica {
  base: string;
  front: Front;
  bus: NatsBus;
  http: HttpServer;
}

/**
 * Starts a front on its own NATS connection and port (1 MiB bodies, 30 s calls,
 * `retry:` 200 ms); `options` adds to or replaces those.
 */
export async function startReplica(url: string, tenant: string, name: string, log: Logger, options: Partial<FrontOptions> = {}): Promise<Replica> {
  const bus = await NatsBus.connect({ url, name, log });
  const front = await createFront({ bus, log, tenant, maxBodyBytes: 1024 * 1024, callTimeoutMs: 30_000, sseRetryMs: 200, ...options });
  const app = express();
  app.use(front.router);
  const http = await new Promise<HttpServer>(resolve => {
    const server = app.listen(0, '127.0.0.1', () => resolve(server));
  });
  return { base: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, front, bus, http };
}

/** Closes the front, its HTTP server and its NATS connection. */
export async function stopReplica(replica: Replica): Promise<void> {
  await replica.front.close();
  replica.http.closeAllConnections();
  await new Promise(resolve => replica.http.close(resolve));
  await replica.bus.close();
}

/** The McpServer of @modelcontextprotocol/server-everything over stdio. */
export function everything(name: string, namespace: string): McpServer {
  return {
    apiVersion: 'mcp.punk.dev/v1alpha1',
    kind: 'McpServer',
    metadata: { name, namespace },
    spec: mcpServerSpecSchema.parse({ package: { name: '@modelcontextprotocol/server-everything' }, args: ['stdio'] }),
  } as McpServer;
}
