// The paths a tool call takes in the benchmark suite, each to the same upstream (bench/echo-server.mjs): direct
// (Streamable HTTP, and stdio through the SDK client), `punk up` (per server and aggregated `/mcp`), `punk cluster`
// (through its proxy), supergateway and mcp-proxy (on the stdio upstream). Each starter returns the running
// system; its paths share one shape: `{ id, group, label, transport, open(era), cpuPids? }`, where `open` resolves
// with a session `{ call(args, signal), close() }` calling the upstream's `echo`, or `blob` with `{ bytes }`, and
// `cpuPids()` lists the processes whose CPU time a call of the path costs (the proxy's own, never its upstream's).
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import {
  benchEnv,
  childrenOf,
  freePort,
  outputMatch,
  root,
  scratchDatabase,
  spawnOwned,
  startNats,
  stopOwned,
  untilListening,
} from './common.mjs';
import { CallError, Session } from './mcp-http.mjs';

/** The upstream's entry point. */
export const echoServer = join(root, 'bench/echo-server.mjs');
const punkMain = join(root, 'services/cli/dist/main.js');
const node = process.execPath;

/** A path whose sessions are raw HTTP sessions on `url`, calling `tool` (`echo`, prefixed on `/mcp`). */
function httpPath(id, group, label, transport, url, prefix = '') {
  return {
    id,
    group,
    label,
    transport,
    url,
    async open(era) {
      const session = await new Session(url, era).open();
      return {
        call: async (args, signal) => {
          const result = await session.call(`${prefix}${'bytes' in args ? 'blob' : 'echo'}`, args, signal);
          if (result.isError) throw new CallError(`tool error: ${JSON.stringify(result.content).slice(0, 300)}`);
          return result;
        },
        close: () => session.close(),
      };
    },
  };
}

