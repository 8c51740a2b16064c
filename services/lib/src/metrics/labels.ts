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

/**
 * The `error_type` of a JSON-RPC error code an upstream or the SDK answered: the code itself when JSON-RPC 2.0
 * defines or reserves it (section 5.1: -32700, -32600 to -32603, and the implementation-defined server errors
 * -32099 to -32000, where MCP's own codes lie), else `_OTHER`, so a server answering arbitrary codes cannot
 * create unbounded series.
 */
export function jsonRpcErrorTypeOf(code: unknown): string {
  if (typeof code !== 'number' || !Number.isInteger(code)) return OTHER;
  const defined = code === -32700 || (code >= -32603 && code <= -32600) || (code >= -32099 && code <= -32000);
  return defined ? String(code) : OTHER;
}

/** Seconds elapsed since `startedAt`, a `performance.now()` reading. */
export function secondsSince(startedAt: number): number {
  return (performance.now() - startedAt) / 1000;
}
