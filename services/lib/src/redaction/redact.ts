/**
 * Hiding secret values in texts that leave the gateway (error messages, log lines, ledger summaries): one rule for
 * the connections' credentials and literals and for the secrets of an OAuth2 refresh. `redactJson` also carries the
 * tenant redaction setting's masking over a ledger event's data (mask.ts).
 */

/** Shortest secret value {@link redact} hides: shorter ones would blank out ordinary words of messages. */
const MIN_REDACTED_LENGTH = 4;

/** What {@link redact} puts in place of a secret value. */
const REDACTED = '<redacted>';

/**
 * `text` (an error message) with every occurrence of every `secrets` value of at least
 * {@link MIN_REDACTED_LENGTH} characters replaced by {@link REDACTED}. A value is also hidden in pieces split at
 * control characters, since messages quote such values escaped (`\r\n`, `\x00`) rather than as they are.
 */
export function redact(text: string, secrets: Iterable<string>): string {
  if (secrets instanceof Set && secrets.size === 0) return text;
  let out = text;
  for (const piece of [...piecesOf(secrets)].sort((a, b) => b.length - a.length)) out = out.replaceAll(piece, REDACTED);
  return out;
}

/** The texts {@link redact} replaces for `secrets`: each value and its pieces between control characters, long enough. */
function piecesOf(secrets: Iterable<string>): Set<string> {
  const hidden = new Set<string>();
  for (const secret of secrets) {
    // eslint-disable-next-line no-control-regex -- a secret's control characters split it into pieces
    for (const piece of [secret, ...secret.split(/[\x00-\x1f\x7f]+/)]) if (piece.length >= MIN_REDACTED_LENGTH) hidden.add(piece);
  }
  return hidden;
}

/**
 * `value`, parsed from the JSON `text`, with {@link redact} applied to its strings for `secrets` ({@link redactJson}),
 * or `value` itself without a walk when the text shows that no string of it holds a secret: a text without a
 * backslash holds every string of its value as it is, so a piece absent from the text is absent from the value.
 * Without `text` (or with an escape in it) the value is walked.
 */
export function redactParsed<T>(value: T, text: string | undefined, secrets: ReadonlySet<string>): T {
  if (secrets.size === 0) return value;
  if (text !== undefined && !text.includes('\\')) {
    let found = false;
    for (const piece of piecesOf(secrets)) if ((found = text.includes(piece))) break;
    if (!found) return value;
  }
  return redactJson(value, (string) => redact(string, secrets));
}

/**
 * `value` (a JSON value an upstream sent: a result, an error's data, a notification's params) with `hide` applied
 * to every string in it, object keys included; its structure is kept. Values that are not JSON (none come off
 * the wire) are kept as they are.
 */
export function redactJson<T>(value: T, hide: (text: string) => string): T {
  // Copy-on-write: a node none of whose strings changes is returned as it is (no copy on the call path).
  const walk = (node: unknown): unknown => {
    if (typeof node === 'string') return hide(node);
    if (Array.isArray(node)) {
      const items = node.map(walk);
      return items.some((item, i) => item !== node[i]) ? items : node;
    }
    if (node === null || typeof node !== 'object') return node;
    const prototype: unknown = Object.getPrototypeOf(node);
    if (prototype !== Object.prototype && prototype !== null) return node;
    const entries = Object.entries(node);
    const walked = entries.map(([key, item]) => [hide(key), walk(item)] as const);
    return walked.some(([key, item], i) => key !== entries[i]![0] || item !== entries[i]![1]) ? Object.fromEntries(walked) : node;
  };
  return walk(value) as T;
}
