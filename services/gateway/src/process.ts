/**
 * One local server process: spawned with its launch plan in its own process
 * group, stderr (and, for HTTP servers, stdout) forwarded to the log line by
 * line with the plan's secret values redacted, the last lines kept (redacted)
 * for error messages, and a stop that leaves nothing running. The group is listed with the watchdog
 * (watchdog.ts) while it runs, so it dies with this process however this process ends; when the server's
 * process ends on its own, what it left running in its group is killed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '@punk/lib';
import type { LaunchPlan } from './launch.js';
import { redact } from './redact.js';
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

/** A running (or ended) server process. */
export class ServerProcess {
  /** Resolves once the process has ended, or could not start. Never rejects. */
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;
  private readonly tail: string[] = [];
  private exit: ProcessExit | undefined;

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
    this.exited = new Promise((resolve) => {
      this.child.once('error', (error) => {
        if (this.child.pid === undefined) {
          this.exit = { code: null, signal: null, error };
          resolve(this.exit);
        }
      });
      this.child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        this.signal('SIGKILL'); // descendants left in the group: nothing of a server outlives its process
        if (pid !== undefined) releaseGroup(pid);
        resolve(this.exit);
      });
    });
    const forward = (stream: Readable | null, name: string) => {
      if (!stream) return;
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (output) => {
        // A server may print its environment (credentials included): nothing it writes is kept or logged as is.
        const line = redact(output, plan.secrets);
        this.tail.push(line);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
        log.info({ server, pid: this.child.pid, stream: name }, line);
      });
    };
    forward(this.child.stderr, 'stderr');
    if (!options.stdio) forward(this.child.stdout, 'stdout');
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
   * `exited with code 1; stderr: …`, or `command "x" was not found (ENOENT)`.
   */
  describeExit(exit: ProcessExit): string {
    if (exit.error) {
      if (exit.error.code === 'ENOENT') return `command "${this.plan.command}" was not found (ENOENT)`;
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
