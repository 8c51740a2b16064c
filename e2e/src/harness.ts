import assert from 'node:assert/strict';
/**
 * Starts the real `punk up` (the process `npm start` runs) on a copy of the
 * example manifests, on free ports, and stops it. Tests talk to it over HTTP
 * with real MCP clients, as a user would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@punk/cli';

/** Repository root. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A running `punk up` (or `punk cluster`). */
export interface RunningPunk {
  baseUrl: string;
  manifestDir: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  process: ChildProcess;
  /** Sends SIGTERM and waits for the exit code. */
  stop(): Promise<number | null>;
}

/** A free TCP port on 127.0.0.1 (the CLI's own helper). */
export { freePort };

/**
 * The McpServer manifest `tally` (e2e/fixtures/tally.mjs, which writes each call it runs to `tallyFile`), with
 * `tools` (YAML) as its `spec.tools` when given: the fixture of tests that count what reached the upstream.
 */
export function tallyManifest(tallyFile: string, tools?: string): string {
  return `apiVersion: mcp.punk.dev/v1alpha1
kind: McpServer
metadata: { name: tally }
spec:
  command: [${JSON.stringify(process.execPath)}, ${JSON.stringify(join(repoRoot, 'e2e/fixtures/tally.mjs'))}]
  env: [{ name: TALLY_FILE, value: ${JSON.stringify(tallyFile)} }]
${tools === undefined ? '' : `  tools: ${tools}\n`}`;
}

/** A fresh temporary directory (`punk-<prefix>-…`) holding `files` (file name to text: McpServer manifests and what they use). */
export async function manifestDir(prefix: string, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `punk-${prefix}-`));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

/**
 * Copies `examples/` into a temporary directory (its HTTP server gets a free port from Punk), and adds `extra`
 * manifests (file name to YAML text).
 */
export async function exampleManifests(extra: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'punk-e2e-'));
  await cp(join(repoRoot, 'examples'), dir, { recursive: true });
  for (const [name, text] of Object.entries(extra)) await writeFile(join(dir, name), text);
  return dir;
}

/**
 * `punk cluster` on `manifestDir` over its own NATS and database (`natsUrl`, `databaseUrl`), with authentication on
 * and `bootstrapKey` as the platform admin's key: the start of the cluster tests that act through keys.
 */
export function startAuthCluster(manifestDir: string, natsUrl: string, databaseUrl: string, bootstrapKey: string): Promise<RunningPunk> {
  return startPunk({
    manifestDir,
    command: 'cluster',
    env: {
      PUNK_NATS_URL: natsUrl,
      PUNK_DATABASE_URL: databaseUrl,
      PUNK_AUTH_MODE: 'on',
      PUNK_PUBLIC_URL: 'https://punk.example.test',
      PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: bootstrapKey,
    },
    timeoutMs: 180_000,
  });
}

/**
 * Starts `node services/cli/dist/main.js up` and resolves once it printed its
 * ready line (every server started or failed), with `until: 'serving'` once it
 * serves while servers still start, with `until: 'spawned'` at once (`baseUrl` then empty). Rejects with the process output when it exits or times out first.
 * With `command: 'cluster'` it starts `punk cluster` on the manifests instead (give it `PUNK_NATS_URL` and
 * `PUNK_DATABASE_URL` in `env`; `args` and `until` do not apply) and resolves once the cluster is ready.
 */
export async function startPunk(options: {
  manifestDir: string;
  env?: Record<string, string>;
  args?: string[];
  timeoutMs?: number;
  until?: 'ready' | 'serving' | 'spawned';
  command?: 'up' | 'cluster';
}): Promise<RunningPunk> {
  const cluster = options.command === 'cluster';
  const line = cluster
    ? /Punk cluster is ready in \d+ ms: (http:\/\/[^\s/]+)\//
    : options.until === 'serving'
      ? /"serving (http:\/\/[^\s/]+)\/[^;]*; still starting/
      : /Punk is ready in \d+ ms: (http:\/\/[^\s/]+)\//;
  const child = spawn(
    process.execPath,
    [
      join(repoRoot, 'services/cli/dist/main.js'),
      ...(cluster ? ['cluster'] : ['up', '--manifests', options.manifestDir, '--port', '0', ...(options.args ?? ['--ephemeral'])]),
    ],
    {
      cwd: options.manifestDir,
      env: {
        ...process.env,
        PUNK_LOG_LEVEL: 'info',
        ...(cluster && { PUNK_PORT: '0', PUNK_MANIFESTS: options.manifestDir, PUNK_DATA_DIR: join(options.manifestDir, '.punk/data') }),
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const baseUrl = await new Promise<string>((resolveUrl, reject) => {
    if (options.until === 'spawned' && !cluster) {
      resolveUrl('');
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL'); // nothing waits for it any more
      reject(new Error(`punk ${cluster ? 'cluster' : 'up'} was not ready within ${String(options.timeoutMs ?? 90_000)} ms:\n${output}`));
    }, options.timeoutMs ?? 90_000);
    const onData = () => {
      const match = line.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`punk ${cluster ? 'cluster' : 'up'} exited with ${code} before it was ready:\n${output}`));
    });
  });
  return {
    baseUrl,
    manifestDir: options.manifestDir,
    output: () => output,
    process: child,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const code = await exited;
      return code;
    },
  };
}

/** Removes a temporary manifest directory. */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

/**
 * Retries `probe` until it returns a value that is not undefined, for at most
 * `timeoutMs`. The ledger writes just behind the stream acknowledgement, so a
 * read right after a call may need a moment.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 5_000): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** An answer of `GET /api/v1/ledger/verify` (docs/ledger.md), as far as the tests read it. */
export interface LedgerVerify {
  ok: boolean;
  events: number;
  complete: boolean;
  chainHead: { tenantSeq: number } | null;
  firstBroken?: { id?: string; runId?: string; tenantSeq: number; reason: string; message: string };
}

/**
 * Verifies a tenant's chain through `GET <baseUrl>/api/v1/ledger/verify` (`query` added, e.g. `?tenant=t`), asking
 * again while an answer is `ok` but not `complete`: each request has a time budget, which a loaded machine spends
 * before the end of a long chain, and the next request resumes where it stopped. The last answer (at most 100).
 */
export async function verifyLedger(baseUrl: string, query = ''): Promise<LedgerVerify> {
  for (let request = 1; ; request++) {
    const answer = (await (await fetch(`${baseUrl}/api/v1/ledger/verify${query}`)).json()) as LedgerVerify;
    if (!answer.ok || answer.complete || request === 100) return answer;
  }
}

/**
 * Creates an API key through `POST <baseUrl>/api/v1/api-keys` with `adminKey` (docs/authentication.md); `body` is
 * the key's `{ name, scopes?, groups?, tenant? }`. Fails the test unless the answer is 201.
 */
export async function createApiKey(baseUrl: string, adminKey: string, body: Record<string, unknown>): Promise<{ key: string; id: string }> {
  const created = await fetch(`${baseUrl}/api/v1/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(created.status, 201, await created.clone().text());
  return (await created.json()) as { key: string; id: string };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` (a local server's process runs and listens). */
export function listening(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
