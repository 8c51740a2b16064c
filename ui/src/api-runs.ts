/**
 * What the Runs, Run, Audit and Approvals views read beyond `api.ts`: a run's stored events with their fields typed
 * (the ledger's `StoredEvent`: a `ledgerEventSchema` event with `tenantSeq`, `recordedAt`, `prevHash`, `hash`), the
 * arguments of an approval's call (on its `approval.requested` event, docs/governance.md "Approvals"), and a hook
 * that keeps an answer fresh by polling (a browser's EventSource cannot send the bearer key, and polling works
 * against every replica alike).
 */
import type { z } from 'zod';
import type { ledgerEventSchema } from '@punk/lib';
import { useEffect } from 'preact/hooks';
import { apiRequest, getRun, queryOf, type ApprovalView, type Run, type Verification } from './api.js';
import type { Loaded } from './components.js';

/** One stored event of a run, in chain order (`GET /runs/{id}`). Times are RFC 3339. */
export type RunEvent = z.infer<typeof ledgerEventSchema> & { tenantSeq: number; recordedAt: string; prevHash: string; hash: string };

/** The events of `run`, typed (the API declares them as loose objects). */
export function eventsOf(run: Run): RunEvent[] {
  return run.events as unknown as RunEvent[];
}

/**
 * The arguments of `approval`'s call, as the ledger stored them (masked when redaction is on): `data.arguments` of
 * the `approval.requested` event in the approval's run; undefined when the run or that field is not there (a request
 * recorded before requests carried their arguments) or the key may not read the ledger.
 * @throws ApiError from `GET /runs/{id}` other than 403 and 404.
 */
export async function approvalArguments(approval: ApprovalView): Promise<Record<string, unknown> | undefined> {
  let run: Run;
  try {
    run = await getRun(approval.runId);
  } catch (error) {
    // A key that may decide but not read the ledger (it is for admins under punk up) sees the digest alone.
    const kind = (error as { kind?: string }).kind;
    if (kind === 'notFound' || kind === 'forbidden') return undefined;
    throw error;
  }
  const requested = eventsOf(run).find((event) => event.type === 'approval.requested' && event.data['approvalId'] === approval.id);
  const args = requested?.data['arguments'];
  return typeof args === 'object' && args !== null ? (args as Record<string, unknown>) : undefined;
}

/** `GET /ledger/verify`: from the stored checkpoint, or (`genesis` true) again from the first event. */
export function verifyLedgerFrom(genesis: boolean): Promise<Verification> {
  return apiRequest<Verification>('GET', `/ledger/verify${queryOf({ from: genesis ? 'genesis' : undefined })}`);
}

/** How often the live views ask again, in milliseconds. */
export const POLL_MS = 1_500;

/** Reloads `loaded` every `intervalMs` while the view is shown and the tab is visible. */
export function usePolling(loaded: Pick<Loaded<unknown>, 'reload'>, intervalMs = POLL_MS): void {
  const { reload } = loaded;
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') void reload();
    }, intervalMs);
    return () => clearInterval(timer);
  }, [reload, intervalMs]);
}

/** `value` as pretty JSON for a `<pre>`. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** An RFC 3339 time shown in the browser's locale, to the second. */
export function timeText(iso: string): string {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

/** The badge class of a run's or approval's outcome: `ok`, `bad` or `warn`. */
export function outcomeClass(outcome: string | undefined): string {
  if (outcome === 'ok' || outcome === 'approved' || outcome === 'consumed') return 'ok';
  if (outcome === 'approval_required' || outcome === 'pending' || outcome === 'truncated' || outcome === undefined) return 'warn';
  return 'bad';
}
