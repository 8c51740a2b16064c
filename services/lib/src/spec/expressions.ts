/**
 * The expression IR of McpWorkflows and its evaluator. Expressions are data, never code: a value is built from
 * literals, `{{path}}` templates, references into the run's environment (`input.<field>`, `vars.<saveAs>`), objects
 * of expressions, and comparisons for branches. docs/workflows.md is the reference.
 */
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { PunkError } from '../errors.js';

/** A path into the environment: `input` or `vars`, then dot-separated keys (a number indexes an array). */
export const expressionPathSchema = z
  .string()
  .regex(/^(input|vars)(\.[A-Za-z0-9_-]+)*$/, 'must be a path such as input.topic or vars.issues.items.0.title (rooted at input or vars)');

/** One expression: a tagged object, `kind` naming its form. */
export type Expression =
  | { kind: 'literal'; value: unknown }
  | { kind: 'template'; template: string }
  | { kind: 'ref'; path: string }
  | { kind: 'exists'; path: string }
  | { kind: 'object'; fields: Record<string, Expression> }
  | { kind: 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge'; left: Expression; right: Expression }
  | { kind: 'and' | 'or'; operands: Expression[] }
  | { kind: 'not'; operand: Expression };

const TEMPLATE_PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** The zod schema of {@link Expression}; templates are checked to hold only valid paths. */
export const expressionSchema: z.ZodType<Expression> = z.lazy(() =>
  z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('literal'), value: z.json() }).strict(),
    z
      .object({
        kind: z.literal('template'),
        template: z
          .string()
          .max(65536)
          .superRefine((template, ctx) => {
            for (const [, path] of template.matchAll(TEMPLATE_PLACEHOLDER)) {
              if (!expressionPathSchema.safeParse(path).success)
                ctx.addIssue({ code: 'custom', message: `{{${path}}} is not a path such as {{input.topic}} or {{vars.issues.0.title}}` });
            }
          }),
      })
      .strict(),
    z.object({ kind: z.literal('ref'), path: expressionPathSchema }).strict(),
    z.object({ kind: z.literal('exists'), path: expressionPathSchema }).strict(),
    z.object({ kind: z.literal('object'), fields: z.record(z.string(), expressionSchema) }).strict(),
    z.object({ kind: z.enum(['eq', 'ne', 'lt', 'le', 'gt', 'ge']), left: expressionSchema, right: expressionSchema }).strict(),
    z.object({ kind: z.enum(['and', 'or']), operands: z.array(expressionSchema).min(1) }).strict(),
    z.object({ kind: z.literal('not'), operand: expressionSchema }).strict(),
  ]),
) as z.ZodType<Expression>;

/** What expressions read: the run's arguments and the results saved by earlier nodes. */
export interface ExpressionEnvironment {
  input: Record<string, unknown>;
  vars: Record<string, unknown>;
}

const MISSING = Symbol('missing');

function lookup(env: ExpressionEnvironment, path: string): unknown {
  const [root, ...keys] = path.split('.');
  let value: unknown = root === 'input' ? env.input : env.vars;
  for (const key of keys) {
    if (Array.isArray(value) && /^\d+$/.test(key)) value = Number(key) < value.length ? value[Number(key)] : MISSING;
    else if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, key))
      value = (value as Record<string, unknown>)[key];
    else value = MISSING;
    if (value === MISSING) return MISSING;
  }
  return value;
}

function resolve(env: ExpressionEnvironment, path: string): unknown {
  const value = lookup(env, path);
  if (value === MISSING)
    throw new PunkError('WorkflowExpression', `${path} is not set (guard it with an exists condition in a branch)`, { path });
  return value;
}

function ordered(kind: string, left: unknown, right: unknown): boolean {
  if (!((typeof left === 'number' && typeof right === 'number') || (typeof left === 'string' && typeof right === 'string')))
    throw new PunkError(
      'WorkflowExpression',
      `${kind} compares two numbers or two strings, not ${JSON.stringify(left)} and ${JSON.stringify(right)}`,
    );
  if (kind === 'lt') return left < right;
  if (kind === 'le') return left <= right;
  if (kind === 'gt') return left > right;
  return left >= right;
}

function boolean(kind: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new PunkError('WorkflowExpression', `${kind} takes true or false, not ${JSON.stringify(value)}`);
  return value;
}

/**
 * Evaluates an expression against the environment. A template renders each `{{path}}` (strings as they are, other
 * values as JSON); eq/ne compare deeply; lt/le/gt/ge compare two numbers or two strings; and/or/not take booleans
 * (and/or stop at the first operand that decides).
 * @throws PunkError `WorkflowExpression` naming a path that is not set or operands of the wrong type.
 */
export function evaluateExpression(expression: Expression, env: ExpressionEnvironment): unknown {
  switch (expression.kind) {
    case 'literal':
      return expression.value;
    case 'template':
      return expression.template.replace(TEMPLATE_PLACEHOLDER, (_, path: string) => {
        const value = resolve(env, path);
        return typeof value === 'string' ? value : JSON.stringify(value);
      });
    case 'ref':
      return resolve(env, expression.path);
    case 'exists':
      return lookup(env, expression.path) !== MISSING;
    case 'object':
      return Object.fromEntries(Object.entries(expression.fields).map(([key, field]) => [key, evaluateExpression(field, env)]));
    case 'eq':
    case 'ne': {
      const equal = isDeepStrictEqual(evaluateExpression(expression.left, env), evaluateExpression(expression.right, env));
      return expression.kind === 'eq' ? equal : !equal;
    }
    case 'lt':
    case 'le':
    case 'gt':
    case 'ge':
      return ordered(expression.kind, evaluateExpression(expression.left, env), evaluateExpression(expression.right, env));
    case 'and':
      return expression.operands.every((operand) => boolean('and', evaluateExpression(operand, env)));
    case 'or':
      return expression.operands.some((operand) => boolean('or', evaluateExpression(operand, env)));
    case 'not':
      return !boolean('not', evaluateExpression(expression.operand, env));
  }
}
