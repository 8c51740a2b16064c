/**
 * Checks `tools/call` arguments against the tool's `inputSchema` before the
 * call leaves mcp-front (MCP 2025-11-25 server/tools "Tool": `inputSchema` is
 * a JSON Schema; without `$schema` it is JSON Schema 2020-12, per the
 * 2025-11-25 basic "JSON Schema Usage" section).
 *
 * Dialect: `$schema` naming draft-07 (or draft-04/06, checked as draft-07)
 * uses Ajv's draft-07 validator, 2019-09 uses Ajv2019, anything else 2020-12.
 * Each distinct schema is compiled once and cached (bounded, oldest evicted).
 * A schema Ajv cannot compile is not enforced: the call is forwarded and the
 * upstream server judges the arguments (logged once per schema).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { errorMessage, type Logger } from '@punk/lib';

/** Outcome of a check: `field` is the JSON path of the first bad value (`message`, `items/0/id`, or `(arguments)` for the whole object). */
export type ArgumentCheck = { ok: true } | { ok: false; field: string; message: string };

const MAX_CACHED = 2_000;

type Dialect = 'draft-07' | '2019-09' | '2020-12';

/** Validates tool arguments with compiled, cached JSON Schemas. */
export class ToolInputValidator {
  private readonly compilers: Record<Dialect, Ajv | Ajv2019 | Ajv2020>;
  /** Serialised schema -> compiled function, or null when it does not compile. */
  private readonly cache = new Map<string, ValidateFunction | null>();

  constructor(private readonly log: Logger) {
    const options = { strict: false, allErrors: false, validateFormats: false, logger: false } as const;
    this.compilers = { 'draft-07': new Ajv(options), '2019-09': new Ajv2019(options), '2020-12': new Ajv2020(options) };
  }

  /**
   * Checks `args` (absent arguments count as `{}`) against `inputSchema`.
   * @param tool - the tool's exposed name, for messages.
   * Never throws.
   */
  check(tool: string, inputSchema: Record<string, unknown> | undefined, args: Record<string, unknown> | undefined): ArgumentCheck {
    if (!inputSchema) return { ok: true };
    const validate = this.compiled(tool, inputSchema);
    if (!validate) return { ok: true };
    if (validate(args ?? {})) return { ok: true };
    const error = validate.errors?.[0];
    if (!error) return { ok: false, field: '(arguments)', message: `invalid arguments for tool ${tool}` };
    const field = fieldOf(error);
    return { ok: false, field, message: `invalid arguments for tool ${tool}: ${describe(field, error)}` };
  }

  private compiled(tool: string, inputSchema: Record<string, unknown>): ValidateFunction | null {
    const key = JSON.stringify(inputSchema);
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    const { $schema, ...rest } = inputSchema;
    const dialect = dialectOf($schema);
    let compiled: ValidateFunction | null;
    try {
      compiled = this.compilers[dialect].compile(rest);
    } catch (error) {
      this.log.warn({ tool, err: errorMessage(error) }, 'inputSchema does not compile; arguments are not checked');
      compiled = null;
    }
    if (this.cache.size >= MAX_CACHED) {
      const oldest = this.cache.keys().next().value;
      if (oldest !== undefined) this.cache.delete(oldest);
    }
    this.cache.set(key, compiled);
    return compiled;
  }
}

function dialectOf(schemaUri: unknown): Dialect {
  if (typeof schemaUri !== 'string') return '2020-12';
  if (/draft-0[4-7]/.test(schemaUri)) return 'draft-07';
  if (schemaUri.includes('2019-09')) return '2019-09';
  return '2020-12';
}

/** The path of the offending value, without a leading slash; names the missing or extra property when that is the error. */
function fieldOf(error: ErrorObject): string {
  const base = error.instancePath.replace(/^\//, '').replace(/~1/g, '/').replace(/~0/g, '~');
  const params = error.params as Record<string, unknown>;
  const child = typeof params['missingProperty'] === 'string' ? params['missingProperty'] : typeof params['additionalProperty'] === 'string' ? params['additionalProperty'] : undefined;
  if (child !== undefined) return base ? `${base}/${child}` : child;
  return base || '(arguments)';
}

function describe(field: string, error: ErrorObject): string {
  if (error.keyword === 'required') return `field "${field}" is required`;
  if (error.keyword === 'additionalProperties') return `field "${field}" is not allowed`;
  return `field "${field}" ${error.message ?? 'is invalid'}`;
}
