/**
 * The Audit view: verifies the tenant's ledger chain (`GET /ledger/verify`, bounded and incremental: it asks again
 * while an answer says `complete: false`, up to {@link MAX_ROUNDS} requests) and names the first broken event, linked
 * to its run.
 */
import '../views.css';
import { useState } from 'preact/hooks';
import type { Verification } from '../api.js';
import { timeText, verifyLedgerFrom as verify } from '../api-runs.js';
import { ErrorMessage, messageOf, Page } from '../components.js';
import { Link } from '../router.js';

/** Most verification requests one click makes (each checks up to 100,000 events or about 2 s). */
const MAX_ROUNDS = 20;

/** The Audit view. */
export function AuditPage() {
  const [genesis, setGenesis] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const [result, setResult] = useState<{ verification: Verification; rounds: number; at: string } | undefined>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      let verification = await verify(genesis);
      let rounds = 1;
      while (verification.ok && !verification.complete && rounds < MAX_ROUNDS) {
        verification = await verify(false);
        rounds += 1;
      }
      setResult({ verification, rounds, at: new Date().toISOString() });
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const v = result?.verification;
  return (
    <Page title="Audit">
      <p>
        Every event of the ledger is hash-chained to the one before it. Verifying recomputes each hash from the stored event and checks each
        link, then that the chain ends at its head record.
      </p>
      <form
        class="verify-form"
        aria-label="Verify the ledger"
        onSubmit={(event) => {
          event.preventDefault();
          void run();
        }}
      >
        <label class="check">
          <input type="checkbox" checked={genesis} onChange={(event) => setGenesis(event.currentTarget.checked)} /> From the first event
          (not only what changed since the last verification)
        </label>
        <div class="actions">
          <button type="submit" disabled={busy}>
            {busy ? 'Verifying…' : 'Verify the ledger'}
          </button>
        </div>
      </form>
      <ErrorMessage message={error} />
      <div aria-live="polite">
        {v?.ok === true && (
          <section class="notice" aria-label="Verification result">
            <p>
              <span class="badge ok">verified</span> The chain of tenant <strong>{v.tenant}</strong> verifies up to event {v.events}
              {v.complete
                ? ', its head: every event is intact.'
                : `; not to its end yet (${String(result!.rounds)} requests): verify again to go on.`}
            </p>
            <p class="muted">
              Head hash <span class="mono">{v.head}</span>; {v.checked} events checked by the last request; checked at{' '}
              {timeText(result!.at)}.{v.sweep.sweptAt && ` Older events last re-checked ${timeText(v.sweep.sweptAt)}.`}
            </p>
          </section>
        )}
        {v?.ok === false && v.firstBroken && (
          <section class="error" role="alert" aria-label="Verification result">
            <p>
              <span class="badge bad">broken</span> The chain of tenant <strong>{v.tenant}</strong> is broken at event{' '}
              {v.firstBroken.tenantSeq}: <strong>{v.firstBroken.reason}</strong>.
            </p>
            <p>{v.firstBroken.message}</p>
            <p>
              {v.firstBroken.id ? (
                <>
                  First broken event <span class="mono">{v.firstBroken.id}</span>
                  {v.firstBroken.runId && (
                    <>
                      {' '}
                      in run <Link to={`runs/${encodeURIComponent(v.firstBroken.runId)}`}>{v.firstBroken.runId}</Link>
                    </>
                  )}
                  .
                </>
              ) : (
                'The first broken event is missing from the ledger.'
              )}
            </p>
          </section>
        )}
      </div>
    </Page>
  );
}
