/**
 * `Mcp-Param-{Name}` headers of a 2026-07-28 `tools/call` (MCP 2026-07-28
 * basic/transports/streamable-http "Custom Headers from Tool Parameters",
 * SEP-2243): a tool's `inputSchema` may mark properties, reachable from its
 * root through `properties` keys only, with `x-mcp-header: <Name>`; the
 * client then mirrors each such argument into `Mcp-Param-<Name>`, plain or
 * as `=?base64?<UTF-8 in Base64>?=`. A server that reads the body must check
 * that every such header, decoded, equals the argument (and is present when
 * the argument is), and answer 400 with -32020 `HeaderMismatch` otherwise.
 * The SDK does this only for its high-level `McpServer`, not for the
 * low-level `Server` mcp-front builds, hence this module.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { HeaderMismatch } from './errors.js';

/** One `x-mcp-header` annotation: the header's name part and the property path it mirrors. */
interface ParamHeader {
  name: string;
  path: string[];
}

const BASE64_PREFIX = '=?base64?';
const BASE64_SUFFIX = '?=';

/**
 * Checks the `Mcp-Param-*` headers of one `tools/call` against its arguments.
 * @param inputSchema the tool's `inputSchema` as the upstream declared it.
 * @param args the call's `arguments`.
 * @returns why the headers do not fit the body (for the -32020 error), or undefined when they do.
 */
export function paramHeaderMismatch(headers: IncomingHttpHeaders, inputSchema: unknown, args: unknown): HeaderMismatch | undefined {
  for (const annotation of annotationsOf(inputSchema)) {
    const header = `Mcp-Param-${annotation.name}`;
    const raw = headers[header.toLowerCase()];
    const value = valueAt(args, annotation.path);
    const field = `arguments.${annotation.path.join('.')}`;
    const refusal = (message: string): HeaderMismatch => ({
      message,
      mismatch: { name: header, header: Array.isArray(raw) ? raw.join(', ') : (raw ?? null), field, body: value ?? null },
    });
    if (Array.isArray(raw)) return refusal(`${header} is repeated`);
    // An absent (or null) argument expects no header, and one sent anyway is ignored, as the SDK's McpServer does.
    if (value === undefined || value === null) continue;
    const expected = headerForm(value);
    if (expected === undefined) continue;
    if (raw === undefined) return refusal(`${header} is missing; the body's ${field} is ${JSON.stringify(value)}`);
    const decoded = decodeHeaderValue(raw);
    if (decoded === undefined) return refusal(`${header} has characters a header value may not carry, or malformed Base64`);
    const equal = typeof value === 'number' && /^-?\d+$/.test(decoded) ? Number(decoded) === value : decoded === expected;
    if (!equal)
      return refusal(`${header} is ${JSON.stringify(raw)} but the body's ${field} is ${JSON.stringify(value)}: the header must repeat it`);
  }
  return undefined;
}

/** The `x-mcp-header` annotations of a schema, found through `properties` chains only. */
function annotationsOf(schema: unknown, path: string[] = []): ParamHeader[] {
  const properties = (schema as { properties?: unknown } | null | undefined)?.properties;
  if (typeof properties !== 'object' || properties === null) return [];
  const found: ParamHeader[] = [];
  for (const [key, property] of Object.entries(properties as Record<string, unknown>)) {
    const name = (property as { 'x-mcp-header'?: unknown } | null)?.['x-mcp-header'];
    if (typeof name === 'string' && name !== '') found.push({ name, path: [...path, key] });
    found.push(...annotationsOf(property, [...path, key]));
  }
  return found;
}

function valueAt(args: unknown, path: string[]): unknown {
  let current = args;
  for (const key of path) {
    if (typeof current !== 'object' || current === null || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/**
 * A header value as the string it carries: Base64 decoded when wrapped in `=?base64?…?=` (MCP 2026-07-28 "Value
 * Encoding"); undefined when malformed (RFC 9110 §5.5, RFC 4648 §4). `Mcp-Name` is encoded the same way.
 */
export function decodeHeaderValue(raw: string): string | undefined {
  if (/[^\t\x20-\x7e]/.test(raw)) return undefined;
  if (!(raw.startsWith(BASE64_PREFIX) && raw.endsWith(BASE64_SUFFIX) && raw.length >= BASE64_PREFIX.length + BASE64_SUFFIX.length))
    return raw;
  const encoded = raw.slice(BASE64_PREFIX.length, raw.length - BASE64_SUFFIX.length);
  if (encoded.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(encoded)) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.toString('base64') !== encoded) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** The string form of an argument in its header (MCP 2026-07-28 "Value Encoding": strings as-is, integers in decimal, booleans lower-case). */
function headerForm(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  return undefined;
}
