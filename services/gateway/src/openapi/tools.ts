/**
 * The tools of an OpenAPI document (docs/openapi.md), one per operation:
 * - name: `x-mcp.name`, else the operationId lowercased with every character other than a letter, digit, `_` or `-`
 *   made `_`; an operation without operationId is named from its method and path the same way, runs of `_` made one
 *   and `_` trimmed at both ends (`GET /pets/{petId}` → `get_pets_petid`); a derived name already taken gets `_2`,
 *   `_3`, … in document order (two `x-mcp.name`s alike are an error);
 * - description: the summary and the description, one paragraph each (`x-mcp.description` replaces them);
 * - inputSchema: an object of the path, query and header parameters by name, and the request body as `body`
 *   (cookie parameters are never sent, so not listed); a circular `$ref` (which dereferencing leaves in place) points
 *   into the schema's own `$defs`, where its target is copied, so the schema is whole and Ajv compiles it;
 * - annotations: from the method (GET, HEAD, OPTIONS read-only; PUT and DELETE idempotent; DELETE destructive; POST
 *   and PATCH neither), `x-mcp.annotations` merged over them;
 * - side-effect level: from the method (GET, HEAD, OPTIONS, TRACE 1; PUT, PATCH 2; POST 3; DELETE 4), carried in the
 *   tool's `_meta` and used as the declared level (a manifest's `spec.tools.overrides` still wins).
 * `x-mcp: false` leaves an operation out, and so does a `spec.openapi.operations` list that does not name it.
 * Pure functions.
 */
import { PunkError, type SideEffectLevel } from '@punk/lib';
import type { OpenApiDocument } from './document.js';

/** The `_meta` key of a tool made from an OpenAPI operation. */
export const OPENAPI_META_KEY = 'punk.dev/openapi';

/** HTTP methods of an OpenAPI path item, in the order tools are listed. */
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
type Method = (typeof METHODS)[number];

/** Side-effect level of each method. */
const LEVELS: Record<Method, SideEffectLevel> = { get: 1, head: 1, options: 1, trace: 1, put: 2, patch: 2, post: 3, delete: 4 };

/** Header parameters an operation may not set: the API's content negotiation and credentials are Punk's (OpenAPI 3.1 §4.8.12.1). */
const IGNORED_HEADERS = new Set(['accept', 'content-type', 'authorization', 'cookie', 'host', 'content-length']);

/** One parameter an operation takes: where it goes and under which input key. */
export interface OperationParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  /** The key of the tool's arguments (the parameter's name; `<in>.<name>` when two locations share a name). */
  key: string;
  /** Query arrays: `explode` (the default of form style) repeats the name, else one comma-separated value. */
  explode: boolean;
}

/** An operation served as a tool. */
export interface OpenApiOperation {
  method: Method;
  path: string;
  operationId?: string;
  parameters: OperationParameter[];
  /** The request body: its media type (JSON when the operation takes it) and whether it is required. */
  body?: { mediaType: string; required: boolean };
  level: SideEffectLevel;
  /** The MCP tool as listed (`name`, `description`, `inputSchema`, `annotations`, `_meta`). */
  tool: Record<string, unknown> & { name: string; inputSchema: Record<string, unknown> };
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `name` lowercased, each character other than a letter, digit, `_` or `-` made `_` (the seed's naming rule). */
export function toolNameOf(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9_-]/g, '_');
}

/** The name of an operation without operationId: `<method>_<path>` by {@link toolNameOf}, runs of `_` made one, trimmed. */
export function nameFromRoute(method: string, path: string): string {
  return toolNameOf(`${method}_${path}`).replace(/_+/g, '_').replace(/^_|_$/g, '');
}

/** Annotations of a method (MCP 2025-06-18 ToolAnnotations). */
function annotationsOf(method: Method): Json {
  if (method === 'get' || method === 'head' || method === 'options' || method === 'trace') return { readOnlyHint: true };
  return {
    readOnlyHint: false,
    destructiveHint: method === 'delete',
    idempotentHint: method === 'put' || method === 'delete',
  };
}

/** The operations of `document` as tools, in document order. */
export interface DerivedTools {
  operations: OpenApiOperation[];
  /**
   * Operations without operationId, named from their route: worth a warning, not an error. Each names the path of
   * the problem and the name given, `paths./pets/{id}.get: no operationId; named get_pets_id`.
   */
  warnings: string[];
}

/**
 * Derives the tools of a dereferenced document.
 * @param only `spec.openapi.operations`: the operationIds to serve (all when undefined).
 * @throws PunkError `OpenApiInvalid` for an `x-mcp` that is neither false nor an object, two operations with one
 *   `x-mcp.name`, and an `only` entry the document has no operation for; each message names the path in the document.
 */
