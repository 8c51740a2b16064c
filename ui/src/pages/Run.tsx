/**
 * A run's page: its summary and timings, the call's arguments and result, each governance decision with its rule and
 * reason, its approvals, and every event in chain order with its data, all as the ledger stored them (masked before
 * they were stored when redaction is on). Asked again every {@link POLL_MS} while it may still change.
 */
import '../views.css';
import type { ComponentChildren } from 'preact';
import { getRun } from '../api.js';
import { eventsOf, json, outcomeClass, timeText, usePolling, type RunEvent } from '../api-runs.js';
import { ErrorMessage, Page, useLoad } from '../components.js';
import { Link } from '../router.js';

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** One labelled value of the summary. */
function Fact(props: { label: string; children: ComponentChildren }) {
  return (
    <div>
      <dt>{props.label}</dt>
      <dd>{props.children}</dd>
    </div>
  );
}

/** What an event's row says in a few words. */
function summaryOf(event: RunEvent): string {
  const { data } = event;
  const parts: string[] = [];
  const tool = text(data['tool']) ?? text(data['name']) ?? text(data['target']);
  if (tool) parts.push(tool);
  if (text(data['decision'])) parts.push(`${String(data['decision'])} by ${text(data['rule']) ?? '?'}`);
  if (text(data['approvalId'])) parts.push(`approval ${String(data['approvalId']).slice(0, 8)}`);
  if (typeof data['durationMs'] === 'number') parts.push(`${String(data['durationMs'])} ms`);
  if (data['isError'] === true) parts.push('error');
  if (text(data['error'])) parts.push(String(data['error']));
  // An observed prompt stored in part, or not at all (prompt ingest): said so, not left for the event's JSON to tell.
  if (data['truncated'] === true && typeof data['promptChars'] === 'number')
    parts.push(
      `prompt truncated: the first ${String(text(data['prompt'])?.length ?? 0)} of ${String(data['promptChars'])} characters stored`,
    );
  if (event.type === 'prompt.refused') parts.push(`prompt not recorded: ${text(data['reason']) ?? 'refused'}`);
  return parts.join(' · ');
}

/** A run's page. */
export function RunPage(props: { id: string }) {
  const loaded = useLoad(() => getRun(props.id), [props.id]);
  usePolling(loaded);
  const { data } = loaded;
  if (!data)
    return (
      <Page title="Run">
        <ErrorMessage message={loaded.error} />
        {!loaded.error && <p class="muted">Loading run {props.id}…</p>}
        <p>
          <Link to="runs">Back to Runs</Link>
        </p>
      </Page>
    );
  const { run } = data;
  const events = eventsOf(data);
  const first = Date.parse(run.firstAt);
  // A workflow run's arguments are its own (workflow.started), not its first node's.
  const called = events.find((event) => event.type === 'workflow.started') ?? events.find((event) => event.type === 'tool.called');
  const completed = events.filter((event) => event.type.endsWith('.completed')).at(-1);
  // Decisions of their own, and the gateway's decisions to allow that a use's first event carries (`data.decision`).
  const decisions = events.flatMap((event) => {
    const carried = event.data['decision'];
    if (event.type === 'governance.decision') return [{ id: event.id, data: event.data }];
    return typeof carried === 'object' && carried !== null
      ? [{ id: `${event.id}/decision`, data: carried as Record<string, unknown> }]
      : [];
  });
  const approvals = events.filter((event) => event.type.startsWith('approval.'));
  const result = completed?.data['result'];
  const error = text(completed?.data['error']);
  return (
    <Page title={`Run ${run.runId}`} actions={<Link to="runs">Back to Runs</Link>}>
      <ErrorMessage message={loaded.error} />
      <dl class="summary grid">
        <Fact label="Server">{run.server ?? '—'}</Fact>
        <Fact label="Tool">{run.tool ?? '—'}</Fact>
        <Fact label="Subject">{run.subject ?? '—'}</Fact>
        <Fact label="Outcome">{run.outcome ? <span class={`badge ${outcomeClass(run.outcome)}`}>{run.outcome}</span> : '—'}</Fact>
        <Fact label="Trigger">{run.trigger ?? '—'}</Fact>
        <Fact label="Tenant">{run.tenant}</Fact>
        <Fact label="Started">
          <time dateTime={run.firstAt}>{timeText(run.firstAt)}</time>
        </Fact>
        <Fact label="Duration">
          {Date.parse(run.lastAt) - first} ms over {run.eventCount} event{run.eventCount === 1 ? '' : 's'}
          {typeof completed?.data['durationMs'] === 'number' && ` (upstream call ${String(completed.data['durationMs'])} ms)`}
        </Fact>
      </dl>
      <p class="muted">Values are shown as the ledger stored them; with redaction on they were masked before they were stored.</p>

      {called && (
        <>
          <h2>Arguments</h2>
          <pre aria-label="Arguments">{json(called.data['arguments'] ?? {})}</pre>
        </>
      )}
      {completed && (
        <>
          <h2>Result</h2>
          {error && <p class="error">{error}</p>}
          {result !== undefined && <pre aria-label="Result">{json(result)}</pre>}
          {!error && result === undefined && <p class="muted">No result stored.</p>}
        </>
      )}

      <h2>Decisions</h2>
      {decisions.length === 0 ? (
        <p class="muted">No governance decision in this run.</p>
      ) : (
        <div class="table-wrap">
          <table aria-label="Decisions">
            <thead>
              <tr>
                <th scope="col">Decision</th>
                <th scope="col">Rule</th>
                <th scope="col">Reason</th>
                <th scope="col">Level</th>
                <th scope="col">Action</th>
              </tr>
            </thead>
            <tbody>
              {decisions.map((event) => (
                <tr key={event.id}>
                  <td>
                    <span class={`badge ${event.data['decision'] === 'allow' ? 'ok' : outcomeClass(text(event.data['decision']))}`}>
                      {text(event.data['decision'])}
                    </span>
                  </td>
                  <td class="mono">{text(event.data['rule'])}</td>
                  <td>{text(event.data['reason'])}</td>
                  <td>{typeof event.data['level'] === 'number' ? event.data['level'] : '—'}</td>
                  <td class="mono">{text(event.data['action']) ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      <h2>Approvals</h2>
      {approvals.length === 0 ? (
        <p class="muted">No approval in this run.</p>
      ) : (
        <ul class="plain">
          {approvals.map((event) => (
            <li key={event.id}>
              <span class="mono">{event.type}</span> {text(event.data['approvalId'])}
              {text(event.data['decidedBy']) && ` by ${String(event.data['decidedBy'])}`}
              {text(event.data['reason']) && `: ${String(event.data['reason'])}`}
            </li>
          ))}
        </ul>
      )}

      <h2>Events</h2>
      <ol class="events" aria-label="Events">
        {events.map((event) => (
          <li key={event.id}>
            <details>
              <summary>
                <span class="mono">#{event.tenantSeq}</span> <span class="mono">+{Date.parse(event.occurredAt) - first} ms</span>{' '}
                <strong>{event.type}</strong> <span class="muted">{event.source}</span> {summaryOf(event)}
              </summary>
              <pre>{json(event)}</pre>
            </details>
          </li>
        ))}
      </ol>
    </Page>
  );
}
