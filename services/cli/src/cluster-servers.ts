/**
 * The McpServers of `punk cluster`: each is published to bucket `PUNK_MCP_SERVERS`, the operator's path, which
 * every gateway replica watches, so a change of the manifests directory reaches them live (added servers start,
 * changed ones restart, removed ones stop). A streamable-http or sse server that Punk starts runs once, as its pod
 * would, and every gateway reaches it by URL; stdio servers stay as they are (each gateway starts its own).
 */
import type { ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { asLocalUrlServer, freePort, planLaunch } from '@punk/gateway';
import {
  buckets,
  errorMessage,
  kvKey,
  managedServerSchema,
  transportOf,
  type Bus,
  type KvStore,
  type Logger,
  type ManagedServer,
  type McpServer,
} from '@punk/lib';

/** A server process started by the cluster. */
export interface StartedServer {
  /** `<namespace>/<name>`. */
  name: string;
  process: ChildProcess;
  /** The endpoint the gateways reach it at (`http://127.0.0.1:<port><path>`), the `url` of its published server. */
  url: string;
}

/** `$(PUNK_MANIFEST_DIR)` in args and env values, expanded now: the gateways do not read the manifests directory. */
function pinManifestDir(server: McpServer, manifestDir: string): McpServer {
  const pin = (value: string) => value.replaceAll('$(PUNK_MANIFEST_DIR)', manifestDir);
  const spec = { ...server.spec };
  if (spec.args) spec.args = spec.args.map(pin);
  spec.env = spec.env.map((e) => (e.value === undefined ? e : { ...e, value: pin(e.value) }));
  return { ...server, spec };
}

/** True for a server Punk starts that listens on a port (streamable-http or sse, no `url`). */
function isLocalHttpServer(server: McpServer): boolean {
  return server.spec.url === undefined && transportOf(server.spec) !== 'stdio';
}

/** What {@link clusterServers} needs. */
export interface ClusterServersOptions {
  bus: Bus;
  log: Logger;
  /** The manifests directory: `$(PUNK_MANIFEST_DIR)` of the servers. */
  manifestDir: string;
  /** Root of the local HTTP servers' working directories. */
  workDir: string;
  /** How long a local HTTP server may take to listen, in milliseconds (`PUNK_SERVER_START_TIMEOUT_MS`). */
  startTimeoutMs: number;
  /** Starts a server process (its output prefixed with `name`). */
  start(name: string, command: string, args: string[], env: Record<string, string>, cwd: string): ChildProcess;
  /** Stops a server process started by `start`; resolves once it exited. */
  stop(process: ChildProcess): Promise<void>;
}

/** The servers of a running cluster. */
export interface ClusterServers {
  /**
   * Serves exactly `servers` (those of the manifests directory): removed ones leave the bucket and their processes
   * stop; each added or changed local HTTP server is started (again) through the gateway's `planLaunch` (same
   * scrubbed environment and working directory as a gateway would give it) and waited for until it listens; then
   * each added or changed server is published, a local HTTP one as the `url` server that reaches it, marked
   * `launched`, with `metadata.generation` counting its changes (so the gateways reconnect to a restarted process).
   * A server that cannot run here (`planLaunch`'s `ServerLaunchFailed`) or does not listen in time is logged with
   * why and published all the same (the gateways report it failed); the others are served.
   * @throws PunkError `BusUnavailable` from the bucket.
   */
  apply(servers: McpServer[]): Promise<void>;
  /** The servers applied last with `spec.idle`, by `kvKey(namespace, name)`, and whether each is asleep. */
  idle(): Map<string, { server: McpServer; asleep: boolean }>;
  /**
   * Puts server `key` to sleep, as the operator scales it to zero: published with `spec.replicas` 0 (the gateways
   * hold its calls for a wake and stop their own stdio processes of it), its local HTTP process stopped.
   */
  sleep(key: string): Promise<void>;
  /**
   * Wakes server `key`: a local HTTP server's process is started again and, once it listens, the server is published
   * running (as the operator publishes a pod's server once its pods are ready); resolves false, the server left
   * asleep and its process stopped, when it does not listen within the start timeout.
   */
  wake(key: string): Promise<boolean>;
}

/** The servers of `punk cluster` (see the module comment); the bucket holds nothing else once `apply` ran. */
export function clusterServers(options: ClusterServersOptions): ClusterServers {
  const { log } = options;
  /** The running local HTTP servers by `kvKey(namespace, name)`, with the definition they were started from and their port. */
  const running = new Map<string, { server: McpServer; started: StartedServer; port: number }>();
  let bucket: KvStore | undefined;

  /** The servers published by `apply`, by key, as their documents have them. */
  const published = new Map<string, McpServer>();
  /** The keys of the servers asleep (spec.idle): published at zero, no process. */
  const asleep = new Set<string>();

  /** The bucket entry of `server` (of key `key`), of generation `generation`. */
  const entryOf = (key: string, server: McpServer, generation: number): ManagedServer => {
    const pinned = pinManifestDir(server, options.manifestDir);
    const local = isLocalHttpServer(server);
    // A local server that could not start is published at its declared port (or none): the gateways report it failed.
    const reached = local ? asLocalUrlServer(pinned, running.get(key)?.port ?? server.spec.port ?? 0) : pinned;
    const served = asleep.has(key) ? { ...reached, spec: { ...reached.spec, replicas: 0 } } : reached;
    const metadata = { ...served.metadata, namespace: served.metadata.namespace ?? 'default', generation };
    return { server: { ...served, metadata }, generation, ...(local && { launched: true }) };
  };

  /** Starts local HTTP server `server` and waits until it listens; one that cannot run or listen is logged with why (false). */
  const launch = async (key: string, server: McpServer): Promise<boolean> => {
    // Its spec.port, or a free loopback port picked for it ($(PORT) expands to it).
    const port = server.spec.port ?? (await freePort());
    const plan = await planLaunch(server, { workDir: options.workDir, port, extraEnv: { PUNK_MANIFEST_DIR: options.manifestDir } }).catch(
      (error: unknown) => {
        log.error({ server: key, err: errorMessage(error) }, `${key} cannot run here: ${errorMessage(error)}`);
        return undefined;
      },
    );
    if (!plan) return false;
    const started: StartedServer = {
      name: key,
      process: options.start(server.metadata.name, plan.command, plan.args, plan.env, plan.cwd),
      url: `http://127.0.0.1:${String(port)}${server.spec.path}`,
    };
    running.set(key, { server, started, port });
    if (await waitListening(started, options.startTimeoutMs)) return true;
    log.error({ server: key, url: started.url }, `${key} does not listen at ${started.url}; see its lines above`);
    return false;
  };

  /** Publishes the entry of `key` anew (one generation on), as it is now (asleep or not). */
  const republish = async (key: string) => {
    const server = published.get(key);
    if (!bucket || !server) return;
    const previous = managedServerSchema.safeParse((await bucket.get(key))?.value).data;
    await bucket.put(key, entryOf(key, server, (previous?.generation ?? 0) + 1));
  };

  /** Stops the local HTTP process of `key`, if one runs. */
  const stopProcess = async (key: string) => {
    const process = running.get(key)?.started.process;
    running.delete(key);
    if (process) await options.stop(process);
  };

  return {
    async apply(servers) {
      bucket ??= await options.bus.keyValue(buckets.mcpServers);
      const wanted = new Map(servers.map((s) => [kvKey(s.metadata.namespace ?? 'default', s.metadata.name), s]));
      // Gone first (an earlier run's too): the gateways let go of a server before its process stops.
      for (const key of await bucket.keys()) {
        if (wanted.has(key)) continue;
        await bucket.delete(key);
        published.delete(key);
      }
      for (const [key, { server, started }] of [...running]) {
        if (isDeepStrictEqual(wanted.get(key), server)) continue;
        running.delete(key);
        await options.stop(started.process);
      }
      // A changed (or removed) document starts awake.
      for (const key of asleep) if (!isDeepStrictEqual(wanted.get(key), published.get(key))) asleep.delete(key);
      for (const [key, server] of wanted) if (isLocalHttpServer(server) && !running.has(key) && !asleep.has(key)) await launch(key, server);
      for (const [key, server] of wanted) {
        if (isDeepStrictEqual(published.get(key), server)) continue;
        const previous = managedServerSchema.safeParse((await bucket.get(key))?.value).data;
        await bucket.put(key, entryOf(key, server, (previous?.generation ?? 0) + 1));
        published.set(key, server);
      }
    },
    idle: () =>
      new Map([...published].filter(([, server]) => server.spec.idle).map(([key, server]) => [key, { server, asleep: asleep.has(key) }])),
    async sleep(key) {
      asleep.add(key);
      // Published at zero first: the gateways stop calling it before its process stops.
      await republish(key);
      await stopProcess(key);
    },
    async wake(key) {
      const server = published.get(key);
      if (!server) return false;
      if (isLocalHttpServer(server) && !running.has(key) && !(await launch(key, server))) {
        await stopProcess(key);
        return false;
      }
      asleep.delete(key);
      await republish(key);
      return true;
    },
  };
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
