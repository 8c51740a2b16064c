/**
 * The standard request headers of a 2026-07-28 request, checked against its body (MCP 2026-07-28
 * basic/transports/streamable-http "Standard Request Headers" and "Server Validation", SEP-2243):
 * `MCP-Protocol-Version` mirrors `_meta["io.modelcontextprotocol/protocolVersion"]`, `Mcp-Method` the method, and
 * `Mcp-Name` the `params.name` / `params.uri` / `params.taskId` of the methods that carry one. A request whose header
 * is absent or disagrees is answered 400 with -32020 `HeaderMismatch`.
 *
 * The SDK's `createMcpHandler` checks the same, but its `data.mismatch.body` repeats the message instead of the
 * body's value; mcp-front checks first so that `data.mismatch` carries both values (errors.ts `HeaderMismatch`).
 */
import type { IncomingMessage } from 'node:http';
import { PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server';
import type { HeaderMismatch } from './errors.js';
import { headerOf } from './get-stream.js';
import { MODERN_PROTOCOL_VERSIONS } from './http.js';
import { decodeHeaderValue } from './param-headers.js';

/**
 * The body field `Mcp-Name` mirrors, by method (SEP-2243 "Required For"; `tasks/*` from SEP-2663's Streamable HTTP
 * binding), as the SDK's own table has it.
 */
const MCP_NAME_SOURCE: Readonly<Record<string, 'name' | 'uri' | 'taskId'>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

const VERSION_FIELD = `params._meta["${PROTOCOL_VERSION_META_KEY}"]`;

/**
 * Checks the standard headers of one 2026-07-28 request (a body with an `id`; notifications are exempt, as the spec
 * requires the headers of requests only).
 * @returns the mismatch (for the -32020 error), or undefined when the headers fit the body, or when the body claims
 *   no 2026-07-28 envelope (the SDK answers those: a missing envelope, an unsupported version).
 */
export function standardHeaderMismatch(req: IncomingMessage, body: unknown): HeaderMismatch | undefined {
  const { id, method, params } = body as { id?: unknown; method?: unknown; params?: Record<string, unknown> };
  if (id === undefined || typeof method !== 'string') return undefined;
  const claimed = (params?.['_meta'] as Record<string, unknown> | undefined)?.[PROTOCOL_VERSION_META_KEY];
  const version = headerOf(req, 'mcp-protocol-version');
  if (typeof claimed === 'string' && version !== undefined && version !== claimed)
    return mismatch('MCP-Protocol-Version', version, VERSION_FIELD, claimed);
  if (!(MODERN_PROTOCOL_VERSIONS as readonly unknown[]).includes(claimed)) return undefined;
  if (version === undefined) return mismatch('MCP-Protocol-Version', null, VERSION_FIELD, claimed);
  const methodHeader = headerOf(req, 'mcp-method');
  if (methodHeader !== method) return mismatch('Mcp-Method', methodHeader ?? null, 'method', method);
  const field = Object.hasOwn(MCP_NAME_SOURCE, method) ? MCP_NAME_SOURCE[method] : undefined;
  const value = field === undefined ? undefined : params?.[field];
  if (field === undefined || typeof value !== 'string') return undefined;
  const name = headerOf(req, 'mcp-name');
  if (name === undefined) return mismatch('Mcp-Name', null, `params.${field}`, value);
  const decoded = decodeHeaderValue(name);
  if (decoded === undefined)
    return {
      message: `Mcp-Name ${JSON.stringify(name)} has characters a header value may not carry, or malformed Base64; send params.${field} as it is, or as =?base64?<UTF-8 in Base64>?=`,
      mismatch: { name: 'Mcp-Name', header: name, field: `params.${field}`, body: value },
    };
  return decoded === value ? undefined : mismatch('Mcp-Name', name, `params.${field}`, value);
}

function mismatch(name: string, header: string | null, field: string, body: unknown): HeaderMismatch {
  const sent = header === null ? `the ${name} header is missing` : `the ${name} header is ${JSON.stringify(header)}`;
  return {
    message: `${sent} but the body's ${field} is ${JSON.stringify(body)}: the header must repeat the body's value`,
    mismatch: { name, header, field, body },
  };
}
