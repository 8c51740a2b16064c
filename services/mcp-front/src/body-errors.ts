/**
 * What the HTTP APIs answer when a request body cannot be read: body-parser's errors (http-errors with a 4xx
 * `status` and a `type` such as `encoding.unsupported`, `charset.unsupported` or `request.aborted`, or a zlib error
 * for a body that does not match its `Content-Encoding`) become that 4xx with a code and a sentence, never a 500.
 */

/** A refusal of an unreadable body: the HTTP status, the `error.code` and the `error.message` to answer. */
export interface BodyRefusal {
  status: number;
  code: string;
  message: string;
}

/** The `error.code` of each status body-parser refuses with; others are `InvalidRequest`. */
const CODES: Record<number, string> = { 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType' };

/**
 * The refusal of a body-parser error (any error carrying a 4xx `status`), or undefined for another error. The
 * message says what was wrong with the body; it never quotes the body (JSON parse errors, which would, are
 * answered by the callers' own `entity.parse.failed` sentence before this).
 */
export function bodyRefusal(error: unknown): BodyRefusal | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, type, code, message } = error as { status?: unknown; type?: unknown; code?: unknown; message?: unknown };
  if (typeof status !== 'number' || status < 400 || status > 499) return undefined;
  // checkJsonDepth's refusal says all itself.
  if (type === 'entity.too.deep' && typeof message === 'string') return { status, code: 'InvalidRequest', message };
  const why = typeof message === 'string' && message !== '' ? message : 'malformed';
  // zlib's errors (Z_DATA_ERROR…) carry no type: a body that is not what its Content-Encoding says.
  const text =
    typeof code === 'string' && code.startsWith('Z_')
      ? `the body does not match its Content-Encoding (${why})`
      : `the body could not be read: ${why}${typeof type === 'string' ? ` (${type})` : ''}`;
  return { status, code: CODES[status] ?? 'InvalidRequest', message: text };
}
