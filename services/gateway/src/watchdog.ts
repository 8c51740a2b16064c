/**
 * Nothing a gateway starts outlives its process: each local server process group is listed with one watchdog
 * process per gateway process (watchdog-main.ts), which kills the groups still listed once the gateway's process
 * is gone, however it ended (SIGKILL included). The watchdog runs while there are groups to guard, is
 * detached (its own process group, so a terminal's Ctrl-C does not reach it) and does not keep the gateway's
 * process alive.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';

type Watchdog = ChildProcessByStdio<Writable, null, null>;

let watchdog: Watchdog | undefined;
/** The groups listed now: a watchdog started again (the last one was killed) gets them all. */
const guarded = new Set<number>();

function started(): Watchdog {
  if (watchdog && watchdog.exitCode === null && watchdog.signalCode === null) return watchdog;
  const child = spawn(process.execPath, [fileURLToPath(new URL('./watchdog-main.js', import.meta.url))], {
    stdio: ['pipe', 'ignore', 'inherit'],
    detached: true,
  });
  child.unref();
  // The pipe is a socket: unreferenced, it does not keep this process alive either.
  (child.stdin as Writable & { unref?: () => void }).unref?.();
  // A watchdog that died (killed by hand) is started again for the next group; a write to it then must not throw.
  child.stdin.on('error', () => undefined);
  child.on('error', () => undefined);
  watchdog = child;
  for (const pgid of guarded) child.stdin.write(`+${String(pgid)}\n`);
  return child;
}

/** Lists process group `pgid` with the watchdog: it is killed if this process ends before {@link releaseGroup}. */
export function guardGroup(pgid: number): void {
  const running = started();
  guarded.add(pgid);
  running.stdin.write(`+${String(pgid)}\n`);
}

/** Takes process group `pgid` off the watchdog's list (it has been stopped). */
export function releaseGroup(pgid: number): void {
  guarded.delete(pgid);
  if (!watchdog) return;
  watchdog.stdin.write(`-${String(pgid)}\n`);
  if (guarded.size > 0) return;
  // Nothing left to guard: the watchdog exits at the end of its stdin, and the next group starts a new one.
  watchdog.stdin.end();
  watchdog = undefined;
}
