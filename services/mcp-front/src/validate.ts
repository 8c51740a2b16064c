/**
 * Checks a tool call against the tool's JSON Schemas (MCP 2025-11-25
 * server/tools "Tool"): the arguments against `inputSchema` before the call
 * leaves mcp-front, and the result's `structuredContent` against
 * `outputSchema` before it reaches the client ("Structured Content": servers
 * MUST return structured results that conform to the output schema).
 *
 * Dialect: without `$schema` a schema is JSON Schema 2020-12 (2025-11-25 basic
 * "JSON Schema Usage"); `$schema` naming draft-07 (or draft-04/06, checked as
 * draft-07) uses Ajv's draft-07 validator, 2019-09 uses Ajv2019. `$ref` to
 * `$defs`/`definitions` of the same schema resolves; a `$ref` to anything
 * outside it does not compile.
 *
 * Upstream schemas are not trusted to be small: a schema is compiled only
 * within {@link SCHEMA_BOUNDS} (size, nesting depth, node count, branches of
 * `allOf`/`anyOf`/`oneOf`), `pattern` and `patternProperties` run on RE2
 * (linear time, no catastrophic backtracking), and formats are not checked.
 * A schema out of bounds, or one Ajv cannot compile, is not enforced: the
 * call is forwarded and the upstream server judges it (logged once per
 * schema). Each distinct schema is compiled once and cached (bounded, oldest
 * evicted).
 */
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { RE2JS } from 're2js';
import { errorMessage, type Logger } from '@punk/lib';

/** Outcome of a check: `field` is the JSON path of the first bad value (`message`, `items/0/id`, or `(arguments)` / `(structuredContent)` for the whole object). */
export type SchemaCheck = { ok: true } | { ok: false; field: string; message: string };

/** Largest schemas Punk compiles; past any bound a schema is not enforced. */
export const SCHEMA_BOUNDS = {
  /** Serialised size, in UTF-16 code units of its JSON. */
  maxChars: 256 * 1024,
  /** Nesting of objects and arrays. */
  maxDepth: 32,
  /** Objects and arrays in all. */
  maxNodes: 10_000,
  /** Branches of one `allOf`, `anyOf` or `oneOf`. */
  maxBranches: 64,
  /** Branches of every `allOf`, `anyOf` and `oneOf` together. */
  maxTotalBranches: 512,
} as const;

const MAX_CACHED = 2_000;
const COMPOSITIONS = ['allOf', 'anyOf', 'oneOf'];

type Dialect = 'draft-07' | '2019-09' | '2020-12';

/**
 * Ajv's pattern engine (`code.regExp`) on RE2: linear-time matching of `pattern` and `patternProperties`.
 * Syntax RE2 lacks (backreferences, lookaround) throws, so such a schema does not compile and is not enforced.
 */
function re2(pattern: string, _flags: string): { test(input: string): boolean; toString(): string } {
  const compiled = RE2JS.compile(RE2JS.translateRegExp(pattern));
  return { test: (input) => compiled.test(input), toString: () => `re2:${pattern}` };
}
// Ajv's RegExpEngine type names the engine for standalone code generation, which Punk does not use.
re2.code = 're2';

/** Validates tool arguments and structured results with compiled, cached JSON Schemas. */
export class ToolSchemaValidator {
  private readonly compilers: Record<Dialect, Ajv | Ajv2019 | Ajv2020>;
  /** Serialised schema -> compiled function (null when it is not enforced) and what to evict from Ajv's own cache. */
  private readonly cache = new Map<string, { validate: ValidateFunction | null; compiled?: { dialect: Dialect; schema: object } }>();
  /** Schema object -> its compiled function: a tool's cached definition is checked again without serialising its schema per call. */
  private readonly bySchema = new WeakMap<object, ValidateFunction | null>();

  constructor(private readonly log: Logger) {
    const options: Options = {
      strict: false,
      allErrors: false,
      validateFormats: false,
      logger: false,
      // Schemas with an `$id` are not registered in the instance (two tools may reuse one `$id`).
      addUsedSchema: false,
      // Large `required` and `enum` lists become loops rather than generated code per entry.
      loopRequired: 20,
      loopEnum: 20,
      code: { regExp: re2 as unknown as NonNullable<Options['code']>['regExp'] },
    };
    this.compilers = { 'draft-07': new Ajv(options), '2019-09': new Ajv2019(options), '2020-12': new Ajv2020(options) };
  }

  /**
   * Checks `args` (absent arguments count as `{}`) against `inputSchema`.
   * @param tool - the tool's exposed name, for messages. Never throws.
   */
  checkInput(tool: string, inputSchema: Record<string, unknown> | undefined, args: Record<string, unknown> | undefined): SchemaCheck {
    if (!inputSchema) return { ok: true };
    return this.check(tool, 'inputSchema', inputSchema, args ?? {}, '(arguments)', `invalid arguments for tool ${tool}`);
  }

