/**
 * One tool call of an OpenAPI operation: the arguments validated against the tool's input schema (Ajv; JSON Schema
 * 2020-12 for OpenAPI 3.1, draft-07 with `nullable` for 3.0), the HTTP request built (path parameters
 * percent-encoded, query and header parameters, the `body` as JSON, form or text), sent with the configured headers
 * only, and the answer made a tool result: a JSON object body is `structuredContent` and its text, other JSON and text
 * bodies are text, images and audio are image and audio content, anything else an embedded binary resource; a status
 * of 400 or more is `isError`; every result has the status in `_meta.status`.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { errorMessage } from '@punk/lib';
import { readLimited } from './document.js';
import type { OpenApiOperation } from './tools.js';

/** A tool result (MCP CallToolResult). */
export type ToolResult = Record<string, unknown> & { content: Array<Record<string, unknown>>; isError?: boolean };

/** Validators of one document's tools, compiled once per connection. */
export class ArgumentValidator {
  private readonly ajv: Ajv;
  private readonly compiled = new Map<string, ValidateFunction | string>();

  /** @param version the document's `openapi` (3.0.x or 3.1.x): which JSON Schema dialect its schemas are. */
  constructor(version: string) {
    const options = { strict: false, allErrors: false, validateFormats: false, logger: false as const };
    this.ajv = version.startsWith('3.1') ? new Ajv2020(options) : new Ajv(options);
  }

  /**
   * Why `args` does not fit the tool's input schema (Ajv's first error, with its path), or undefined when it fits; a
   * schema Ajv cannot compile fits nothing (the reason says so).
   */
  check(operation: OpenApiOperation, args: Record<string, unknown>): string | undefined {
    let validate = this.compiled.get(operation.tool.name);
    if (validate === undefined) {
      try {
        validate = this.ajv.compile(operation.tool.inputSchema);
      } catch (error) {
        // Nothing goes out unvalidated: a schema Ajv cannot compile refuses every call, saying why.
        validate = `the tool's input schema cannot be compiled to validate the arguments (${errorMessage(error)}): fix the operation's schema in the OpenAPI document`;
      }
      this.compiled.set(operation.tool.name, validate);
    }
    if (typeof validate === 'string') return validate;
    if (validate(args)) return undefined;
    const [first] = validate.errors ?? [];
    if (!first) return 'the arguments do not match the input schema';
    const where = first.instancePath === '' ? 'arguments' : `arguments${first.instancePath.replace(/\//g, '.')}`;
    const extra = first.keyword === 'additionalProperties' ? ` (${String(first.params.additionalProperty)})` : '';
    return `${where} ${first.message ?? 'is invalid'}${extra}`;
  }
}

/**
 * Why a path parameter's value cannot fill its segment of the operation's template, or undefined when every one can.
 * A value that is empty, `.` or `..` would not stay a segment of its own: URL normalisation removes dot segments
 * (RFC 3986 section 5.2.4; the WHATWG URL parser treats `%2e` alike), so it would reach another path than the
 * operation's, even one above `baseUrl`. Every other value is percent-encoded into exactly one segment.
 */
export function pathParameterProblem(operation: OpenApiOperation, args: Record<string, unknown>): string | undefined {
  for (const parameter of operation.parameters) {
    if (parameter.in !== 'path' || args[parameter.key] === undefined) continue;
    const value = text(args[parameter.key]);
    if (value === '' || value === '.' || value === '..')
      return `arguments.${parameter.key} is ${JSON.stringify(value)}, which is not a path segment of its own (path parameter "${parameter.name}" of ${operation.path}): give a name, not an empty or dot segment`;
  }
  return undefined;
}

