/**
 * How failures behind mcp-front reach an MCP client: as JSON-RPC errors
 * (JSON-RPC 2.0 §5.1; MCP 2025-11-25 basic "Error Handling") with a sentence
 * that names the server and what was asked of it.
 *
 * | cause                                   | JSON-RPC code            |
 * |-----------------------------------------|--------------------------|
 * | already a `ProtocolError`               | its own code             |
 * | PunkError `UpstreamError`               | `details.mcpCode` when it is an integer, else -32603; `data` is the upstream's `details.data` when present |
 * | PunkError `BusTimeout`                  | -32001 (request timeout), naming the server, the deadline and its source |
 * | PunkError `GovernanceTimeout` / `GovernanceUnavailable` | -32001 / -32603, saying the request was not run because governance did not answer on its subject |
 * | other PunkError `…Timeout`              | -32001, the error's own message |
 * | PunkError `BusNoResponders`             | -32603, "no gateway is running" |
 * | PunkError `ServerBusy`                  | {@link SERVER_BUSY_CODE} (-32000), `data.retryAfterSeconds` saying when to retry (the gateway's queue was full or the wait ran out) |
 * | PunkError `…NotFound`, `Invalid…`       | -32602 (invalid params)  |
 * | any other PunkError (`PolicyDenied`, `ServerUnavailable`, …) | -32603, the error's own message |
 * | anything else                           | -32603 "internal error"  |
 *
 * Except where the upstream's own `data` is kept, `data` carries
 * `{ code, server, details }` (the PunkError code and details, which never
 * hold secret values by PunkError's contract).
 *
 * HTTP-level failures (bad session, bad headers) are written by
 * `sendJsonRpcError` as a JSON-RPC error body with `id: null`.
 */
import type { ServerResponse } from 'node:http';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { PunkError, errorMessage } from '@punk/lib';
import type { CallDeadline } from './deadline.js';

/**
 * JSON-RPC code of a request refused for load (a full queue, a limit per principal): an implementation-defined server
 * error (JSON-RPC 2.0 §5.1); `data.retryAfterSeconds` says when to retry. Answered with HTTP 429 and `Retry-After`
 * where Punk writes the HTTP response itself.
 */
export const SERVER_BUSY_CODE = -32000;

/** JSON-RPC code of a timed-out request (the SDK's and MCP's customary -32001). */
export const REQUEST_TIMEOUT_CODE = -32001;

/** What was being done when the error happened, for the message. */
export interface ErrorContext {
  /** MCP method (`tools/call`, `resources/read`, …). */
  method: string;
  /** Server the request went to, when known. */
  server?: string;
  /** Tool name, resource URI or prompt name as the client gave it. */
  target?: string;
  /** The call's deadline and where it comes from (deadline.ts). */
  deadline?: Pick<CallDeadline, 'ms' | 'source'>;
}

/** Maps any thrown value to the `ProtocolError` the SDK sends as the JSON-RPC error of the request. */
export function toProtocolError(error: unknown, context: ErrorContext): ProtocolError {
  if (error instanceof ProtocolError) return error;
  const what = `${context.method}${context.target ? ` ${context.target}` : ''}`;
  const where = context.server ? `server "${context.server}"` : 'the gateway';
  if (error instanceof PunkError) {
    const data = { code: error.code, ...(context.server && { server: context.server }), ...(error.details && { details: error.details }) };
    if (error.code === 'UpstreamError') {
      const mcpCode = error.details?.['mcpCode'];
      const code = typeof mcpCode === 'number' && Number.isInteger(mcpCode) ? mcpCode : ProtocolErrorCode.InternalError;
      const upstreamData = error.details?.['data'];
      return new ProtocolError(code, error.message, upstreamData ?? data);
    }
    if (error.code === 'BusTimeout') {
      const within = context.deadline ? ` within ${String(context.deadline.ms)} ms (${context.deadline.source})` : '';
      return new ProtocolError(REQUEST_TIMEOUT_CODE, `${where} did not answer ${what}${within}`, data);
    }
    if (error.code === 'GovernanceTimeout' || error.code === 'GovernanceUnavailable') {
      // Governance, not the gateway or the server, failed to answer: say so, and that nothing ran.
      const code = error.code === 'GovernanceTimeout' ? REQUEST_TIMEOUT_CODE : ProtocolErrorCode.InternalError;
      return new ProtocolError(code, `${what} on ${where} was not run: ${error.message}`, data);
    }
    if (error.code.endsWith('Timeout')) return new ProtocolError(REQUEST_TIMEOUT_CODE, error.message, data);
    if (error.code === 'BusNoResponders') {
      return new ProtocolError(ProtocolErrorCode.InternalError, `no gateway is running to reach ${where} for ${what}`, data);
    }
    if (error.code === 'ServerBusy') {
      // A transient refusal: the JSON-RPC error says when to retry, as Retry-After would (RFC 9110 §10.2.3).
      const retryAfterSeconds = error.details?.['retryAfterSeconds'];
      return new ProtocolError(SERVER_BUSY_CODE, error.message, {
        ...data,
        ...(typeof retryAfterSeconds === 'number' && { retryAfterSeconds }),
      });
    }
    if (error.code.endsWith('NotFound') || error.code.startsWith('Invalid')) {
      return new ProtocolError(ProtocolErrorCode.InvalidParams, error.message, data);
    }
    return new ProtocolError(ProtocolErrorCode.InternalError, error.message, data);
  }
  return new ProtocolError(ProtocolErrorCode.InternalError, `internal error in mcp-front during ${what}: ${errorMessage(error)}`);
}

/** JSON-RPC code of a header that disagrees with the body (MCP 2026-07-28 basic/transports/streamable-http "Server Validation"; HTTP 400). */
export const HEADER_MISMATCH_CODE = -32020;

/** Why a request header does not fit the body: the -32020 error's message and its `data.mismatch`. */
export interface HeaderMismatch {
  /** What disagrees, for people (the error message after `Bad Request: `). */
  message: string;
  /**
   * `data.mismatch`: the header's name, its value as sent (null when absent), the body field it mirrors
   * (`params.name`, `arguments.region`, …) and that field's value.
   */
  mismatch: { name: string; header: string | null; field: string; body: unknown };
}

/** JSON-RPC code the SDK and MCP clients use for an unknown session (answered with HTTP 404). */
export const SESSION_NOT_FOUND_CODE = -32001;

/** Writes a JSON-RPC error response with a null id (JSON-RPC 2.0 §5); `data`, when given, becomes `error.data`. */
export function sendJsonRpcError(
  res: ServerResponse,
  status: number,
  code: number,
  message: string,
  extraHeaders: Record<string, string> = {},
  data?: unknown,
  id: string | number | null = null,
): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message, ...(data !== undefined && { data }) }, id });
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body).toString(), ...extraHeaders });
  res.end(body);
}
