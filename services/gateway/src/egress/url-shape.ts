/**
 * The shape every upstream URL must have, whatever the destination policy: an http: or https: URL with a
 * host, no credentials and nothing that parsers read differently (WHATWG URL Standard vs RFC 3986).
 */
import { PunkError } from '@punk/lib';

/** Schemes an upstream MCP server may be reached by (MCP transports: Streamable HTTP and HTTP+SSE). */
const ALLOWED_SCHEMES = new Set(['http:', 'https:']);

/** An authority's userinfo as a lenient reader sees it: everything between `//` and the last `@` before `/`, `?` or `#`. */
const USERINFO = /\/\/[^/?#]*@/;

/** What a redacted query value, or a query part without a name, is shown as. */
export const REDACTED_QUERY_VALUE = '<redacted>';

/**
 * `url` with any userinfo (`user:password@`) removed and the value of every query parameter replaced by
 * {@link REDACTED_QUERY_VALUE} (names kept: `?token=<redacted>`), for messages, logs and API answers. A URL with
 * userinfo comes back WHATWG-normalized without it; other text is returned as written (a message shows
 * `http://0x7f.1` as the caller wrote it), less anything a lenient parser would read as userinfo
 * (`http://host\\user:pass@x`) and less its query values.
 */
export function redactUrl(url: string | URL): string {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed && (parsed.username !== '' || parsed.password !== '')) {
    parsed.username = '';
    parsed.password = '';
    return redactQuery(parsed.href);
  }
  return redactQuery(String(url).replace(USERINFO, '//'));
}

/** `text` with each value of its query (from the first `?` to a `#` or the end) redacted; a part without `=` is redacted whole. */
function redactQuery(text: string): string {
  const start = text.indexOf('?');
  if (start < 0) return text;
  const hash = text.indexOf('#', start);
  const end = hash < 0 ? text.length : hash;
  const query = text
    .slice(start + 1, end)
    .split('&')
    .map((part) => {
      if (part === '') return part;
      const equals = part.indexOf('=');
      return equals < 0 ? REDACTED_QUERY_VALUE : `${part.slice(0, equals)}=${REDACTED_QUERY_VALUE}`;
    })
    .join('&');
  return `${text.slice(0, start + 1)}${query}${text.slice(end)}`;
}

/** The `EgressRefused` error for `url` (userinfo and query values removed) and the sentence saying why. */
export function egressRefused(url: string | URL, reason: string, details: Record<string, unknown> = {}): PunkError {
  const shown = redactUrl(url);
  return new PunkError('EgressRefused', `upstream URL ${shown} refused: ${reason}`, { url: shown, ...details });
}

/**
 * Parses `url` and checks its shape; applied to every upstream URL and every redirect target, whatever
 * the destination policy (even in the open-dev carve-out).
 *
 * Refused, each with `PunkError` code `EgressRefused` naming the URL (userinfo and query values removed) and the reason:
 * - text that is not an absolute URL;
 * - control characters, whitespace or backslashes, which the WHATWG parser drops or reads as `/` while
 *   other parsers do not (`http://a.example\@b.example` is host `a.example` here, `b.example` elsewhere);
 * - a scheme other than `http:` or `https:` (`file:`, `gopher:`, `ftp:`, `data:`, ...);
 * - userinfo (`http://user:pass@host`): credentials belong in a header or a credential (`cred:<id>`);
 * - a fragment (`#...`), which is never sent and can hide what the URL seems to say;
 * - no host right after `//` (`http:///host` and `http:host`, which the WHATWG parser reads as `http://host/`).
 *
 * @returns the parsed URL (WHATWG-normalized: `http://0x7f.1` becomes `http://127.0.0.1/`).
 */
export function checkUrlShape(url: string | URL): URL {
  const text = String(url);
  // eslint-disable-next-line no-control-regex -- control characters are what this refuses
  if (/[\u0000-\u0020\u007f\\]/.test(text))
    throw egressRefused(text, 'it contains whitespace, a control character or a backslash, which URL parsers read differently');
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    throw egressRefused(text, 'it is not an absolute URL');
  }
  if (!ALLOWED_SCHEMES.has(parsed.protocol))
    throw egressRefused(text, `the scheme ${parsed.protocol} is not allowed: an upstream is reached over http: or https: only`, {
      scheme: parsed.protocol,
    });
  if (parsed.username !== '' || parsed.password !== '')
    throw egressRefused(parsed, 'credentials in the URL are not allowed: put them in a header or a credential (cred:<id>)');
  if (parsed.hash !== '' || parsed.href.endsWith('#'))
    throw egressRefused(text, 'a fragment (#...) is not allowed: it is never sent to the server');
  // WHATWG reads `http:host` and `http:///host` as `http://host/`; RFC 3986 readers see no host there.
  if (parsed.hostname === '' || !/^https?:\/\/[^/]/i.test(text))
    throw egressRefused(text, 'the host must follow the scheme as in http://host/');
  return parsed;
}