export function deriveTools(document: OpenApiDocument, only: readonly string[] | undefined, server: string): DerivedTools {
  const invalid = (where: string, why: string) =>
    new PunkError('OpenApiInvalid', `server ${server}: the OpenAPI document is invalid at ${where}: ${why}`, { server, at: where });
  const wanted = only && new Set(only);
  const seenIds = new Set<string>();
  const picked: Array<{ method: Method; path: string; operation: Json; pathItem: Json; where: string; extension?: Json }> = [];
  for (const [path, pathItem] of Object.entries(document.paths ?? {})) {
    if (!isObject(pathItem)) continue;
    for (const method of METHODS) {
      const operation = pathItem[method];
      if (!isObject(operation)) continue;
      const where = `paths.${path}.${method}`;
      const operationId = typeof operation.operationId === 'string' ? operation.operationId : undefined;
      if (operationId !== undefined) seenIds.add(operationId);
      if (wanted && (operationId === undefined || !wanted.has(operationId))) continue;
      const extension = operation['x-mcp'];
      if (extension === false) continue;
      if (extension !== undefined && !isObject(extension))
        throw invalid(
          `${where}.x-mcp`,
          'x-mcp must be false (leave the operation out) or an object of name, title, description and annotations',
        );
      picked.push({ method, path, operation, pathItem, where, ...(extension !== undefined && { extension }) });
    }
  }
  for (const id of only ?? []) {
    if (!seenIds.has(id)) throw invalid('paths', `spec.openapi.operations names ${id}, but no operation has that operationId`);
  }
  // Declared names first: they are the author's, and two alike is an error; derived names then take what is left.
  const taken = new Map<string, string>();
  for (const entry of picked) {
    const declared = entry.extension?.name;
    if (declared === undefined) continue;
    if (typeof declared !== 'string' || declared === '')
      throw invalid(`${entry.where}.x-mcp.name`, 'x-mcp.name must be a non-empty string');
    const other = taken.get(declared);
    if (other !== undefined) throw invalid(`${entry.where}.x-mcp.name`, `the tool name ${declared} is already the x-mcp.name of ${other}`);
    taken.set(declared, entry.where);
  }
  const warnings: string[] = [];
  const operations = picked.map((entry): OpenApiOperation => {
    const { method, path, operation, extension } = entry;
    const operationId = typeof operation.operationId === 'string' ? operation.operationId : undefined;
    let name = typeof extension?.name === 'string' ? extension.name : undefined;
    if (name === undefined) {
      const base = operationId !== undefined ? toolNameOf(operationId) : nameFromRoute(method, path);
      name = base;
      for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
      taken.set(name, entry.where);
      if (operationId === undefined) warnings.push(`paths.${path}.${method}: no operationId; named ${name}`);
    }
    const { parameters, properties, required } = parametersOf(entry.pathItem, operation);
    const body = bodyOf(operation);
    if (body) {
      properties.body = body.schema;
      if (body.required) required.push('body');
    }
    const summary = typeof operation.summary === 'string' ? operation.summary : undefined;
    const details = typeof operation.description === 'string' ? operation.description : undefined;
    const description =
      typeof extension?.description === 'string' ? extension.description : [summary, details].filter(Boolean).join('\n\n');
    const level = LEVELS[method];
    const tool = {
      name,
      ...(typeof extension?.title === 'string' && { title: extension.title }),
      ...(description !== '' && { description }),
      inputSchema: withDefinitions(
        { type: 'object', properties, ...(required.length > 0 && { required }), additionalProperties: false },
        document,
        (ref) => invalid(entry.where, `the circular $ref ${ref} does not point into this document: ${CIRCULAR_REF_FIX}`),
      ),
      annotations: { ...annotationsOf(method), ...(isObject(extension?.annotations) ? extension.annotations : {}) },
      _meta: {
        [OPENAPI_META_KEY]: {
          method: method.toUpperCase(),
          path,
          ...(operationId !== undefined && { operationId }),
          sideEffectLevel: level,
        },
      },
    };
    return {
      method,
      path,
      ...(operationId !== undefined && { operationId }),
      parameters,
      ...(body && { body: { mediaType: body.mediaType, required: body.required } }),
      level,
      tool,
    };
  });
  return { operations, warnings };
}

/** How to fix a circular `$ref` that cannot be kept in an input schema. */
const CIRCULAR_REF_FIX = "move the recursive schema into the document's components and $ref it as #/components/schemas/<name>";

