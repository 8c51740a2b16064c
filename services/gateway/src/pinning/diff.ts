/**
 * A structural diff of two tool definitions for the ledger: which members were added, removed or changed, each
 * named by its JSON Pointer (RFC 6901), with the values on either side, bounded in size. Pure functions.
 */
import { canonicalJson } from './fingerprint.js';

/** One difference: `added` has only `after`, `removed` only `before`, `changed` both. */
export interface DefinitionChange {
  op: 'added' | 'removed' | 'changed';
  /** RFC 6901 JSON Pointer of the member in the definition (`/inputSchema/properties/path`; `` is the whole definition). */
  path: string;
  before?: unknown;
  after?: unknown;
}

/** The differences in document order (object members by sorted key, array items by index), and how many were left out. */
export interface DefinitionDiff {
  changes: DefinitionChange[];
  /** Differences found beyond {@link DiffLimits.maxChanges}, not listed. */
  omitted: number;
}

/** Bounds of a {@link DefinitionDiff}. */
export interface DiffLimits {
  /** Most differences listed. */
  maxChanges: number;
  /**
   * Longest value kept whole, in characters: a longer string is cut to this length and marked
   * `… (<n> more characters)`; an object or array whose canonical JSON is longer becomes that JSON, cut the same way.
   */
  maxValueChars: number;
}

/** The bounds the gateway records diffs with: 50 differences, values up to 1,000 characters. */
export const DEFAULT_DIFF_LIMITS: DiffLimits = { maxChanges: 50, maxValueChars: 1_000 };

/** Escapes one reference token of a JSON Pointer (RFC 6901 §3: `~` as `~0`, `/` as `~1`). */
export function pointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * The differences between two JSON values (two pinned definitions): objects are compared member by member,
 * arrays item by item (an item added at the end is one `added` entry; an item inserted before others shows as
 * changes of the items after it), anything else by value.
 * @throws PunkError `InvalidToolDefinition` when a value is not JSON (see `canonicalJson`).
 */
export function diffDefinitions(before: unknown, after: unknown, limits: DiffLimits = DEFAULT_DIFF_LIMITS): DefinitionDiff {
  const diff: DefinitionDiff = { changes: [], omitted: 0 };
  const bound = (value: unknown): unknown => boundValue(value, limits.maxValueChars);
  const record = (change: DefinitionChange): void => {
    if (diff.changes.length < limits.maxChanges) diff.changes.push(change);
    else diff.omitted++;
  };
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (isObject(a) && isObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      for (const key of keys) {
        const at = `${path}/${pointerToken(key)}`;
        if (a[key] === undefined && b[key] !== undefined) record({ op: 'added', path: at, after: bound(b[key]) });
        else if (a[key] !== undefined && b[key] === undefined) record({ op: 'removed', path: at, before: bound(a[key]) });
        else if (a[key] !== undefined) walk(a[key], b[key], at);
      }
      return;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        const at = `${path}/${i}`;
        if (i >= a.length) record({ op: 'added', path: at, after: bound(b[i]) });
        else if (i >= b.length) record({ op: 'removed', path: at, before: bound(a[i]) });
        else walk(a[i], b[i], at);
      }
      return;
    }
    if (canonicalJson(a) !== canonicalJson(b)) record({ op: 'changed', path, before: bound(a), after: bound(b) });
  };
  walk(before, after, '');
  return diff;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function boundValue(value: unknown, maxChars: number): unknown {
  if (typeof value === 'string') return cut(value, maxChars);
  if (typeof value !== 'object' || value === null) return value;
  const json = canonicalJson(value);
  return json.length > maxChars ? cut(json, maxChars) : value;
}

function cut(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}… (${text.length - maxChars} more characters)` : text;
}
