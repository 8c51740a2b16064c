/**
 * Starts Punk's service entrypoints (`node services/<name>/dist/main.js`) as
 * separate OS processes, as the cluster and Kubernetes run them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { freePort, repoRoot } from './harness.js';

/** A running service process. */
export interface ServiceProcess {
  name: string;
  /** `http://127.0.0.1:<port>`: `/healthz`, `/readyz`, its routes. */
  url: string;
  process: ChildProcess;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** Sends `signal` (default SIGTERM) and waits for the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Status of `GET /readyz`: 200 ready, 503 not, 0 when nothing answers. */
export async function readyStatus(url: string): Promise<number> {
  try {
    const res = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    return res.status;
  } catch {
    return 0;
  }
}

/** Polls `/readyz` until it answers `status`, or throws after `timeoutMs` with `what` in the message. */
export async function waitForReady(url: string, status: number, timeoutMs: number, what = url): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await readyStatus(url)) === status) return;
    if (Date.now() > deadline) throw new Error(`${what}: /readyz did not answer ${status} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Spawns `services/<name>/dist/main.js` on a free port with `env` added to
 * this environment, and resolves once `/readyz` answers 200 (rejects with its
 * output when it exits or is not ready within 60 s).
 */
export async function startService(
  name: 'gateway' | 'governance' | 'ledger' | 'mcp-front',
  env: Record<string, string>,
  options: { waitReady?: boolean } = {},
): Promise<ServiceProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(repoRoot, 'services', name, 'dist', 'main.js')], {
    env: { ...process.env, PUNK_LOG_LEVEL: 'info', PUNK_HOST: '127.0.0.1', PUNK_PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const url = `http://127.0.0.1:${port}`;
  const service: ServiceProcess = {
    name,
    url,
    process: child,
    output: () => output,
    exited,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  if (options.waitReady ?? true) {
    const early = exited.then((code) => {
      throw new Error(`${name} exited with ${code} before it was ready:\n${output}`);
    });
    await Promise.race([waitForReady(url, 200, 60_000, name), early]).catch(async (error: unknown) => {
      await service.stop('SIGKILL');
      throw new Error(`${(error as Error).message}\n${output}`);
    });
    early.catch(() => undefined);
  }
  return service;
}
