/**
 * Test helpers: the built `punk-bridge` run as a real child process (`node dist/main.js ...`) on a free port,
 * its JSON log lines kept, and the stdio MCP servers it can serve (the reference servers of the repository's
 * root dependencies, and this package's fixture).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport, type ClientOptions } from '@modelcontextprotocol/client';

/** `dist/main.js` of this package. */
export const MAIN = fileURLToPath(new URL('../main.js', import.meta.url));
/** How the tests run punk-bridge: the built dist/main.js with this Node. */
export const NODE_BRIDGE = [process.execPath, MAIN];
/** The single executable that `npm run build:sea` makes (absent unless it was built). */
export const SEA_BINARY = fileURLToPath(new URL('../../dist-sea/punk-bridge', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
/** server-everything over stdio, as examples/everything.yaml runs it. */
export const EVERYTHING = [process.execPath, join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'];
/** server-memory over stdio, as examples/memory.yaml runs it (MEMORY_FILE_PATH says where its file is). */
export const MEMORY = [process.execPath, join(ROOT, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')];
/** This package's fixture server (fixtures/tools-server.ts): pid, env, crash, fetch. */
export const FIXTURE = [process.execPath, fileURLToPath(new URL('./fixtures/tools-server.js', import.meta.url))];

/** How a process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running `punk-bridge` process. */
export interface BridgeProcess {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** Every log line, parsed. */
  logs: Record<string, unknown>[];
  child: ChildProcess;
  exited: Promise<Exit>;
  /** Resolves with the first log line that `match` accepts (already logged or still to come). */
  waitForLog(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** SIGTERM, then the exit. */
  stop(): Promise<Exit>;
}

/** Runs `program <args>` (`node dist/main.js` by default) and resolves once it logged `ready` (its URL), or rejects with what it said. */
export async function runPunkBridge(
  args: string[],
  ready: string,
  env: NodeJS.ProcessEnv = {},
  program: string[] = NODE_BRIDGE,
): Promise<BridgeProcess> {
  const child = spawn(program[0]!, [...program.slice(1), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const logs: Record<string, unknown>[] = [];
  const waiters: { match: (line: Record<string, unknown>) => boolean; resolve: (line: Record<string, unknown>) => void }[] = [];
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  createInterface({ input: child.stderr }).on('line', (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      line = { msg: text, unparsed: true };
    }
    logs.push(line);
    for (const waiter of [...waiters])
      if (waiter.match(line)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(line);
      }
  });
  const waitForLog = (match: (line: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const seen = logs.find(match);
      if (seen) {
        resolve(seen);
        return;
      }
      waiters.push({ match, resolve });
    });
  const listening = await Promise.race([waitForLog((line) => line.msg === ready), exited]);
  if (!('msg' in listening))
    throw new Error(
      `punk-bridge ${args.join(' ')} exited (${JSON.stringify(listening)}) before it was ready:\n${logs.map((l) => JSON.stringify(l)).join('\n')}`,
    );
  const url = new URL(String(listening.url)).origin;
  return {
    url,
    logs,
    child,
    exited,
    waitForLog,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Runs `punk-bridge serve` on 127.0.0.1 and a free port with `flags`, serving `command`. */
export function runBridge(
  command: string[],
  flags: string[] = [],
  env: NodeJS.ProcessEnv = {},
  program: string[] = NODE_BRIDGE,
): Promise<BridgeProcess> {
  return runPunkBridge(['serve', '--host', '127.0.0.1', '--port', '0', ...flags, '--', ...command], 'bridge listening', env, program);
}

/** Runs `punk-bridge egress-proxy` on 127.0.0.1 and a free port with `flags`. */
export function runEgressProxy(flags: string[], program: string[] = NODE_BRIDGE): Promise<BridgeProcess> {
  return runPunkBridge(['egress-proxy', '--host', '127.0.0.1', '--port', '0', ...flags], 'egress proxy listening', {}, program);
}

/** Runs `program <args>` (`node dist/main.js` by default) to its end (for commands that fail at once). */
export async function runToExit(args: string[], program: string[] = NODE_BRIDGE): Promise<Exit & { stdout: string; stderr: string }> {
  const child = spawn(program[0]!, [...program.slice(1), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const exit = await new Promise<Exit>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  return { ...exit, stdout, stderr };
}

/** An SDK client connected to the bridge's MCP endpoint; `transport` can end the session (DELETE). */
export async function connectClient(
  bridge: { url: string },
  options: ClientOptions = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'bridge-test', version: '1.0.0' }, options);
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', bridge.url));
  await client.connect(transport);
  return { client, transport };
}

/** The text of the first content block of a tool result. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content[0]?.text ?? '';
}

/** Whether a process with that id still runs. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every 50 ms until it is true (a condition to reach, not a timing assertion). */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, limitMs = 15_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`never happened: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A self-signed certificate for `localhost` and 127.0.0.1 made with openssl, or undefined when openssl is missing. */
export function selfSignedCertificate(): { key: string; cert: string; certPath: string; dispose(): void } | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'punk-bridge-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  const read = (name: string) => readFileSync(join(dir, name), 'utf8');
  return {
    key: read('key.pem'),
    cert: read('cert.pem'),
    certPath: join(dir, 'cert.pem'),
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}