/** Writes McpServer manifests `es` (the echo server over stdio) and `eh` (over Streamable HTTP on `httpPort`) into a new directory. */
export async function echoManifestDir(prefix, httpPort) {
  const dir = await mkdtemp(join(tmpdir(), `punk-${prefix}-`));
  const command = `[${JSON.stringify(node)}, ${JSON.stringify(echoServer)}]`;
  await writeFile(
    join(dir, 'es.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: es }
spec:
  image: local/bench-echo
  command: ${command}
  args: [stdio]
  transport: stdio
`,
  );
  await writeFile(
    join(dir, 'eh.yaml'),
    `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: eh }
spec:
  image: local/bench-echo
  command: ${command}
  args: [http, "${httpPort}"]
  transport: streamable-http
  port: ${httpPort}
  path: /mcp
`,
  );
  return dir;
}

/** The echo server over Streamable HTTP, and the SDK client over stdio (one child per era, shared by that era's sessions). */
export async function startDirect() {
  const child = spawnOwned(node, [echoServer, 'http', '0']);
  const [, url] = await outputMatch(child, /listening on (\S+)/, 30_000, 'the echo server');
  const clients = new Map();
  const stdioClient = async (era) => {
    if (!clients.has(era)) {
      const client = new Client(
        { name: 'punk-bench', version: '1' },
        era === '2026-07-28' ? { versionNegotiation: { mode: { pin: era } } } : {},
      );
      await client.connect(new StdioClientTransport({ command: node, args: [echoServer, 'stdio'] }));
      clients.set(era, client);
    }
    return clients.get(era);
  };
  return {
    paths: [
      // The upstream's own CPU per call: what every other path adds to.
      { ...httpPath('direct-http', 'direct', 'direct, Streamable HTTP', 'http', url), cpuPids: async () => [child.pid] },
      {
        id: 'direct-stdio',
        group: 'direct',
        label: 'direct, stdio (SDK client; sessions share one connection)',
        transport: 'stdio',
        async open(era) {
          const client = await stdioClient(era);
          return {
            call: async (args) => {
              const result = await client.callTool({ name: 'bytes' in args ? 'blob' : 'echo', arguments: args });
              if (result.isError) throw new CallError(`tool error: ${JSON.stringify(result.content).slice(0, 300)}`);
              return result;
            },
            close: async () => undefined,
          };
        },
      },
    ],
    stop: async () => {
      await Promise.all([...clients.values()].map((c) => c.close()));
      await stopOwned(child, 5000);
    },
  };
}

/**
 * `punk up` on the echo manifests (`eh` on a free port), its data in a fresh directory (what `npm start` does):
 * `{ paths, pid, stop() }`.
 */
export async function startPunkUp() {
  const dir = await echoManifestDir('bench-up', await freePort());
  const child = spawnOwned(node, [punkMain, 'up', '--manifests', dir, '--data', join(dir, '.punk/data'), '--port', '0'], {
    cwd: dir,
    env: { ...process.env, ...benchEnv },
  });
  const [, base] = await outputMatch(child, /Punk is ready in \d+ ms: (http:\/\/[^\s/]+)/, 120_000, 'punk up');
  const cpuPids = async () => [child.pid];
  return {
    pid: child.pid,
    paths: [
      httpPath('up-server-http', 'punk-up', '`punk up` /servers/eh/mcp, upstream over HTTP', 'http', `${base}/servers/eh/mcp`),
      httpPath('up-server-stdio', 'punk-up', '`punk up` /servers/es/mcp, upstream over stdio', 'stdio', `${base}/servers/es/mcp`),
      httpPath('up-mcp-http', 'punk-up', '`punk up` /mcp (eh__echo), upstream over HTTP', 'http', `${base}/mcp`, 'eh__'),
      httpPath('up-mcp-stdio', 'punk-up', '`punk up` /mcp (es__echo), upstream over stdio', 'stdio', `${base}/mcp`, 'es__'),
    ].map((path) => ({ ...path, cpuPids })),
    stop: async () => {
      await stopOwned(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `punk up --ephemeral` on the echo manifests: its stdio path, to hold against `--data` (`{ paths, pid, stop() }`). */
export async function startPunkUpEphemeral() {
  const dir = await echoManifestDir('bench-up-ephemeral', await freePort());
  const child = spawnOwned(node, [punkMain, 'up', '--manifests', dir, '--ephemeral', '--port', '0'], {
    cwd: dir,
    env: { ...process.env, ...benchEnv },
  });
  const [, base] = await outputMatch(child, /Punk is ready in \d+ ms: (http:\/\/[^\s/]+)/, 120_000, 'punk up --ephemeral');
  const path = httpPath(
    'up-ephemeral-stdio',
    'punk-up-ephemeral',
    '`punk up --ephemeral` /servers/es/mcp, upstream over stdio',
    'stdio',
    `${base}/servers/es/mcp`,
  );
  return {
    pid: child.pid,
    paths: [{ ...path, cpuPids: async () => [child.pid] }],
    stop: async () => {
      await stopOwned(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `PUNK_INSTANCE_ID` of process `pid` (a cluster service names its replica with it), or undefined. */
async function instanceOf(pid) {
  const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
  return environ
    .split('\0')
    .find((entry) => entry.startsWith('PUNK_INSTANCE_ID='))
    ?.slice('PUNK_INSTANCE_ID='.length);
}

/**
 * `punk cluster` on the echo manifests, with a nats-server and a Postgres database of its own (dropped at stop):
 * `{ paths, natsUrl, natsPid, pid, processes(), stop() }`; `pid` is `punk cluster`'s own (its proxy), `processes()`
 * lists each service replica as `{ name, pid }` (its main process: a gateway's watchdog and the servers it starts
 * are not counted). `options.natsArgs` go on nats-server's command line, `options.env` into every process's
 * environment (`NODE_OPTIONS`).
 */
export async function startCluster(options = {}) {
  const nats = await startNats(options.natsArgs);
  const db = await scratchDatabase();
  const dir = await echoManifestDir('bench-cluster', await freePort());
  await mkdir(join(dir, '.punk/data'), { recursive: true });
  const child = spawnOwned(node, [punkMain, 'cluster'], {
    cwd: dir,
    env: {
      ...process.env,
      ...benchEnv,
      PUNK_PORT: '0',
      PUNK_MANIFESTS: dir,
      PUNK_DATA_DIR: join(dir, '.punk/data'),
      PUNK_NATS_URL: nats.url,
      PUNK_DATABASE_URL: db.url,
      ...options.env,
    },
  });
  const stop = async () => {
    await stopOwned(child);
    await nats.stop();
    await db.drop();
    await rm(dir, { recursive: true, force: true });
  };
  const processes = async () => {
    const named = [];
    for (const pid of await childrenOf(child.pid)) {
      const name = await instanceOf(pid);
      if (name) named.push({ name, pid });
    }
    return named.sort((a, b) => a.name.localeCompare(b.name));
  };
  try {
    const [, base] = await outputMatch(child, /Punk cluster is ready in \d+ ms: (http:\/\/[^\s/]+)\//, 180_000, 'punk cluster');
    // Its services and its proxy; not nats-server, Postgres nor the upstreams.
    const cpuPids = async () => [child.pid, ...(await processes()).map((p) => p.pid)];
    return {
      natsUrl: nats.url,
      natsPid: nats.pid,
      pid: child.pid,
      paths: [
        httpPath('cluster-http', 'cluster', '`punk cluster` /servers/eh/mcp, upstream over HTTP', 'http', `${base}/servers/eh/mcp`),
        httpPath('cluster-stdio', 'cluster', '`punk cluster` /servers/es/mcp, upstream over stdio', 'stdio', `${base}/servers/es/mcp`),
      ].map((path) => ({ ...path, cpuPids })),
      processes,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** supergateway 4.0.0 (stdio to Streamable HTTP, `--stateful`: a child per 2025-era session) on the echo server over stdio. */
export async function startSupergateway() {
  const port = await freePort();
  const bin = join(root, 'node_modules/supergateway/dist/index.js');
  const stdio = `${JSON.stringify(node)} ${JSON.stringify(echoServer)} stdio`;
  const args = [bin, '--stdio', stdio, '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--logLevel', 'none'];
  const child = spawnOwned(node, args);
  await Promise.race([untilListening(port), child.exited.then(() => Promise.reject(new Error(`supergateway exited:\n${child.output}`)))]);
  return {
    paths: [
      {
        ...httpPath(
          'supergateway',
          'supergateway',
          'supergateway 4.0.0 --stateful, upstream over stdio',
          'stdio',
          `http://127.0.0.1:${port}/mcp`,
        ),
        cpuPids: async () => [child.pid],
      },
    ],
    stop: () => stopOwned(child, 10_000),
  };
}

/** mcp-proxy 6.7.19 (`--server stream`, its defaults otherwise) on the echo server over stdio. */
export async function startMcpProxy() {
  const port = await freePort();
  const bin = join(root, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs');
  const args = [bin, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', node, echoServer, 'stdio'];
  const child = spawnOwned(node, args);
  await Promise.race([untilListening(port), child.exited.then(() => Promise.reject(new Error(`mcp-proxy exited:\n${child.output}`)))]);
  return {
    paths: [
      {
        ...httpPath('mcp-proxy', 'mcp-proxy', 'mcp-proxy 6.7.19, upstream over stdio', 'stdio', `http://127.0.0.1:${port}/mcp`),
        cpuPids: async () => [child.pid],
      },
    ],
    stop: () => stopOwned(child, 10_000),
  };
}
