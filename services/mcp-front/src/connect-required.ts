/**
 * What a call to a server with `spec.auth.perUser` answers when its principal has no usable connection
 * (docs/identity.md): the gateway refuses it with `ConnectionRequired` (never connected, or must connect again) or,
 * once, `ConnectionRevoked` (the provider refused the refresh token). The client is pointed at the connect page,
 * `<public base>/ui/connect/<namespace>/<name>`:
 *
 * - a client that declared elicitation `url` mode (MCP 2025-11-25 client/elicitation; a 2026-07-28 client in its
 *   request's `_meta` capabilities) gets `URLElicitationRequiredError` (-32042) with one URL-mode elicitation;
 * - any other client gets a tool error (for `tools/call`) or a JSON-RPC error, naming the URL.
 */
import { randomUUID } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';

/** The PunkError codes of the gateway that mean "connect first". */
const CONNECT_CODES: ReadonlySet<string> = new Set(['ConnectionRequired', 'ConnectionRevoked']);

/** JSON-RPC error code of `URLElicitationRequiredError` (MCP 2025-11-25 client/elicitation). */
export const URL_ELICITATION_REQUIRED = -32042;

/** The connect page of server `namespace/name` under `publicUrl` (a path alone when there is no public URL). */
export function connectPageUrl(publicUrl: string | undefined, namespace: string, name: string): string {
  const base = publicUrl === undefined ? '' : publicUrl.replace(/\/+$/, '');
  return `${base}/ui/connect/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

/** Whether `capabilities` (a client's) declare URL-mode elicitation. */
function supportsUrlElicitation(capabilities: Record<string, unknown> | undefined): boolean {
  const elicitation = capabilities?.['elicitation'];
  return typeof elicitation === 'object' && elicitation !== null && 'url' in elicitation;
}

/**
 * The answer to a call the gateway refused for want of a connection, or undefined when `error` is another failure.
 * @returns a tool error result (a `tools/call` of a client without URL elicitation)
 * @throws ProtocolError -32042 (URL elicitation) or the refusal naming the URL.
 */
export function connectionAnswer(
  error: unknown,
  method: string,
  publicUrl: string | undefined,
  capabilities: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  if (!(error instanceof ProtocolError)) return undefined;
  const data = error.data as { code?: unknown; details?: { namespace?: unknown; server?: unknown } } | undefined;
  if (typeof data?.code !== 'string' || !CONNECT_CODES.has(data.code)) return undefined;
  const namespace = String(data.details?.namespace ?? '');
  const server = String(data.details?.server ?? '');
  const url = connectPageUrl(publicUrl, namespace, server);
  const message = `${error.message.replace(/^MCP error -?\d+: /, '')}: ${url}`;
  if (data.code === 'ConnectionRequired' && supportsUrlElicitation(capabilities)) {
    throw new ProtocolError(URL_ELICITATION_REQUIRED as ProtocolErrorCode, message, {
      elicitations: [{ mode: 'url', elicitationId: randomUUID(), url, message }],
    });
  }
  if (method === 'tools/call') return { content: [{ type: 'text', text: message }], isError: true };
  throw new ProtocolError(error.code, message, error.data);
}
