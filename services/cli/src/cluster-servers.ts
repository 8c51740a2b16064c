/**
 * The example servers of `punk cluster`: a streamable-http or sse server
 * that Punk starts runs once, as its pod would, and every gateway reaches it
 * by URL; stdio servers stay as they are (each gateway starts its own).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { asLocalUrlServer, freePort, planLaunch } from '@punk/gateway';
import { transportOf, type McpServer } from '@punk/lib';

/** A server process started by the cluster. */
export interface StartedServer {
  /** `<namespace>/<name>`. */
  name: string;
  process: ChildProcess;
  /** The endpoint the gateways reach it at (`http://127.0.0.1:<port><path>`), the `url` of its rewritten manifest. */
  url: string;
}

/** `$(PUNK_MANIFEST_DIR)` in args and env values, expanded now: the rewritten manifests live elsewhere. */
function pinManifestDir(server: McpServer, manifestDir: string): McpServer {
  const pin = (value: string) => value.replaceAll('$(PUNK_MANIFEST_DIR)', manifestDir);
  const spec = { ...server.spec };
  if (spec.args) spec.args = spec.args.map(pin);
  spec.env = spec.env.map((e) => (e.value === undefined ? e : { ...e, value: pin(e.value) }));
  return { ...server, spec };
}

/** True for a server Punk starts that listens on a port (streamable-http or sse, no `url`). */
export function isLocalHttpServer(server: McpServer): boolean {
  return server.spec.url === undefined && transportOf(server.spec) !== 'stdio';
}

/**
 * Starts each local HTTP server once (through the gateway's `planLaunch`: same
 * scrubbed environment and working directory as a gateway would give it) and
 * writes, into `outDir`, one manifest per server for the gateways: local HTTP
 * servers become `url: http://127.0.0.1:<port><path>` servers, the others are
 * copied with `$(PUNK_MANIFEST_DIR)` pinned to `manifestDir`.
 * `onOutput` receives each server's output lines.
 *
 * @throws PunkError `ServerLaunchFailed` from `planLaunch` when a server cannot run locally.
 */
export async function prepareServers(options: {
  servers: McpServer[];
  manifestDir: string;
  outDir: string;
  workDir: string;
  start(name: string, command: string, args: string[], env: Record<string, string>, cwd: string): ChildProcess;
}): Promise<StartedServer[]> {
  const started: StartedServer[] = [];
  await mkdir(options.outDir, { recursive: true });
  for (const server of options.servers) {
    const { namespace = 'default', name } = server.metadata;
    let forGateways = pinManifestDir(server, options.manifestDir);
    if (isLocalHttpServer(server)) {
      // Its spec.port, or a free loopback port picked for it ($(PORT) expands to it).
      const port = server.spec.port ?? (await freePort());
      const plan = await planLaunch(server, { workDir: options.workDir, port, extraEnv: { PUNK_MANIFEST_DIR: options.manifestDir } });
      started.push({
        name: `${namespace}/${name}`,
        process: options.start(name, plan.command, plan.args, plan.env, plan.cwd),
        url: `http://127.0.0.1:${String(port)}${server.spec.path}`,
      });
      forGateways = asLocalUrlServer(forGateways, port);
    }
    // JSON is YAML: the manifest loader reads it as it is.
    await writeFile(join(options.outDir, `${namespace}-${name}.yaml`), JSON.stringify(forGateways, null, 2));
  }
  return started;
}

/**
 * Resolves true once `server` accepts TCP connections on its URL's port (the gateways then connect at their
 * first try instead of failing and backing off), false when its process exits first or `timeoutMs` passes.
 */
export async function waitListening(server: StartedServer, timeoutMs: number): Promise<boolean> {
  const { hostname, port } = new URL(server.url);
  const deadline = Date.now() + timeoutMs;
  const exited = () => server.process.exitCode !== null || server.process.signalCode !== null;
  while (!exited() && Date.now() < deadline) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(Number(port), hostname);
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => {
        resolve(false);
      });
    });
    if (open) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}
