/**
 * The Runs view: the ledger's runs, most recently active first, live (asked again every {@link POLL_MS}), with the
 * filters of `GET /runs` (server, tool, subject, outcome, trigger, time range), each run linked to its page. The
 * first page stays live; **Load older runs** adds the next page: the one after the last page loaded (its `nextCursor`).
 */
import '../views.css';
import { useEffect, useState } from 'preact/hooks';
import { listRuns, type RunsQuery, type RunSummary } from '../api.js';
import { outcomeClass, POLL_MS, timeText, usePolling } from '../api-runs.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { Link } from '../router.js';

/** The filters as the form holds them (text; times as `datetime-local` values). */
type Filters = Record<'server' | 'tool' | 'subject' | 'outcome' | 'trigger' | 'since' | 'until', string>;

const NO_FILTERS: Filters = { server: '', tool: '', subject: '', outcome: '', trigger: '', since: '', until: '' };
const TEXT_FILTERS = [
  ['server', 'Server'],
  ['tool', 'Tool'],
  ['subject', 'Subject'],
  ['trigger', 'Trigger'],
] as const;
const OUTCOMES = ['ok', 'error', 'denied', 'approval_required'];
/** Runs of one page. */
const LIMIT = 100;

/** The older pages loaded below the live first one, and the cursor of the next (absent once the ledger has none older). */
interface Older {
  runs: RunSummary[];
  loaded: boolean;
  nextCursor?: string | undefined;
}
const NO_OLDER: Older = { runs: [], loaded: false };

/** A run id to show in a table: a UUID's first 8 digits, any other id whole. */
const shortId = (id: string) => (/^[0-9a-f]{8}-[0-9a-f-]{27}$/.test(id) ? id.slice(0, 8) : id);

/** The `GET /runs` query of `filters`: trimmed values, local times as RFC 3339 (UTC). */
function queryOf(filters: Filters): RunsQuery {
  const query: RunsQuery = { limit: LIMIT };
  for (const [name, value] of Object.entries(filters) as Array<[keyof Filters, string]>) {
    const text = value.trim();
    if (!text) continue;
    query[name] = name === 'since' || name === 'until' ? new Date(text).toISOString() : text;
  }
  return query;
}

/** The Runs view. */
export function RunsPage() {
  const [form, setForm] = useState<Filters>(NO_FILTERS);
  const [applied, setApplied] = useState<Filters>(NO_FILTERS);
  const runs = useLoad(() => listRuns(queryOf(applied)), [applied]);
  usePolling(runs);
  const [older, setOlder] = useState<Older>(NO_OLDER);
  const [loadingOlder, setLoadingOlder] = useState(false);
  const [olderError, setOlderError] = useState<string | undefined>(undefined);
  useEffect(() => {
    setOlder(NO_OLDER);
    setOlderError(undefined);
  }, [applied]);
  // A run of the live page that had a new event moved up there: it is shown once, in the live page.
  const live = runs.data?.runs ?? [];
  const liveIds = new Set(live.map((run) => run.runId));
  const shown = [...live, ...older.runs.filter((run) => !liveIds.has(run.runId))];
  // The page after the last one loaded: the live page's until an older one is.
  const nextCursor = older.loaded ? older.nextCursor : runs.data?.nextCursor;
  const loadOlder = async () => {
    if (nextCursor === undefined) return;
    setLoadingOlder(true);
    setOlderError(undefined);
    try {
      const page = await listRuns({ ...queryOf(applied), cursor: nextCursor });
      // The first older page goes on after the live page as it is now: its runs are kept below it, so those that new
      // runs push off the live page stay shown.
      setOlder((now) => ({ runs: [...(now.loaded ? now.runs : live), ...page.runs], loaded: true, nextCursor: page.nextCursor }));
    } catch (caught) {
      setOlderError(messageOf(caught));
    } finally {
      setLoadingOlder(false);
    }
  };
  const mayHaveOlder = nextCursor !== undefined;
  const field = (name: keyof Filters) => ({
    id: `runs-${name}`,
    name,
    value: form[name],
    onInput: (event: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setForm({ ...form, [name]: event.currentTarget.value }),
  });
  const filtered = Object.values(applied).some((value) => value.trim() !== '');
  return (
    <Page title="Runs">
      <form
        class="filters"
        aria-label="Filter runs"
        onSubmit={(event) => {
          event.preventDefault();
          setApplied(form);
        }}
      >
        <div class="grid">
          {TEXT_FILTERS.map(([name, label]) => (
            <div key={name}>
              <label for={`runs-${name}`}>{label}</label>
              <input type="text" autocomplete="off" {...field(name)} />
            </div>
          ))}
          <div>
            <label for="runs-outcome">Outcome</label>
            <select {...field('outcome')}>
              <option value="">Any</option>
              {OUTCOMES.map((outcome) => (
                <option key={outcome} value={outcome}>
                  {outcome}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for="runs-since">Active since</label>
            <input type="datetime-local" step={1} {...field('since')} />
          </div>
          <div>
            <label for="runs-until">Begun until</label>
            <input type="datetime-local" step={1} {...field('until')} />
          </div>
        </div>
        <div class="actions filter-actions">
          <button type="submit">Apply filters</button>
          <button
            type="button"
            class="quiet"
            onClick={() => {
              setForm(NO_FILTERS);
              setApplied(NO_FILTERS);
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <ErrorMessage message={runs.error} />
      <p class="muted" aria-live="polite">
        {runs.data === undefined
          ? runs.error === undefined
            ? 'Loading runs…'
            : ''
          : `${String(shown.length)} run${shown.length === 1 ? '' : 's'}${filtered ? ' matching the filters' : ''}, newest first; live (updated every ${String(POLL_MS / 1000)} s).`}
      </p>
      {shown.length > 0 && (
        <div class="table-wrap">
          <table aria-label="Runs">
            <thead>
              <tr>
                <th scope="col">Last event</th>
                <th scope="col">Server</th>
                <th scope="col">Tool</th>
                <th scope="col">Subject</th>
                <th scope="col">Outcome</th>
                <th scope="col">Trigger</th>
                <th scope="col">Events</th>
                <th scope="col">Run</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((run) => (
                <tr key={`${run.tenant}/${run.runId}`}>
                  <td>
                    <time dateTime={run.lastAt}>{timeText(run.lastAt)}</time>
                  </td>
                  <td>{run.server ?? '—'}</td>
                  <td>{run.tool ?? (run.types.includes('prompt.observed') ? 'prompt' : '—')}</td>
                  <td>{run.subject ?? '—'}</td>
                  <td>{run.outcome ? <span class={`badge ${outcomeClass(run.outcome)}`}>{run.outcome}</span> : '—'}</td>
                  <td>{run.trigger ?? '—'}</td>
                  <td>{run.eventCount}</td>
                  <td>
                    <Link to={`runs/${encodeURIComponent(run.runId)}`} class="mono" aria-label={`Run ${run.runId}`}>
                      {shortId(run.runId)}
                    </Link>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ErrorMessage message={olderError} />
      {mayHaveOlder && (
        <button type="button" class="quiet" disabled={loadingOlder} onClick={() => void loadOlder()}>
          {loadingOlder ? 'Loading older runs…' : 'Load older runs'}
        </button>
      )}
      {older.loaded && nextCursor === undefined && <p class="muted">No older runs.</p>}
    </Page>
  );
}