/**
 * `schema` with each `$ref` left in it (a circular one: dereferencing inlines all others) rewritten to
 * `#/$defs/<name>`, and the target (`#/components/schemas/Node` in the document, its own `$ref`s rewritten alike)
 * copied there under its last pointer segment (`Node`, `Node_2` when taken). Ajv resolves `$defs` in draft-07 and
 * 2020-12 alike, so the arguments are validated; a client reads the same whole schema.
 * @param outside the error to throw for a `$ref` that is not a JSON pointer into the document (RFC 6901).
 */
function withDefinitions(schema: Json, document: OpenApiDocument, outside: (ref: string) => Error): Json {
  const names = new Map<string, string>();
  const defs: Json = {};
  const pending: Array<[string, unknown]> = [];
  const nameOf = (ref: string): string => {
    let name = names.get(ref);
    if (name !== undefined) return name;
    if (!ref.startsWith('#/')) throw outside(ref);
    const segments = ref
      .slice(2)
      .split('/')
      .map((part) => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'));
    let target: unknown = document;
    for (const segment of segments) target = isObject(target) || Array.isArray(target) ? (target as Json)[segment] : undefined;
    if (target === undefined) throw outside(ref);
    const base = segments.at(-1)!;
    const taken = new Set(names.values());
    name = base;
    for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
    names.set(ref, name);
    pending.push([name, target]);
    return name;
  };
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (!isObject(value)) return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        key,
        key === '$ref' && typeof item === 'string' ? `#/$defs/${nameOf(item).replace(/~/g, '~0').replace(/\//g, '~1')}` : rewrite(item),
      ]),
    );
  };
  const root = rewrite(schema) as Json;
  for (let next = pending.shift(); next !== undefined; next = pending.shift()) defs[next[0]] = rewrite(next[1]);
  return Object.keys(defs).length === 0 ? root : { ...root, $defs: defs };
}

/** The path, query and header parameters of an operation (its own over its path item's), as input properties. */
function parametersOf(
  pathItem: Json,
  operation: Json,
): { parameters: OperationParameter[]; properties: Record<string, unknown>; required: string[] } {
  const byKey = new Map<string, Json>();
  for (const list of [pathItem.parameters, operation.parameters]) {
    if (!Array.isArray(list)) continue;
    for (const parameter of list) if (isObject(parameter)) byKey.set(`${String(parameter.in)}:${String(parameter.name)}`, parameter);
  }
  const parameters: OperationParameter[] = [];
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const parameter of byKey.values()) {
    const where = parameter.in;
    const name = String(parameter.name);
    if (where !== 'path' && where !== 'query' && where !== 'header') continue; // cookie: never sent
    if (where === 'header' && IGNORED_HEADERS.has(name.toLowerCase())) continue;
    const key = name in properties || name === 'body' ? `${where}.${name}` : name;
    const content = isObject(parameter.content) ? Object.values(parameter.content).find(isObject) : undefined;
    const schema = isObject(parameter.schema) ? parameter.schema : isObject(content?.schema) ? content.schema : {};
    properties[key] = typeof parameter.description === 'string' ? { ...schema, description: parameter.description } : schema;
    if (parameter.required === true || where === 'path') required.push(key);
    const style = typeof parameter.style === 'string' ? parameter.style : 'form';
    parameters.push({ name, in: where, key, explode: typeof parameter.explode === 'boolean' ? parameter.explode : style === 'form' });
  }
  return { parameters, properties, required };
}

/** The request body of an operation: its JSON media type when it has one, else its first; undefined without a body. */
function bodyOf(operation: Json): { mediaType: string; required: boolean; schema: Json } | undefined {
  const requestBody = operation.requestBody;
  if (!isObject(requestBody) || !isObject(requestBody.content)) return undefined;
  const types = Object.keys(requestBody.content);
  const mediaType = types.find((type) => /^application\/([\w.+-]+\+)?json\b/i.test(type)) ?? types[0];
  if (mediaType === undefined) return undefined;
  const media = requestBody.content[mediaType];
  const schema = isObject(media) && isObject(media.schema) ? media.schema : {};
  const described = typeof requestBody.description === 'string' ? { ...schema, description: requestBody.description } : schema;
  return { mediaType, required: requestBody.required === true, schema: described };
}

/** The side-effect level in the `_meta` of a tool made from an operation (by {@link deriveTools}), if it has one. */
export function openApiLevelOf(tool: Record<string, unknown>): SideEffectLevel | undefined {
  const meta = (tool._meta as Record<string, unknown> | undefined)?.[OPENAPI_META_KEY] as { sideEffectLevel?: unknown } | undefined;
  const level = meta?.sideEffectLevel;
  return typeof level === 'number' && Number.isInteger(level) && level >= 0 && level <= 4 ? (level as SideEffectLevel) : undefined;
}
