import { useState } from 'preact/hooks';
import { connect, connectionState, connectPath, disconnect, listConnections, type ConnectionView } from '../api-connections.js';
import { useCaller } from '../caller.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { BASE, Link } from '../router.js';

/**
 * What Punk's connect callback said (`?connected=<namespace>/<name>` or `?error=<message>`), read once when the view
 * opens; the query is then removed from the address, so that a reload does not say it again.
 */
function takeOutcome(): { connected?: string; error?: string } {
  const query = new URLSearchParams(location.search);
  const connected = query.get('connected') ?? undefined;
  const error = query.get('error') ?? undefined;
  if (connected !== undefined || error !== undefined) history.replaceState(null, '', `${BASE}/connections`);
  return { ...(connected !== undefined && { connected }), ...(error !== undefined && { error }) };
}

/** The Connections view: every per-user server, whether the signed-in person has connected it, Connect and Disconnect. */
export function ConnectionsPage() {
  const caller = useCaller();
  const connections = useLoad(listConnections);
  const [outcome] = useState(takeOutcome);
  return (
    <Page title="Connections">
      <p class="muted">
        Servers that act as you: each asks you to connect your own account at its provider once. Punk keeps the tokens for {caller.subject}{' '}
        only, and sends them on your calls to that server.
      </p>
      <div aria-live="polite">
        {outcome.connected && (
          <p class="notice" role="status">
            Connected {outcome.connected}: your calls to it now reach it as you.
          </p>
        )}
      </div>
      <ErrorMessage message={outcome.error && `The connection did not complete: ${outcome.error}`} />
      <ErrorMessage message={connections.error} />
      {connections.data?.length === 0 && <p class="muted">No server asks for a per-user connection (spec.auth.perUser).</p>}
      <ul class="cards" aria-label="Connections">
        {connections.data?.map((connection) => (
          <ConnectionCard
            key={`${connection.namespace}/${connection.name}`}
            connection={connection}
            onChanged={() => void connections.reload()}
          />
        ))}
      </ul>
    </Page>
  );
}

/** One per-user server: its provider, scopes and state; Connect (or Reconnect), and Disconnect after a confirmation. */
function ConnectionCard(props: { connection: ConnectionView; onChanged: () => void }) {
  const { connection } = props;
  const id = `${connection.namespace}/${connection.name}`;
  const state = connectionState(connection);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const start = async () => {
    setBusy(true);
    try {
      await connect(connection.namespace, connection.name);
    } catch (caught) {
      setError(messageOf(caught));
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    try {
      await disconnect(connection.namespace, connection.name);
      setConfirming(false);
      setError(undefined);
      props.onChanged();
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const headingId = `connection-${connection.namespace}-${connection.name}`;
  return (
    <li class="card" aria-labelledby={headingId}>
      <div class="card-head">
        <h2 id={headingId}>
          <Link to={connectPath(connection)}>{id}</Link>
        </h2>
        <span class={`badge ${state.class}`}>{state.label}</span>
        <div class="actions">
          <button
            type="button"
            disabled={busy}
            onClick={() => void start()}
            aria-label={`${reconnects(connection) ? 'Reconnect' : 'Connect'} ${id}`}
          >
            {reconnects(connection) ? 'Reconnect' : 'Connect'}
          </button>
          {reconnects(connection) &&
            (confirming ? (
              <>
                <button type="button" class="danger" disabled={busy} onClick={() => void remove()}>
                  Disconnect {id}
                </button>
                <button type="button" class="quiet" onClick={() => setConfirming(false)}>
                  Cancel
                </button>
              </>
            ) : (
              <button type="button" class="quiet" onClick={() => setConfirming(true)} aria-label={`Disconnect ${id}…`}>
                Disconnect…
              </button>
            ))}
        </div>
      </div>
      <ConnectionFacts connection={connection} />
      {confirming && (
        <p class="notice">Disconnecting deletes the tokens Punk keeps for you: your next call to {id} asks you to connect again.</p>
      )}
      <ErrorMessage message={error} />
    </li>
  );
}

/** Whether `connection` has tokens kept, working or not: its button says Reconnect, and it may be disconnected. */
export function reconnects(connection: ConnectionView): boolean {
  return connection.connected || connection.needsReconnect === true;
}

/** Provider, scopes and since when, of one connection. */
export function ConnectionFacts(props: { connection: ConnectionView }) {
  const { connection } = props;
  return (
    <dl class="facts">
      <dt>Provider</dt>
      <dd>{connection.provider}</dd>
      <dt>Scopes</dt>
      <dd>{connection.scopes.length > 0 ? connection.scopes.join(' ') : '—'}</dd>
      <dt>Connected since</dt>
      <dd>
        {connection.connectedAt ? new Date(connection.connectedAt).toLocaleString() : '—'}
        {connection.needsReconnect && ' (the provider no longer accepts the kept tokens: reconnect)'}
      </dd>
    </dl>
  );
}
