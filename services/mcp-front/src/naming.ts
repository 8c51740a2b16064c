/**
 * Namespacing of tool and prompt names on the aggregated endpoint (`/mcp`).
 *
 * The rule, applied to every tool and prompt of every server of the tenant:
 *
 * 1. The full name is `<server>__<name>` (two underscores), for example
 *    `everything__echo`.
 * 2. Every character outside `[A-Za-z0-9_-]` (one Unicode code point at a
 *    time) becomes `_`. That set, at most 64 characters long, is what common
 *    clients accept (the MCP 2025-11-25 spec, server/tools "Tool names",
 *    allows more; Claude and OpenAI clients do not).
 * 3. When the result is longer than 64 characters, it is shortened
 *    deterministically: its first 55 characters, then `_`, then the first
 *    8 hex characters of the SHA-256 of the full name of step 1 (UTF-8).
 * 4. When two different originals still land on the same exposed name
 *    (for example `a.b` and `a_b`), the one that sorts later by
 *    (server, name) takes the hashed form of step 3 instead.
 *
 * Calls are routed back through the map built here (`NameMap`), never by
 * re-parsing an exposed name: neither `__` nor the shortening is reversible.
 */
import { createHash } from 'node:crypto';

/** Longest exposed name, in characters. */
export const MAX_NAME_LENGTH = 64;
/** Separator between the server name and the upstream name. */
export const NAMESPACE_SEPARATOR = '__';
const HASH_CHARS = 8;
const OUTSIDE_ALLOWED = /[^A-Za-z0-9_-]/gu;

/** An upstream name and the server that lists it. */
export interface QualifiedName {
  server: string;
  name: string;
}

/** First 8 hex characters of the SHA-256 of `text` (UTF-8). */
function shortHash(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex').slice(0, HASH_CHARS);
}

/** Step 3 of the rule: a prefix of `safe`, `_`, and the hash of `full`; always exactly 64 characters or fewer. */
function hashed(full: string, safe: string): string {
  return `${safe.slice(0, MAX_NAME_LENGTH - HASH_CHARS - 1)}_${shortHash(full)}`;
}

/**
 * The exposed name of one upstream tool or prompt on the aggregated endpoint,
 * by steps 1 to 3 of the rule in this module's docstring (collisions, step 4,
 * are resolved by `NameMap`). Pure and deterministic.
 */
export function namespacedName(server: string, name: string): string {
  const full = `${server}${NAMESPACE_SEPARATOR}${name}`;
  const safe = full.replace(OUTSIDE_ALLOWED, '_');
  return safe.length <= MAX_NAME_LENGTH ? safe : hashed(full, safe);
}

/**
 * A two-way map between exposed names and (server, upstream name), built once
 * per catalog. With `namespaced` false (the per-server endpoint) names are
 * exposed unchanged.
 */
export class NameMap<T extends QualifiedName> {
  private readonly byExposed = new Map<string, T>();

  /**
   * @param entries - every upstream tool (or prompt) in scope; order does not
   *   matter: entries are sorted by (server, name) so the map is deterministic.
   * @param namespaced - true on the aggregated endpoint.
   */
  constructor(entries: Iterable<T>, namespaced: boolean) {
    const sorted = [...entries].sort((a, b) => compare(a.server, b.server) || compare(a.name, b.name));
    for (const entry of sorted) {
      if (!namespaced) {
        if (!this.byExposed.has(entry.name)) this.byExposed.set(entry.name, entry);
        continue;
      }
      let exposed = namespacedName(entry.server, entry.name);
      if (this.byExposed.has(exposed)) {
        const full = `${entry.server}${NAMESPACE_SEPARATOR}${entry.name}`;
        exposed = hashed(full, full.replace(OUTSIDE_ALLOWED, '_'));
      }
      if (!this.byExposed.has(exposed)) this.byExposed.set(exposed, entry);
    }
  }

  /** The entry an exposed name routes to, or undefined when no entry has that name. */
  resolve(exposed: string): T | undefined {
    return this.byExposed.get(exposed);
  }

  /** Every (exposed name, entry) pair, sorted by (server, name). */
  entries(): IterableIterator<[string, T]> {
    return this.byExposed.entries();
  }

  /** Number of exposed names. */
  get size(): number {
    return this.byExposed.size;
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
