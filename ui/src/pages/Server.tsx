import { useState } from 'preact/hooks';
import { acceptTool, getServer, serverTools, type ToolList, type ToolPin } from '../api.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { Link } from '../router.js';
import { awaitingReview } from './Servers.js';

/** What each side-effect level means (governance's classification, docs/governance.md). */
const LEVELS = ['0 none', '1 read', '2 reversible write', '3 write or send', '4 destructive or payment'];

/** The badge class of a pin's status. */
const PIN_CLASS: Record<ToolPin['status'], string> = { pinned: 'ok', 'changed-hidden': 'bad', 'changed-approval': 'warn' };

/** What a pin's status means for callers. */
const PIN_TEXT: Record<ToolPin['status'], string> = {
  pinned: 'pinned',
  'changed-hidden': 'changed: hidden until accepted',
  'changed-approval': 'changed: each call needs approval until accepted',
};

/** One server's page: its state and registration, and its tools with schemas, side-effect levels, pins and pending changes. */
export function ServerPage(props: { name: string }) {
  const { name } = props;
  const server = useLoad(() => getServer(name), [name]);
  const tools = useLoad(() => serverTools(name), [name]);
  return (
    <Page
      title={name}
      actions={
        <button type="button" class="quiet" onClick={() => void tools.reload()}>
          Reload tools
        </button>
      }
    >
      <p>
        <Link to="servers">← All servers</Link>
      </p>
      <ErrorMessage message={server.error} />
      {server.data && (
        <dl class="facts">
          <dt>State</dt>
          <dd>{server.data.state}</dd>
          <dt>Transport</dt>
          <dd>{server.data.transport ?? server.data.type ?? '—'}</dd>
          <dt>Circuit</dt>
          <dd>{server.data.circuit ?? '—'}</dd>
          <dt>Tools</dt>
          <dd>
            {server.data.toolCount}
            {awaitingReview(server.data.pendingReviews)}
          </dd>
          {server.data.lastError && (
            <>
              <dt>Last error</dt>
              <dd class="error">{server.data.lastError}</dd>
            </>
          )}
        </dl>
      )}
      {server.data?.registration && (
        <details>
          <summary>Registration</summary>
          <pre>{JSON.stringify(server.data.registration, null, 2)}</pre>
        </details>
      )}
      <h2>Tools</h2>
      <ErrorMessage message={tools.error} />
      {tools.data && <Tools name={name} list={tools.data} onAccepted={() => (void tools.reload(), void server.reload())} />}
    </Page>
  );
}

/** The tools of a listing, each with its pin; a changed one with its diff and an Accept button. */
function Tools(props: { name: string; list: ToolList; onAccepted: () => void }) {
  const { list } = props;
  const pins = new Map((list.pins ?? []).map((pin) => [pin.tool, pin]));
  const listed = new Set(list.tools.map((tool) => String(tool['name'])));
  // A hidden changed tool is not served, but its pin is: show it too, so that it can be reviewed.
  const hiddenOnly = (list.pins ?? []).filter((pin) => !listed.has(pin.tool));
  return (
    <>
      <p class="muted">
        Listed {list.listedAt ? new Date(list.listedAt).toLocaleString() : ''}
        {list.cached ? ' (cached)' : ''}.
      </p>
      <ul class="cards" aria-label="Tools">
        {list.tools.map((tool) => {
          const toolName = String(tool['name']);
          return (
            <ToolCard
              key={toolName}
              server={props.name}
              name={toolName}
              tool={tool}
              pin={pins.get(toolName)}
              level={list.levels?.[toolName]}
              onAccepted={props.onAccepted}
            />
          );
        })}
        {hiddenOnly.map((pin) => (
          <ToolCard key={pin.tool} server={props.name} name={pin.tool} pin={pin} onAccepted={props.onAccepted} />
        ))}
      </ul>
    </>
  );
}

/** One tool. */
function ToolCard(props: {
  server: string;
  name: string;
  tool?: Record<string, unknown>;
  pin: ToolPin | undefined;
  level?: { level: number; source: string } | undefined;
  onAccepted: () => void;
}) {
  const { name, tool, pin, level } = props;
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const accept = async () => {
    setBusy(true);
    try {
      await acceptTool(props.server, name, pin?.pendingFingerprint);
      props.onAccepted();
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const headingId = `tool-${name}`;
  const changed = pin !== undefined && pin.status !== 'pinned';
  return (
    <li class="card" aria-labelledby={headingId}>
      <div class="card-head">
        <h3 id={headingId} class="mono">
          {name}
        </h3>
        {level && (
          <span class={`badge ${level.level >= 3 ? 'warn' : 'ok'}`} title={`side-effect level (${level.source})`}>
            level {LEVELS[level.level] ?? level.level}
          </span>
        )}
        {pin && <span class={`badge ${PIN_CLASS[pin.status]}`}>{PIN_TEXT[pin.status]}</span>}
      </div>
      {typeof tool?.['description'] === 'string' && <p>{tool['description']}</p>}
      {changed && pin.diff && (
        <div class="diff">
          <h4>What changed from the pinned definition</h4>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Change</th>
                  <th scope="col">Where</th>
                  <th scope="col">Pinned</th>
                  <th scope="col">Now</th>
                </tr>
              </thead>
              <tbody>
                {pin.diff.changes.map((change) => (
                  <tr key={`${change.op}${change.path}`}>
                    <td>{change.op}</td>
                    <td class="mono">{change.path || '(whole definition)'}</td>
                    <td>
                      <pre class="before">{change.before === undefined ? '' : JSON.stringify(change.before, null, 2)}</pre>
                    </td>
                    <td>
                      <pre class="after">{change.after === undefined ? '' : JSON.stringify(change.after, null, 2)}</pre>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {pin.diff.omitted > 0 && <p class="muted">{pin.diff.omitted} more differences not shown.</p>}
        </div>
      )}
      {changed && (
        <button type="button" onClick={() => void accept()} disabled={busy} aria-label={`Accept the changed definition of ${name}`}>
          {busy ? 'Accepting…' : 'Accept'}
        </button>
      )}
      <ErrorMessage message={error} />
      {tool?.['inputSchema'] !== undefined && (
        <details>
          <summary>Input schema</summary>
          <pre>{JSON.stringify(tool['inputSchema'], null, 2)}</pre>
        </details>
      )}
      {tool?.['outputSchema'] !== undefined && (
        <details>
          <summary>Output schema</summary>
          <pre>{JSON.stringify(tool['outputSchema'], null, 2)}</pre>
        </details>
      )}
      {tool?.['annotations'] !== undefined && (
        <details>
          <summary>Annotations</summary>
          <pre>{JSON.stringify(tool['annotations'], null, 2)}</pre>
        </details>
      )}
    </li>
  );
}
