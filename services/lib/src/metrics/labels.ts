/**
 * Label values and bucket boundaries shared by the metrics of every Punk package, so that the same thing has the
 * same name everywhere (OpenTelemetry semantic conventions, gen-ai/mcp.md "Metrics", as Prometheus names them).
 */
import { PunkError } from '../errors.js';

/**
 * Bucket boundaries of MCP operation durations, in seconds: the `ExplicitBucketBoundaries` the OpenTelemetry MCP
 * semantic conventions give `mcp.server.operation.duration` and `mcp.client.operation.duration`.
 */
export const MCP_DURATION_BUCKETS: readonly number[] = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

/** Bucket boundaries of short internal operations (bus requests, policy checks, ledger appends), in seconds: 1 ms to 10 s. */
export const FAST_BUCKETS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * The `error_type` value of a success: empty, which Prometheus treats as an absent label (semantic conventions:
 * `error.type` is set if and only if the operation failed).
 */
export const NO_ERROR = '';

/** The semantic conventions' fallback value (`_OTHER`) of a label whose real value is unknown or unbounded. */
export const OTHER = '_OTHER';

/**
 * The `error_type` of a thrown value: a PunkError's code (a bounded set: errors.ts and the services' own codes),
 * else `_OTHER`.
 */
export function errorTypeOf(error: unknown): string {
  return error instanceof PunkError ? error.code : OTHER;
}

/** Seconds elapsed since `startedAt`, a `performance.now()` reading. */
export function secondsSince(startedAt: number): number {
  return (performance.now() - startedAt) / 1000;
}
