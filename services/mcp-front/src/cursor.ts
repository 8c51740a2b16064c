/**
 * Pagination of the list methods of an endpoint (`tools/list`, `prompts/list`,
 * `resources/list`, `resources/templates/list`; MCP 2025-11-25
 * server/utilities/pagination): the cursor is opaque to clients and
 * self-contained, so a page asked of any front replica continues where the
 * previous page, from any replica, ended.
 *
 * Every list is served in a deterministic order of a string key (the exposed
 * name of a tool or prompt, the URI of a resource, the URI template and server
 * of a template), and a cursor names the key of the last item handed out
 * (keyset pagination): a list that changes between two pages neither repeats
 * nor skips the items that stayed.
 *
 * Wire shape: the base64url encoding of the JSON
 * `{"v":1,"list":<method>,"endpoint":<scope key>,"after":<key>}`: a cursor of
 * another list or another endpoint (`/mcp` vs `/servers/<name>/mcp`) is
 * refused rather than silently skipping items. It holds nothing secret and
 * forging one only selects another page of what the caller may list anyway,
 * so it is not signed.
 */
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';

/** The list methods that paginate. */
export type ListMethod = 'tools/list' | 'prompts/list' | 'resources/list' | 'resources/templates/list';

/** Longest cursor accepted, in characters (a key is at most a URI or template; anything longer is not Punk's). */
const MAX_CURSOR_LENGTH = 16_384;

const VERSION = 1;

/** Which list a cursor belongs to: the method and the endpoint's scope key (`*`, `name` or `namespace/name`). */
export interface CursorContext {
  list: ListMethod;
  endpoint: string;
}

/** One page of a list and the cursor of the next one (absent on the last page). */
export interface Page<T> {
  items: T[];
  nextCursor?: string;
}

/** Encodes the cursor of the page after the item whose key is `after`. */
export function encodeCursor(context: CursorContext, after: string): string {
  return Buffer.from(JSON.stringify({ v: VERSION, list: context.list, endpoint: context.endpoint, after }), 'utf8').toString('base64url');
}

/**
 * Decodes a cursor a client sent back and returns the key after which the page starts.
 * @throws ProtocolError -32602 (Invalid params) naming the problem: not a cursor Punk minted, or a cursor of
 *   another list or endpoint.
 */
export function decodeCursor(context: CursorContext, cursor: string): string {
  const { list } = context;
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]*$/.test(cursor)) throw invalid(list, 'it is not a cursor this server returned');
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid(list, 'it is not a cursor this server returned');
  }
  const fields = parsed as { v?: unknown; list?: unknown; endpoint?: unknown; after?: unknown } | null;
  if (typeof fields !== 'object' || fields === null || fields.v !== VERSION || typeof fields.after !== 'string') {
    throw invalid(list, 'it is not a cursor this server returned');
  }
  if (fields.list !== list) throw invalid(list, `it was returned by ${String(fields.list)}`);
  if (fields.endpoint !== context.endpoint) throw invalid(list, 'it was returned by another endpoint');
  return fields.after;
}

/**
 * One page of `items` (sorted here by `keyOf`, code-unit order), starting after the key the
 * cursor names, or at the start without a cursor.
 * @throws ProtocolError -32602 for an invalid cursor (see {@link decodeCursor}).
 */
export function paginate<T>(
  context: CursorContext,
  items: Iterable<T>,
  keyOf: (item: T) => string,
  pageSize: number,
  cursor: string | undefined,
): Page<T> {
  const keyed = [...items].map((item) => ({ key: keyOf(item), item })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const after = cursor === undefined ? undefined : decodeCursor(context, cursor);
  const start = after === undefined ? 0 : firstAfter(keyed, after);
  const page = keyed.slice(start, start + pageSize);
  const last = page[page.length - 1];
  const more = start + pageSize < keyed.length;
  return { items: page.map((p) => p.item), ...(more && last && { nextCursor: encodeCursor(context, last.key) }) };
}

/** Index of the first entry whose key sorts after `after` (binary search). */
function firstAfter(keyed: { key: string }[], after: string): number {
  let low = 0;
  let high = keyed.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (keyed[mid]!.key <= after) low = mid + 1;
    else high = mid;
  }
  return low;
}

function invalid(list: ListMethod, why: string): ProtocolError {
  return new ProtocolError(
    ProtocolErrorCode.InvalidParams,
    `Invalid cursor for ${list}: ${why}; call ${list} without a cursor to start again`,
    { reason: 'invalid_cursor' },
  );
}