/** A request ready to send. */
export interface BuiltRequest {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** A scalar or list as one parameter value (objects as JSON). */
function text(value: unknown): string {
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}

/**
 * The request of a call: `baseUrl` + the operation's path with its path parameters percent-encoded (RFC 3986
 * unreserved characters kept), query parameters appended (a list repeated, or comma-joined when not exploded),
 * header parameters set, and `body` encoded in the operation's media type.
 */
export function buildRequest(baseUrl: string, operation: OpenApiOperation, args: Record<string, unknown>): BuiltRequest {
  const path = operation.path.replace(/\{([^}]+)\}/g, (whole, name: string) => {
    const parameter = operation.parameters.find((p) => p.in === 'path' && p.name === name);
    const value = parameter ? args[parameter.key] : undefined;
    return value === undefined ? whole : encodeURIComponent(text(value));
  });
  const base = baseUrl.replace(/\/+$/, '');
  const url = new URL(base + path);
  // The URL keeps the template's shape under baseUrl ({@link pathParameterProblem} refused what would not).
  const basePath = new URL(base).pathname.replace(/\/+$/, '');
  const segments = (p: string) => p.split('/').length;
  if (!url.pathname.startsWith(`${basePath}/`) || segments(url.pathname) !== segments(basePath) + segments(operation.path) - 1)
    throw new Error(`the request path ${url.pathname} is not the operation's path ${operation.path} under ${base}`);
  const headers: Record<string, string> = {};
  for (const parameter of operation.parameters) {
    const value = args[parameter.key];
    if (value === undefined || parameter.in === 'path') continue;
    if (parameter.in === 'header') headers[parameter.name] = Array.isArray(value) ? value.map(text).join(',') : text(value);
    else if (Array.isArray(value) && parameter.explode) for (const item of value) url.searchParams.append(parameter.name, text(item));
    else url.searchParams.append(parameter.name, Array.isArray(value) ? value.map(text).join(',') : text(value));
  }
  const built: BuiltRequest = { url, method: operation.method.toUpperCase(), headers };
  const body = args.body;
  if (operation.body && body !== undefined) {
    const type = operation.body.mediaType;
    headers['content-type'] = type;
    if (/json/i.test(type)) built.body = JSON.stringify(body);
    else if (/^application\/x-www-form-urlencoded/i.test(type) && typeof body === 'object' && body !== null)
      built.body = new URLSearchParams(Object.entries(body).map(([key, value]): [string, string] => [key, text(value)])).toString();
    else built.body = text(body);
  }
  return built;
}

/** Media types answered as text. */
const TEXT_TYPES = /^(text\/|application\/([\w.+-]+\+)?(json|xml)\b|application\/(javascript|yaml|x-yaml|x-www-form-urlencoded)\b)/i;

/**
 * The tool result of an HTTP answer, read up to `maxBytes` (more is a tool error that says so).
 * @param resource the URI of an embedded binary body (`openapi://<server>/<tool>`).
 */
export async function resultOf(response: Response, maxBytes: number, resource: string): Promise<ToolResult> {
  const status = response.status;
  const meta = { status };
  const isError = status >= 400;
  const bytes = await readLimited(response, maxBytes);
  if (bytes === undefined)
    return {
      content: [
        { type: 'text', text: `the API answered HTTP ${status} with a body larger than ${maxBytes} bytes, the most a result may hold` },
      ],
      isError: true,
      _meta: meta,
    };
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  const answer = (content: Array<Record<string, unknown>>, extra: Record<string, unknown> = {}): ToolResult => ({
    content,
    ...extra,
    ...(isError && { isError: true }),
    _meta: meta,
  });
  if (bytes.length === 0) return answer([{ type: 'text', text: `HTTP ${status} ${response.statusText}`.trim() }]);
  if (mediaType === '' || TEXT_TYPES.test(mediaType)) {
    const body = new TextDecoder().decode(bytes);
    if (/json/.test(mediaType)) {
      try {
        const value: unknown = JSON.parse(body);
        if (typeof value === 'object' && value !== null && !Array.isArray(value))
          return answer([{ type: 'text', text: body }], { structuredContent: value });
      } catch {
        // Not JSON after all: its text is the answer.
      }
    }
    return answer([{ type: 'text', text: body }]);
  }
  const data = Buffer.from(bytes).toString('base64');
  if (mediaType.startsWith('image/')) return answer([{ type: 'image', data, mimeType: mediaType }]);
  if (mediaType.startsWith('audio/')) return answer([{ type: 'audio', data, mimeType: mediaType }]);
  return answer([{ type: 'resource', resource: { uri: resource, mimeType: mediaType, blob: data } }]);
}
