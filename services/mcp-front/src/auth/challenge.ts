/**
 * How a refused caller is told why: the RFC 6750 §3 `WWW-Authenticate: Bearer` challenge with the
 * RFC 9728 §5.1 `resource_metadata` parameter (MCP 2025-11-25 basic/authorization "Authorization Server
 * Discovery"), and the status of each refusal:
 *
 * | refusal              | status | challenge `error`     |
 * |----------------------|--------|-----------------------|
 * | no bearer token      | 401    | none (RFC 6750 §3.1)  |
 * | bad token            | 401    | `invalid_token`       |
 * | malformed request    | 400    | `invalid_request`     |
 * | missing scope        | 403    | `insufficient_scope`  |
 * | another tenant       | 403    | none                  |
 * | admin, other tenant  | 403    | `insufficient_scope`  |
 * | verifier unreachable | 503    | no challenge          |
 */
import type { ServerResponse } from 'node:http';
import { sendJsonRpcError } from '../errors.js';

/** Why a request is refused; `status` and `error` follow the table above. */
export interface Refusal {
  status: 400 | 401 | 403 | 503;
  /** RFC 6750 §3.1 error code, when the challenge carries one. */
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  /** A sentence for people: what was wrong with the credential. */
  message: string;
  /** Scopes the challenge names (the required ones for `insufficient_scope`). */
  scopes?: readonly string[];
}

/** Characters RFC 6750 §3 allows inside `error_description` and `scope`: printable ASCII but `"` and `\`. */
function quotable(text: string): string {
  return text.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, ' ');
}

/**
 * The `WWW-Authenticate` value of a refusal, or undefined for refusals that carry none (503).
 * @param resourceMetadata URL of the endpoint's RFC 9728 protected resource metadata.
 */
export function challengeOf(refusal: Refusal, resourceMetadata: string): string | undefined {
  if (refusal.status === 503) return undefined;
  const params = [`resource_metadata="${quotable(resourceMetadata)}"`];
  if (refusal.scopes && refusal.scopes.length > 0) params.push(`scope="${quotable(refusal.scopes.join(' '))}"`);
  if (refusal.error) params.push(`error="${refusal.error}"`, `error_description="${quotable(refusal.message)}"`);
  return `Bearer ${params.join(', ')}`;
}

/** Answers an MCP endpoint request with a refusal: the status, the challenge, and a JSON-RPC error body (`id: null`). */
export function sendMcpRefusal(res: ServerResponse, refusal: Refusal, resourceMetadata: string): void {
  const challenge = challengeOf(refusal, resourceMetadata);
  sendJsonRpcError(res, refusal.status, -32000, refusal.message, challenge ? { 'WWW-Authenticate': challenge } : {});
}
