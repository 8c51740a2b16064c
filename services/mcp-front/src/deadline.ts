/**
 * The deadline of one call the front forwards to a server (design: "Request/reply always carries a
 * deadline"). A server's `spec.timeout` is the call's deadline end to end: the gateway bounds its call to
 * the server with it and answers the timeout itself (a tool error naming it), so the front waits that
 * long plus {@link GATEWAY_ANSWER_GRACE_MS} for the gateway's answer. `PUNK_TOOL_TIMEOUTS` names deadlines
 * of single tools that only the front enforces; every other call waits `PUNK_CALL_TIMEOUT_MS`, which is
 * also the gateway's default for servers without `spec.timeout`. A call to a server still `starting` waits for
 * the start at the gateway, so the front waits the server's start budget longer; a call to a server asleep
 * (`spec.idle`, scaled to zero) waits at the gateway for its wake and then its start, so the front waits both longer
 * (the call's own deadline, `ms`, starts after them at the gateway).
 */
import { deadlines, type CallDeadline, type ServerCatalog } from '@punk/lib';

/**
 * How much longer than a server's `spec.timeout` the front waits for the gateway's answer: the gateway asks
 * governance before it calls the server, and writes the ledger after.
 */
export const GATEWAY_ANSWER_GRACE_MS = deadlines.governanceCheckMs + 1_000;

/** The deadline of one forwarded call (lib `callDeadlineSchema`: it goes to the gateway with the call). */
export type { CallDeadline };

/** The front's own deadlines: `PUNK_CALL_TIMEOUT_MS` and `PUNK_TOOL_TIMEOUTS`. */
export interface DeadlineDefaults {
  /** Deadline of a call to a server without `spec.timeout`, in milliseconds. */
  callTimeoutMs: number;
  /** Deadlines of single tools by namespaced name (`server__tool`), in milliseconds. */
  toolTimeouts: Record<string, number>;
}

/**
 * The deadline of a call to `server` (its catalog entry, when the catalog has one), for the tool named
 * `tool` (namespaced) when it is a `tools/call`: the tool's `PUNK_TOOL_TIMEOUTS` entry, else the server's
 * `spec.timeout`, else `PUNK_CALL_TIMEOUT_MS`.
 */
export function callDeadline(defaults: DeadlineDefaults, server: ServerCatalog | undefined, tool?: string): CallDeadline {
  const waking = server?.wakeTimeoutMs;
  const start = server?.state === 'starting' || waking !== undefined ? (server?.startTimeoutMs ?? 0) + (waking ?? 0) : 0;
  const toolMs = tool === undefined ? undefined : defaults.toolTimeouts[tool];
  if (tool !== undefined && toolMs !== undefined) return { ms: toolMs, source: `PUNK_TOOL_TIMEOUTS for ${tool}`, waitMs: toolMs + start };
  if (server?.timeoutMs !== undefined) {
    return { ms: server.timeoutMs, source: "the server's spec.timeout", waitMs: server.timeoutMs + GATEWAY_ANSWER_GRACE_MS + start };
  }
  return {
    ms: defaults.callTimeoutMs,
    source: 'PUNK_CALL_TIMEOUT_MS, the server sets no spec.timeout',
    waitMs: defaults.callTimeoutMs + start,
  };
}
