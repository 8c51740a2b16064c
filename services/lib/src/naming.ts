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
 *    (`a.b` and `a_b`, or a long name whose shortened form is another
 *    tool's literal 64-character name), a name taken unchanged by step 1
 *    wins over one changed by step 2, that one over one shortened by
 *    step 3, and among equals the one sorting first by (server, name). The
 *    others take the hashed form of step 3 or, when that is taken too, the
 *    form of step 3 with the hash of `<full name>#<n>` for the first free
 *    n from 1 to 15. So no tool is dropped: only an entry listed twice (the
 *    same server and name) or one whose every candidate is taken is left
 *    out, and `NameMap.conflicts` says which and why.
 *
 * Calls are routed back through the map built here (`NameMap`), never by
 * re-parsing an exposed name: neither `__` nor the shortening is reversible.
 */
import { createHash } from 'node:crypto';

/**
 * Server name under which the gateway lists a tenant's ready McpWorkflows as tools (workflows/served.ts): on `/mcp`
 * each is `punk_workflow__<name>`, which no server's tool can be (a server's name is a DNS label, so the first `_`
 * of its tools' names is followed by another). It is no McpServer: no `/servers/<name>/mcp` endpoint serves it.
 */
export const WORKFLOW_SERVER = 'punk.workflow';

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

/** Salted hashes tried by step 4 after the plain one (`<full>#1` to `<full>#15`). */
const SALTED_ATTEMPTS = 15;

/** The exposed names step 4 tries, in order, for an entry whose preferred name is taken. */
function* alternatives(full: string, safe: string): Generator<string> {
  yield hashed(full, safe);
  for (let n = 1; n <= SALTED_ATTEMPTS; n++) yield hashed(`${full}#${String(n)}`, safe);
}

/** An entry a {@link NameMap} could not expose, and why. */
export interface NameConflict {
  server: string;
  name: string;
  /** A sentence naming the entry and what it collided with. */
  reason: string;
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
  /** The entries left out, with why (see step 4 of the rule); empty when every entry has a name. */
  readonly conflicts: NameConflict[] = [];

  /**
   * @param entries - every upstream tool (or prompt) in scope; order does not
   *   matter: the map is the same for any order of the same entries.
   * @param namespaced - true on the aggregated endpoint.
   */
  constructor(
    entries: Iterable<T>,
    /** True on the aggregated endpoint (names are `<server>__<name>`). */
    readonly namespaced: boolean,
  ) {
    const ranked = [...entries].map((entry) => {
      const full = `${entry.server}${NAMESPACE_SEPARATOR}${entry.name}`;
      const safe = full.replace(OUTSIDE_ALLOWED, '_');
      const preferred = namespaced ? namespacedName(entry.server, entry.name) : entry.name;
      // Step 4's precedence: unchanged, then changed by step 2, then shortened by step 3.
      const rank = !namespaced || preferred === full ? 0 : safe.length <= MAX_NAME_LENGTH ? 1 : 2;
      return { entry, full, safe, preferred, rank };
    });
    ranked.sort((a, b) => a.rank - b.rank || compare(a.entry.server, b.entry.server) || compare(a.entry.name, b.entry.name));
    const seen = new Set<string>();
    const pending: typeof ranked = [];
    for (const candidate of ranked) {
      const { entry, full } = candidate;
      if (seen.has(full)) {
        this.conflicts.push({ ...pick(entry), reason: `server ${entry.server} lists ${entry.name} more than once; the first is kept` });
        continue;
      }
      seen.add(full);
      if (this.byExposed.has(candidate.preferred)) pending.push(candidate);
      else this.byExposed.set(candidate.preferred, entry);
    }
    // Entries whose preferred name was taken come after every preferred name, so none takes another's preferred name.
    for (const { entry, full, safe, preferred } of pending) {
      const taker = this.byExposed.get(preferred);
      const owner = taker ? `${taker.name} of server ${taker.server}` : 'another entry';
      const free = namespaced ? [...alternatives(full, safe)].find((name) => !this.byExposed.has(name)) : undefined;
      if (free !== undefined) this.byExposed.set(free, entry);
      else
        this.conflicts.push({
          ...pick(entry),
          reason: `${entry.name} of server ${entry.server} would be exposed as ${preferred}, the name of ${owner}${namespaced ? ', and every shortened alternative is taken too' : ''}; it is not exposed`,
        });
    }
  }

  /** The entry an exposed name routes to, or undefined when no entry has that name. */
  resolve(exposed: string): T | undefined {
    return this.byExposed.get(exposed);
  }

  /** Every (exposed name, entry) pair: preferred names first, in step 4's order, then the renamed ones. */
  entries(): IterableIterator<[string, T]> {
    return this.byExposed.entries();
  }

  /** Number of exposed names. */
  get size(): number {
    return this.byExposed.size;
  }
}

function pick({ server, name }: QualifiedName): QualifiedName {
  return { server, name };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
