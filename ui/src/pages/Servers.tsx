import { useEffect, useState } from 'preact/hooks';
import {
  deleteServer,
  listCredentials,
  listServers,
  registerServer,
  testServer,
  type Registration,
  type ServerView,
  type TestResult,
} from '../api.js';
import { connectionState, connectPath, listConnections, type ConnectionView } from '../api-connections.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { NamedValues, credentialReferences, recordOf, type NamedValue } from '../named-values.js';
import { Link } from '../router.js';

/** How often the list is read again while the view is open, in milliseconds: states and circuits change on their own. */
const REFRESH_MS = 5_000;

/**
 * The Servers view: every server of the tenant with its state, the signed-in person's own connection to those that
 * act per user, TEST, delete, and the registration form.
 */
export function ServersPage() {
  const servers = useLoad(listServers);
  const connections = useLoad(listConnections);
  const [registering, setRegistering] = useState(false);
  useEffect(() => {
    const timer = setInterval(() => {
      void servers.reload();
      void connections.reload();
    }, REFRESH_MS);
    return () => clearInterval(timer);
  }, [servers.reload, connections.reload]);
  const connectionOf = (server: ServerView) => connections.data?.find((c) => c.namespace === server.namespace && c.name === server.name);
  return (
    <Page
      title="Servers"
      actions={
        <button type="button" aria-expanded={registering} onClick={() => setRegistering(!registering)}>
          {registering ? 'Close the form' : 'Register a server'}
        </button>
      }
    >
      {registering && (
        <RegisterForm
          onRegistered={() => {
            setRegistering(false);
            void servers.reload();
          }}
        />
      )}
      <ErrorMessage message={servers.error} />
      <ErrorMessage message={connections.error && `Your connections could not be read: ${connections.error}`} />
      {servers.data?.length === 0 && <p class="muted">No server yet: register one, or add an McpServer manifest.</p>}
      <ul class="cards" aria-label="Servers">
        {servers.data?.map((server) => (
          <ServerCard
            key={`${server.namespace}/${server.name}`}
            server={server}
            connection={connectionOf(server)}
            onChanged={() => void servers.reload()}
          />
        ))}
      </ul>
    </Page>
  );
}

/** The badge class of a connection state. */
function stateClass(state: string): string {
  return state === 'ready' ? 'ok' : state === 'failed' || state === 'stopped' ? 'bad' : 'warn';
}

/**
 * One server: its facts (with the signed-in person's `connection` when it acts per user), its TEST with the latency
 * and tool chips inline, and (registered servers) delete; `onChanged` after either.
 */
function ServerCard(props: { server: ServerView; connection: ConnectionView | undefined; onChanged: () => void }) {
  const { connection } = props;
  const { server } = props;
  const [test, setTest] = useState<{ running: boolean; result?: TestResult; error?: string }>({ running: false });
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const run = async () => {
    setTest({ running: true });
    try {
      setTest({ running: false, result: await testServer(server.name) });
    } catch (caught) {
      setTest({ running: false, error: messageOf(caught) });
    }
    props.onChanged();
  };
  const remove = async () => {
    try {
      await deleteServer(server.name);
      props.onChanged();
    } catch (caught) {
      setError(messageOf(caught));
    }
  };
  const headingId = `server-${server.namespace}-${server.name}`;
  return (
    <li class="card" aria-labelledby={headingId}>
      <div class="card-head">
        <h2 id={headingId}>
          <Link to={`servers/${encodeURIComponent(server.name)}`}>{server.name}</Link>
        </h2>
        <span class={`badge ${stateClass(server.state)}`}>{server.state}</span>
        {server.managed && <span class="badge">managed</span>}
        <div class="actions">
          <button type="button" onClick={() => void run()} disabled={test.running} aria-label={`Test ${server.name}`}>
            {test.running ? 'Testing…' : 'TEST'}
          </button>
          {!server.managed &&
            (confirming ? (
              <>
                <button type="button" class="danger" onClick={() => void remove()}>
                  Delete {server.name}
                </button>
                <button type="button" class="quiet" onClick={() => setConfirming(false)}>
                  Cancel
                </button>
              </>
            ) : (
              <button type="button" class="quiet" onClick={() => setConfirming(true)} aria-label={`Delete ${server.name}…`}>
                Delete…
              </button>
            ))}
        </div>
      </div>
      <dl class="facts">
        <dt>Transport</dt>
        <dd>{server.transport ?? server.type ?? '—'}</dd>
        <dt>Tools</dt>
        <dd>
          {server.toolCount}
          {awaitingReview(server.pendingReviews)}
        </dd>
        <dt>Circuit</dt>
        <dd>{server.circuit ? <span class={`badge ${server.circuit === 'closed' ? 'ok' : 'bad'}`}>{server.circuit}</span> : '—'}</dd>
        <dt>Last test</dt>
        <dd>
          {server.testedAt ? `${server.status ?? ''} ${server.latencyMs ?? ''} ms, ${new Date(server.testedAt).toLocaleString()}` : 'never'}
        </dd>
        {connection && (
          <>
            <dt>Your connection</dt>
            <dd>
              <span class={`badge ${connectionState(connection).class}`}>{connectionState(connection).label}</span>{' '}
              <Link to={connectPath(connection)}>{connection.connected && !connection.needsReconnect ? 'Manage' : 'Connect'}</Link>
            </dd>
          </>
        )}
      </dl>
      {server.lastError && (
        <p class="error">
          <strong>Last error:</strong> {server.lastError}
        </p>
      )}
      {server.warnings?.map((warning) => (
        <p class="notice" key={warning}>
          {warning}
        </p>
      ))}
      <ErrorMessage message={error} />
      <TestOutcome test={test} name={server.name} />
    </li>
  );
}