  /**
   * Checks a tool result against `outputSchema`: a result that is not an error must carry
   * `structuredContent`, and it must validate. Error results (`isError: true`) are not checked.
   * @param tool - the tool's exposed name, for messages. Never throws.
   */
  checkOutput(tool: string, outputSchema: Record<string, unknown> | undefined, result: Record<string, unknown>): SchemaCheck {
    if (!outputSchema || result['isError'] === true) return { ok: true };
    const structured = result['structuredContent'];
    if (structured === undefined) {
      return {
        ok: false,
        field: '(structuredContent)',
        message: `tool ${tool} declares an outputSchema but its result has no structuredContent`,
      };
    }
    return this.check(
      tool,
      'outputSchema',
      outputSchema,
      structured,
      '(structuredContent)',
      `the structuredContent of tool ${tool} does not match its outputSchema`,
    );
  }

  private check(
    tool: string,
    which: string,
    schema: Record<string, unknown>,
    value: unknown,
    whole: string,
    headline: string,
  ): SchemaCheck {
    const validate = this.compiled(tool, which, schema);
    if (!validate || validate(value)) return { ok: true };
    const error = validate.errors?.[0];
    if (!error) return { ok: false, field: whole, message: headline };
    const field = fieldOf(error, whole);
    return { ok: false, field, message: `${headline}: ${describe(field, error)}` };
  }

  private compiled(tool: string, which: string, schema: Record<string, unknown>): ValidateFunction | null {
    const known = this.bySchema.get(schema);
    if (known !== undefined) return known;
    const key = JSON.stringify(schema);
    const hit = this.cache.get(key);
    if (hit !== undefined) {
      this.bySchema.set(schema, hit.validate);
      return hit.validate;
    }
    let entry: { validate: ValidateFunction | null; compiled?: { dialect: Dialect; schema: object } } = { validate: null };
    const excess =
      key.length > SCHEMA_BOUNDS.maxChars ? `it is ${key.length} characters long (at most ${SCHEMA_BOUNDS.maxChars})` : excessOf(schema);
    if (excess) {
      this.log.warn({ tool, schema: which, reason: excess }, `${which} is out of bounds; it is not enforced`);
    } else {
      const { $schema, ...rest } = schema;
      const dialect = dialectOf($schema);
      try {
        entry = { validate: this.compilers[dialect].compile(rest), compiled: { dialect, schema: rest } };
      } catch (error) {
        this.log.warn({ tool, schema: which, err: errorMessage(error) }, `${which} does not compile; it is not enforced`);
      }
    }
    if (this.cache.size >= MAX_CACHED) {
      const [oldestKey, oldest] = this.cache.entries().next().value ?? [];
      if (oldestKey !== undefined) this.cache.delete(oldestKey);
      // Ajv keeps every compiled schema object until it is removed.
      if (oldest?.compiled) this.compilers[oldest.compiled.dialect].removeSchema(oldest.compiled.schema);
    }
    this.cache.set(key, entry);
    this.bySchema.set(schema, entry.validate);
    return entry.validate;
  }
}

/** Why a schema exceeds {@link SCHEMA_BOUNDS} (depth, nodes, branches), or undefined when it does not. */
export function excessOf(schema: unknown): string | undefined {
  let nodes = 0;
  let branches = 0;
  const stack: { value: unknown; depth: number }[] = [{ value: schema, depth: 1 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > SCHEMA_BOUNDS.maxDepth) return `it nests deeper than ${SCHEMA_BOUNDS.maxDepth} levels`;
    if (++nodes > SCHEMA_BOUNDS.maxNodes) return `it has more than ${SCHEMA_BOUNDS.maxNodes} objects and arrays`;
    const children = Array.isArray(value) ? value : Object.values(value);
    if (!Array.isArray(value)) {
      for (const keyword of COMPOSITIONS) {
        const list = (value as Record<string, unknown>)[keyword];
        if (!Array.isArray(list)) continue;
        if (list.length > SCHEMA_BOUNDS.maxBranches)
          return `one ${keyword} has ${list.length} branches (at most ${SCHEMA_BOUNDS.maxBranches})`;
        branches += list.length;
        if (branches > SCHEMA_BOUNDS.maxTotalBranches)
          return `its allOf, anyOf and oneOf have more than ${SCHEMA_BOUNDS.maxTotalBranches} branches together`;
      }
    }
    for (const child of children) stack.push({ value: child, depth: depth + 1 });
  }
  return undefined;
}

function dialectOf(schemaUri: unknown): Dialect {
  if (typeof schemaUri !== 'string') return '2020-12';
  if (/draft-0[4-7]/.test(schemaUri)) return 'draft-07';
  if (schemaUri.includes('2019-09')) return '2019-09';
  return '2020-12';
}

/** The path of the offending value, without a leading slash; names the missing or extra property when that is the error. */
function fieldOf(error: ErrorObject, whole: string): string {
  const base = error.instancePath.replace(/^\//, '').replace(/~1/g, '/').replace(/~0/g, '~');
  const params = error.params as Record<string, unknown>;
  const child =
    typeof params['missingProperty'] === 'string'
      ? params['missingProperty']
      : typeof params['additionalProperty'] === 'string'
        ? params['additionalProperty']
        : undefined;
  if (child !== undefined) return base ? `${base}/${child}` : child;
  return base || whole;
}

function describe(field: string, error: ErrorObject): string {
  if (error.keyword === 'required') return `field "${field}" is required`;
  if (error.keyword === 'additionalProperties') return `field "${field}" is not allowed`;
  return `field "${field}" ${error.message ?? 'is invalid'}`;
}
