import module from 'node:module';

/**
 * The V8 flags `punk` and the services `punk cluster` starts run with (measured on a 2-core machine with
 * /proc/<pid>/smaps and `npm run bench`; an idle `punk up` went from about 290 to 210 MiB resident):
 * - `--max-semi-space-size=8` (MiB): V8 grows the young generation with the allocation rate, to 128 MiB under
 *   calls, and never gives it back (an embedded database of 8,000 transactions: 340 MiB resident by default,
 *   270 MiB with 8, at the same CPU time per transaction);
 * - `--liftoff-only`: PGlite's WebAssembly stays in V8's baseline compiler; optimising its hot functions kept
 *   about 45 MiB more resident at idle (and 70 to 90 MiB under load) for no measurable gain per transaction.
 * Neither can be set once the process runs, hence `relaunchWithNodeFlags`.
 */
export const NODE_FLAGS = ['--max-semi-space-size=8', '--liftoff-only'];

/**
 * glibc's malloc settings of the relaunched process (`GLIBC_TUNABLES`, read only when a process starts; other C
 * libraries ignore it): a fixed 128 KiB threshold for trimming the top of the heap and for serving an allocation
 * with its own mapping, instead of thresholds that grow with the largest block freed (up to 32 MiB), which kept the
 * start's peak (module sources, compile cache, PGlite's start) resident: an idle `punk up` held about 12 MiB less.
 * A `GLIBC_TUNABLES` already in the environment is left as it is.
 */
export const MALLOC_TUNABLES = 'glibc.malloc.trim_threshold=131072:glibc.malloc.mmap_threshold=131072';

/**
 * Replaces this process (same pid, `process.execve`) by the same command with `NODE_FLAGS` first, unless it runs
 * with them already or `process.execve` is missing (Windows, Node before 23.11): then it returns and the process
 * runs on V8's defaults. Node's compile cache, when enabled in this process, stays enabled in the new image; the new
 * image gets `MALLOC_TUNABLES` unless the environment sets `GLIBC_TUNABLES`.
 */
export function relaunchWithNodeFlags(): void {
  if (NODE_FLAGS.every((flag) => process.execArgv.includes(flag)) || typeof process.execve !== 'function') return;
  const cache = module.getCompileCacheDir?.();
  process.execve(process.execPath, [process.execPath, ...NODE_FLAGS, ...process.execArgv, ...process.argv.slice(1)], {
    GLIBC_TUNABLES: MALLOC_TUNABLES,
    ...process.env,
    ...(cache && { NODE_COMPILE_CACHE: cache }),
  });
}
