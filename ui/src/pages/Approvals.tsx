/**
 * The Approvals view: the requests the key may see (pending by default, live), each with its tool, server, arguments
 * (from its `approval.requested` event), caller, rule and expiry; a pending one is approved or denied with a reason
 * (`POST /approvals/{id}/approve|deny`) by who may decide it (the API's `mayDecide`, by governance's rule; others are
 * told why not, its `decideRefusal`), and a call waiting for it goes on at once (governance announces the decision).
 */
import '../views.css';
import { useState } from 'preact/hooks';
import { decideApproval, listApprovals, type ApprovalView } from '../api.js';
import { approvalArguments, json, outcomeClass, timeText, usePolling } from '../api-runs.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { Link } from '../router.js';

const STATES = ['pending', 'approved', 'denied', 'expired', 'consumed'] as const;

/** Time left until `iso`, in words (`in 14 min`, `expired`). */
function expiryText(iso: string, now: number): string {
  const ms = Date.parse(iso) - now;
  if (ms <= 0) return 'expired';
  const minutes = Math.floor(ms / 60_000);
  return minutes >= 1 ? `in ${String(minutes)} min` : `in ${String(Math.ceil(ms / 1000))} s`;
}

/** The arguments of one request, loaded from its run. */
function Arguments(props: { approval: ApprovalView }) {
  const args = useLoad(() => approvalArguments(props.approval), [props.approval.id]);
  if (args.error) return <ErrorMessage message={args.error} />;
  if (args.loading && args.data === undefined) return <p class="muted">Loading the arguments…</p>;
  if (args.data === undefined)
    return (
      <p class="muted">
        The arguments are not on the ledger, or this key may not read it; their SHA-256 digest is{' '}
        <span class="mono">{props.approval.argumentsDigest}</span>.
      </p>
    );
  return <pre aria-label={`Arguments of ${props.approval.tool}`}>{json(args.data)}</pre>;
}

/** One request: what it would run and, while pending, the decision. */
function ApprovalCard(props: { approval: ApprovalView; onDecided: (message: string) => void }) {
  const { approval } = props;
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const reasonId = `reason-${approval.id}`;
  const decide = async (verdict: 'approve' | 'deny') => {
    setBusy(true);
    setError(undefined);
    try {
      await decideApproval(approval.id, verdict, reason.trim() || undefined);
      props.onDecided(`${verdict === 'approve' ? 'Approved' : 'Denied'} ${approval.server}/${approval.tool} (${approval.id.slice(0, 8)}).`);
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const now = Date.now();
  return (
    <article class="box" aria-labelledby={`approval-${approval.id}`}>
      <h2 id={`approval-${approval.id}`}>
        <span class="mono">
          {approval.server}/{approval.tool}
        </span>{' '}
        <span class={`badge ${outcomeClass(approval.state)}`}>{approval.state}</span>
      </h2>
      <dl class="summary grid">
        <div>
          <dt>Caller</dt>
          <dd>
            {approval.principal.subject}
            {approval.principal.groups.length > 0 && <span class="muted"> ({approval.principal.groups.join(', ')})</span>}
          </dd>
        </div>
        <div>
          <dt>Rule</dt>
          <dd class="mono">{approval.rule}</dd>
        </div>
        <div>
          <dt>Requested</dt>
          <dd>
            <time dateTime={approval.createdAt}>{timeText(approval.createdAt)}</time>
          </dd>
        </div>
        <div>
          <dt>Expires</dt>
          <dd>
            <time dateTime={approval.expiresAt}>{timeText(approval.expiresAt)}</time> ({expiryText(approval.expiresAt, now)})
          </dd>
        </div>
        <div>
          <dt>Run</dt>
          <dd>
            <Link to={`runs/${encodeURIComponent(approval.runId)}`} class="mono">
              {approval.runId.slice(0, 8)}
            </Link>
          </dd>
        </div>
        {approval.decidedBy && (
          <div>
            <dt>Decided by</dt>
            <dd>
              {approval.decidedBy}
              {approval.reason && `: ${approval.reason}`}
            </dd>
          </div>
        )}
      </dl>
      <h3>Arguments</h3>
      <Arguments approval={approval} />
      {approval.state === 'pending' && !approval.mayDecide && <p class="muted">{approval.decideRefusal}</p>}
      {approval.mayDecide && (
        <form
          aria-label={`Decide ${approval.server}/${approval.tool}`}
          onSubmit={(event) => {
            event.preventDefault();
            void decide('approve');
          }}
        >
          <label for={reasonId}>Reason</label>
          <input id={reasonId} type="text" value={reason} maxLength={1024} onInput={(event) => setReason(event.currentTarget.value)} />
          <ErrorMessage message={error} />
          <div class="actions decide">
            <button type="submit" disabled={busy}>
              Approve
            </button>
            <button type="button" class="danger" disabled={busy} onClick={() => void decide('deny')}>
              Deny
            </button>
          </div>
        </form>
      )}
    </article>
  );
}

/** The Approvals view. */
export function ApprovalsPage() {
  const [state, setState] = useState<string>('pending');
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const approvals = useLoad(() => listApprovals({ state: state || undefined }), [state]);
  usePolling(approvals);
  return (
    <Page title="Approvals">
      <div class="narrow">
        <div>
          <label for="approvals-state">Show</label>
          <select id="approvals-state" value={state} onChange={(event) => setState(event.currentTarget.value)}>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
            <option value="">all</option>
          </select>
        </div>
      </div>
      <div aria-live="polite">{notice && <p class="notice">{notice}</p>}</div>
      <ErrorMessage message={approvals.error} />
      {approvals.data === undefined ? (
        !approvals.error && <p class="muted">Loading approvals…</p>
      ) : approvals.data.length === 0 ? (
        <p class="muted">No {state || ''} approval requests.</p>
      ) : (
        approvals.data.map((approval) => (
          <ApprovalCard
            key={`${approval.id}/${approval.state}`}
            approval={approval}
            onDecided={(message) => {
              setNotice(message);
              void approvals.reload();
            }}
          />
        ))
      )}
    </Page>
  );
}
