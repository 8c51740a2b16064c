/**
 * What the SDK's wire codecs do to the answer of a forwarded request (`tools/call`, `resources/read`,
 * `prompts/get`) on its way to the client, for the fast path (fast-path.ts), which answers without an SDK server:
 * the same bytes as the SDK path writes (a test holds the two side by side).
 *
 * - A tool result's `structuredContent` that is not an object gets a text fallback (SEP-2106 §4.3), and for a
 *   2025-era client is wrapped as `{ result: … }` (also when the tool's `outputSchema` root is not an object).
 * - 2026-07-28 results carry `resultType` (`complete` unless the result says otherwise) and the server's
 *   identity in `_meta["io.modelcontextprotocol/serverInfo"]` unless the result names one (MCP 2026-07-28 basic);
 *   a complete `resources/read` result is cacheable: `ttlMs` (default 0) and `cacheScope` (default `private`), valid
 *   ones of the upstream kept (MCP 2026-07-28 `CacheableResult`).
 * - 2026-07-28 error codes: -32002 (resource not found) is sent as -32602.
 */
import { SERVER_INFO_META_KEY, type Implementation } from '@modelcontextprotocol/server';

/** The protocol era of the client an answer goes to. */
export type ClientEra = 'legacy' | 'modern';

/** A tool result projected for the client's era (the SDK's `projectCallToolResult`). */
export function projectToolResult(
  era: ClientEra,
  result: Record<string, unknown>,
  outputSchema: Record<string, unknown> | undefined,
): Record<string, unknown> {
  const withText = withTextFallback(result);
  if (era === 'modern') return withText;
  const structured = withText['structuredContent'];
  if (structured === undefined) return withText;
  const nonObject = typeof structured !== 'object' || structured === null || Array.isArray(structured);
  if (!nonObject && !(outputSchema !== undefined && outputSchema['type'] !== 'object')) return withText;
  return { ...withText, structuredContent: { result: structured } };
}

/** A non-object `structuredContent` without a text block gets one holding its JSON; any other result stays as it is. */
function withTextFallback(result: Record<string, unknown>): Record<string, unknown> {
  const structured = result['structuredContent'];
  if (structured === undefined) return result;
  if (typeof structured === 'object' && structured !== null && !Array.isArray(structured)) return result;
  const content = result['content'] as { type?: unknown }[] | undefined;
  if (content?.some((item) => item.type === 'text')) return result;
  return { ...result, content: [...(content ?? []), { type: 'text', text: JSON.stringify(structured) }] };
}

/** The result of `method` as the client's era carries it on the wire (2026-07-28: see the module comment). */
export function encodeResult(
  era: ClientEra,
  method: string,
  result: Record<string, unknown>,
  serverInfo: Implementation,
): Record<string, unknown> {
  if (era === 'legacy') return result;
  const stamped = result['resultType'] === undefined ? { ...result, resultType: 'complete' } : result;
  const typed = method === 'resources/read' && stamped['resultType'] === 'complete' ? withCacheFields(stamped) : stamped;
  const meta = typed['_meta'];
  if (meta === undefined) return { ...typed, _meta: { [SERVER_INFO_META_KEY]: serverInfo } };
  if (
    typeof meta !== 'object' ||
    meta === null ||
    Array.isArray(meta) ||
    (meta as Record<string, unknown>)[SERVER_INFO_META_KEY] !== undefined
  )
    return typed;
  return { ...typed, _meta: { ...meta, [SERVER_INFO_META_KEY]: serverInfo } };
}

/** A cacheable result with valid `ttlMs` and `cacheScope` (the result's own when valid, else 0 and `private`). */
function withCacheFields(result: Record<string, unknown>): Record<string, unknown> {
  const ttlMs = result['ttlMs'];
  const cacheScope = result['cacheScope'];
  return {
    ...result,
    ttlMs: typeof ttlMs === 'number' && Number.isSafeInteger(ttlMs) && ttlMs >= 0 ? ttlMs : 0,
    cacheScope: cacheScope === 'public' || cacheScope === 'private' ? cacheScope : 'private',
  };
}

/** A JSON-RPC error code as the client's era carries it. */
export function encodeErrorCode(era: ClientEra, code: number): number {
  return era === 'modern' && code === -32002 ? -32602 : code;
}
