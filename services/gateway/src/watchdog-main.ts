/**
 * The watchdog process of the local server processes (watchdog.ts starts it): it reads `+<pgid>` and `-<pgid>`
 * lines on stdin, the process groups to kill and those already gone, and when stdin ends (the gateway's process
 * has exited, whatever killed it, SIGKILL included: the kernel closes the pipe) it kills every group still listed,
 * SIGTERM then SIGKILL after {@link GRACE_MS}, and exits. It ignores SIGINT, SIGTERM and SIGHUP (a terminal's
 * Ctrl-C reaches the gateway, which stops its servers itself); only the end of stdin stops it.
 */
import { createInterface } from 'node:readline';

/** How long the groups get between SIGTERM and SIGKILL, in milliseconds. */
const GRACE_MS = 2_000;

const groups = new Set<number>();

function signalGroups(signal: NodeJS.Signals): void {
  for (const pgid of groups) {
    try {
      process.kill(-pgid, signal);
    } catch {
      groups.delete(pgid); // ESRCH: nothing of it is left
    }
  }
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  const pgid = Number(line.slice(1));
  if (!Number.isInteger(pgid) || pgid <= 1) return;
  if (line.startsWith('+')) groups.add(pgid);
  else if (line.startsWith('-')) groups.delete(pgid);
});
lines.on('close', () => {
  signalGroups('SIGTERM');
  if (groups.size === 0) process.exit(0);
  setTimeout(() => {
    signalGroups('SIGKILL');
    process.exit(0);
  }, GRACE_MS);
});
