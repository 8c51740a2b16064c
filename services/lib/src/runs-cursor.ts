/**
 * The cursor of `GET /runs` (`cursor` in, `nextCursor` out): an opaque position in the runs' order (last event
 * time, newest first, then run id), as MCP's list pagination (2025-11-25 server/utilities/pagination) and a
 * Kubernetes list's `continue` are. A page goes on strictly after the run the cursor names (keyset pagination), so
 * runs whose last events share one time are each listed once however the pages cut them, where a time alone
 * (`before`) skipped the ones past a page's end.
 *
 * Wire shape: the base64url encoding of the JSON `{"v":1,"lastAt":<RFC 3339>,"runId":<id>}`. It holds nothing
 * secret and forging one only selects another page of what the caller may read anyway, so it is not signed.
 */

/** The run a page ended with: its last event time (RFC 3339, as `RunSummary.lastAt`) and its id. */
export interface RunsPosition {
  lastAt: string;
  runId: string;
}

const VERSION = 1;

/** Longest cursor decoded, in characters (a run id and a time; anything longer is not one Punk returned). */
const MAX_CURSOR_LENGTH = 2_048;

/** The cursor of the page after `run`. */
export function encodeRunsCursor(run: RunsPosition): string {
  return Buffer.from(JSON.stringify({ v: VERSION, lastAt: run.lastAt, runId: run.runId }), 'utf8').toString('base64url');
}

/** The position `cursor` names, or `undefined` when it is not a cursor `encodeRunsCursor` made. */
export function decodeRunsCursor(cursor: string): RunsPosition | undefined {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { v, lastAt, runId } = parsed as Record<string, unknown>;
  if (v !== VERSION || typeof runId !== 'string' || runId === '' || typeof lastAt !== 'string') return undefined;
  if (!/^\d{4}-\d{2}-\d{2}T/.test(lastAt) || Number.isNaN(Date.parse(lastAt))) return undefined;
  return { lastAt, runId };
}