/** ", 1 change awaits review" when tools of the server wait for an admin's review of a changed definition, else nothing. */
export function awaitingReview(tools: string[] | undefined): string {
  const count = tools?.length ?? 0;
  return count === 0 ? '' : `, ${String(count)} change${count === 1 ? ' awaits' : 's await'} review`;
}

/** What a TEST found: latency and the tool names as chips, or why it failed. */
function TestOutcome(props: { test: { result?: TestResult; error?: string }; name: string }) {
  const { result, error } = props.test;
  if (error) return <ErrorMessage message={error} />;
  if (!result) return null;
  return (
    <div class="test-result" role="status" aria-label={`Test of ${props.name}`}>
      {result.ok ? (
        <p>
          <span class="badge ok">ok</span> {Math.round(result.latencyMs)} ms, {result.toolCount} tool{result.toolCount === 1 ? '' : 's'}
          {awaitingReview(result.pendingReviews)}
        </p>
      ) : (
        <p class="error">
          Test failed after {Math.round(result.latencyMs)} ms: {result.error}
        </p>
      )}
      <ul class="chips" aria-label="Tools">
        {result.tools.map((tool) => (
          <li class="chip" key={String(tool['name'])}>
            {String(tool['name'])}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The registration form: stdio (command, arguments, environment) or http (URL, transport, headers); values may be `cred:` references. */
function RegisterForm(props: { onRegistered: () => void }) {
  const credentials = useLoad(listCredentials);
  const [name, setName] = useState('');
  const [type, setType] = useState<'stdio' | 'http'>('http');
  const [command, setCommand] = useState('');
  const [args, setArgs] = useState('');
  const [url, setUrl] = useState('');
  const [transport, setTransport] = useState<'streamable-http' | 'sse'>('streamable-http');
  const [values, setValues] = useState<NamedValue[]>([]);
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const named = recordOf(values);
    const body: Registration =
      type === 'stdio'
        ? {
            name: name.trim(),
            type,
            command: command.trim(),
            args: args.split('\n').filter((line) => line.trim() !== ''),
            ...(named && { env: named }),
          }
        : { name: name.trim(), type, url: url.trim(), transport, ...(named && { headers: named }) };
    setBusy(true);
    try {
      await registerServer(body);
      props.onRegistered();
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="panel" onSubmit={(event) => void submit(event)} aria-labelledby="register-title">
      <h2 id="register-title">Register a server</h2>
      <div class="grid">
        <div>
          <label for="reg-name">Name</label>
          <input id="reg-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="github" />
        </div>
        <div>
          <label for="reg-type">Type</label>
          <select id="reg-type" value={type} onChange={(e) => setType(e.currentTarget.value as 'stdio' | 'http')}>
            <option value="http">http (a remote MCP endpoint)</option>
            <option value="stdio">stdio (a command Punk runs)</option>
          </select>
        </div>
      </div>
      {type === 'stdio' ? (
        <div class="grid">
          <div>
            <label for="reg-command">Command</label>
            <input id="reg-command" required value={command} onInput={(e) => setCommand(e.currentTarget.value)} placeholder="npx" />
          </div>
          <div>
            <label for="reg-args">Arguments (one per line)</label>
            <textarea id="reg-args" value={args} onInput={(e) => setArgs(e.currentTarget.value)} />
          </div>
        </div>
      ) : (
        <div class="grid">
          <div>
            <label for="reg-url">URL</label>
            <input
              id="reg-url"
              type="url"
              required
              value={url}
              onInput={(e) => setUrl(e.currentTarget.value)}
              placeholder="https://mcp.example.com/mcp"
            />
          </div>
          <div>
            <label for="reg-transport">Transport</label>
            <select id="reg-transport" value={transport} onChange={(e) => setTransport(e.currentTarget.value as 'streamable-http' | 'sse')}>
              <option value="streamable-http">Streamable HTTP</option>
              <option value="sse">HTTP+SSE (2024-11-05)</option>
            </select>
          </div>
        </div>
      )}
      <NamedValues
        legend={type === 'stdio' ? 'Environment variables' : 'Headers'}
        item={type === 'stdio' ? 'Variable' : 'Header'}
        values={values}
        onChange={setValues}
        references={credentialReferences(credentials.data ?? [])}
      />
      <ErrorMessage message={error} />
      <button type="submit" disabled={busy}>
        {busy ? 'Registering…' : 'Register'}
      </button>
    </form>
  );
}
