/**
 * The fingerprint of a tool definition: what a model is shown of a tool, canonicalized and hashed, so that any
 * change to it (a description that now instructs the model differently, a schema that grew a parameter) changes
 * the fingerprint and nothing else does (key order, whitespace). Pure functions.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { PunkError } from '@punk/lib';

/**
 * The fields of a listed tool that are pinned: every field of MCP 2025-11-25 `Tool` a client passes to the model
 * (`name`, `title`, `description`, `inputSchema`, `outputSchema`, `annotations`). Display-only and protocol fields
 * (`icons`, `execution`, `_meta`) are not covered: a change to them alone neither flags nor hides a tool.
 */
export const PINNED_FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'] as const;

/** The pinned part of a tool definition: the {@link PINNED_FIELDS} it has (absent fields stay absent). */
export type PinnedDefinition = Partial<Record<(typeof PINNED_FIELDS)[number], unknown>> & { name: string };

/**
 * The pinned part of a listed tool: its {@link PINNED_FIELDS}, fields the server left out (or set to `undefined`)
 * left out, every other field dropped.
 * @throws PunkError `InvalidToolDefinition` when `tool.name` is not a non-empty string.
 */
export function pinnedDefinition(tool: Record<string, unknown>): PinnedDefinition {
  if (typeof tool.name !== 'string' || tool.name === '') {
    throw new PunkError(
      'InvalidToolDefinition',
      `a listed tool has no name (name: ${JSON.stringify(tool.name) ?? 'undefined'}); a tool must have a non-empty string name`,
    );
  }
  const definition: Record<string, unknown> = {};
  for (const field of PINNED_FIELDS) if (tool[field] !== undefined) definition[field] = tool[field];
  return definition as PinnedDefinition;
}

/**
 * The canonical JSON of a definition: RFC 8785 (JSON Canonicalization Scheme) as implemented by the
 * `canonicalize` package: object keys sorted by UTF-16 code units at every depth, no whitespace, numbers in their
 * ECMAScript shortest form, `undefined` members dropped.
 * @throws PunkError `InvalidToolDefinition` when the value is not JSON (NaN, Infinity, a cycle).
 */
export function canonicalJson(value: unknown): string {
  try {
    const text = canonicalize(value);
    if (text === undefined) throw new Error('the value is not JSON');
    return text;
  } catch (error) {
    throw new PunkError('InvalidToolDefinition', `a tool definition cannot be canonicalized as JSON: ${(error as Error).message}`);
  }
}

/**
 * The fingerprint of a listed tool: SHA-256 (FIPS 180-4), lower-case hex (64 digits), of the UTF-8
 * {@link canonicalJson} of its {@link pinnedDefinition}.
 * @throws PunkError `InvalidToolDefinition` as {@link pinnedDefinition} and {@link canonicalJson} do.
 */
export function toolFingerprint(tool: Record<string, unknown>): string {
  return createHash('sha256')
    .update(canonicalJson(pinnedDefinition(tool)), 'utf8')
    .digest('hex');
}
