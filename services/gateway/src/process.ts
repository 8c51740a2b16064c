/**
 * One local server process: spawned with its launch plan in its own process group, stderr (at info) and, for HTTP
 * servers, stdout (at debug: often a line per request) forwarded to the log line by line with the plan's secret
 * values redacted, the last lines of both kept (redacted) for error messages, and a stop that leaves nothing
 * running. The group is listed with the watchdog (watchdog.ts) while it runs, so it dies with this process however
 * this process ends; when the server's process ends on its own, what it left running in its group is killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { isAbsolute } from 'node:path';
import { redact, type Logger } from '@punk/lib';
import type { LaunchPlan } from './launch.js';
import { guardGroup, releaseGroup } from './watchdog.js';

/** How a process ended: exit code or signal, or the spawn error (ENOENT…). */
export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all. */
  error?: NodeJS.ErrnoException;
}

/** Lines of stderr kept for error messages. */
const TAIL_LINES = 20;
/** How long an exit waits for the last lines of stderr, in ms. */
const STDERR_DRAIN_MS = 500;

/** A running (or ended) server process. */
export class ServerProcess {
  /** Resolves once the process has ended, or could not start. Never rejects. */
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;
  private readonly tail: string[] = [];
  private exit: ProcessExit | undefined;
  private readonly exitListeners = new Set<(exit: ProcessExit) => void>();

  /**
   * Spawns the process. With `stdio: true` its stdin and stdout carry MCP
   * messages; otherwise stdout is logged like stderr.
   */
  constructor(
    readonly plan: LaunchPlan,
    options: { log: Logger; server: string; stdio: boolean },
  ) {
    const { log, server } = options;
    this.child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      env: plan.env,
      stdio: [options.stdio ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
      shell: false,
    });
    const pid = this.child.pid;
    if (pid !== undefined) guardGroup(pid);
    let stderrRead: Promise<void> = Promise.resolve();
    this.exited = new Promise((resolve) => {
      const ended = (exit: ProcessExit) => {
        this.exit = exit;
        resolve(exit);
        for (const listener of this.exitListeners) listener(exit);
        this.exitListeners.clear();
      };
      this.child.once('error', (error) => {
        if (this.child.pid === undefined) ended({ code: null, signal: null, error });
      });
      this.child.once('exit', (code, signal) => {
        this.signal('SIGKILL'); // descendants left in the group: nothing of a server outlives its process
        if (pid !== undefined) releaseGroup(pid);
        // 'exit' may come before the last lines of stderr are read: the exit's description quotes them, so wait for
        // them a moment (not for ever: a pipe inherited by something outside the group would keep it open).
        void Promise.race([stderrRead, new Promise((resolve) => setTimeout(resolve, STDERR_DRAIN_MS))]).then(() => ended({ code, signal }));
      });
    });
    const forward = (stream: Readable | null, name: string) => {
      if (!stream) return;
      const lines = createInterface({ input: stream, crlfDelay: Infinity });
      if (name === 'stderr') stderrRead = new Promise((resolve) => lines.once('close', () => resolve()));
      lines.on('line', (output) => {
        // A server may print its environment (credentials included): nothing it writes is kept or logged as is.
        const line = redact(output, plan.secrets);
        this.tail.push(line);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
        // An HTTP server's stdout is its chatter, often a line per request (server-everything's "Received MCP POST
        // request"): debug, so it does not flood punk up's output; stderr is where servers report, at info.
        (name === 'stdout' ? log.debug : log.info).call(log, { server, pid: this.child.pid, stream: name }, line);
      });
    };
    forward(this.child.stderr, 'stderr');
    if (!options.stdio) forward(this.child.stdout, 'stdout');
  }

  /**
   * Calls `listener` once the process has ended (in a microtask when it already has) and returns what stops
   * listening. For waits that usually end some other way, such as one call: a `.then` on {@link exited} instead
   * would keep its closure, and what that holds, until the process ends.
   */
  onExit(listener: (exit: ProcessExit) => void): () => void {
    const exit = this.exit;
    if (exit) {
      queueMicrotask(() => listener(exit));
      return () => undefined;
    }
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  /** Process id, undefined when the spawn failed. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The child's stdin (stdio servers). */
  get stdin(): Writable | null {
    return this.child.stdin;
  }

  /** The child's stdout (stdio servers). */
  get stdout(): Readable | null {
    return this.child.stdout;
  }

  /** How the process ended, once it has. */
  get exitInfo(): ProcessExit | undefined {
    return this.exit;
  }

  /** The last lines the process wrote to stderr, its plan's secret values redacted. */
  stderrTail(lines = 5): string[] {
    return this.tail.slice(-lines);
  }

  /**
   * A sentence saying how the process ended, with the last stderr lines:
   * `exited with code 1; stderr: …`, or `command "x" was not found (ENOENT) on PATH` (or in the server's working
   * directory, for a relative path).
   */
  describeExit(exit: ProcessExit): string {
    if (exit.error) {
      if (exit.error.code === 'ENOENT')
        return `command "${this.plan.command}" was not found (ENOENT)${whereLooked(this.plan.command, this.plan.cwd)}`;
      return `command "${this.plan.command}" could not start: ${exit.error.message}`;
    }
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
    const tail = this.stderrTail();
    return tail.length > 0 ? `${how}; stderr: ${tail.join(' | ')}` : how;
  }

  /** Stops the process group: SIGTERM, then SIGKILL after `graceMs`. Resolves once it has exited. */
  async stop(graceMs = 2000): Promise<void> {
    if (this.exit || this.child.pid === undefined) return;
    this.child.stdin?.end();
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  private signal(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      try {
        this.child.kill(signal);
      } catch {
        /* already gone */
      }
    }
  }
}

/** Where a command that was not found was looked for: a bare name on PATH, a relative path from the working directory. */
function whereLooked(command: string, cwd: string): string {
  if (isAbsolute(command)) return '';
  if (!command.includes('/') && !command.includes('\\')) return ' on PATH';
  return ` in the server's working directory ${cwd} (a relative command is found from there): give an absolute path`;
}
