import { useState } from 'preact/hooks';
import { connect, connectionState, listConnections } from '../api-connections.js';
import { useCaller } from '../caller.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { Link } from '../router.js';
import { ConnectionFacts, reconnects } from './Connections.js';

/**
 * The connect page of one per-user server (`/ui/connect/<namespace>/<name>`, the URL Punk gives an MCP client
 * whose user has not connected): opened after the sign-in, it names the server, the provider and who connects, and
 * connects only on an explicit click (a link alone never starts a connection).
 */
export function ConnectPage(props: { namespace: string; name: string }) {
  const { namespace, name } = props;
  const id = `${namespace}/${name}`;
  const caller = useCaller();
  const connections = useLoad(listConnections, [namespace, name]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const connection = connections.data?.find((c) => c.namespace === namespace && c.name === name);
  const start = async () => {
    setBusy(true);
    try {
      await connect(namespace, name);
    } catch (caught) {
      setError(messageOf(caught));
      setBusy(false);
    }
  };
  return (
    <Page title={`Connect ${id}`}>
      <ErrorMessage message={connections.error} />
      {connections.data && !connection && (
        <ErrorMessage
          message={`No server ${id} asks for a per-user connection: check the address, or see the servers that do in Connections.`}
        />
      )}
      {connection && (
        <div class="panel">
          <p>
            <span class={`badge ${connectionState(connection).class}`}>{connectionState(connection).label}</span>
          </p>
          <p>
            {id} acts for each person with their own account at <strong>{connection.provider}</strong>. Connect sends you to{' '}
            {connection.provider} to sign in and allow it; Punk then keeps the tokens for <strong>{caller.subject}</strong> only.
          </p>
          <ConnectionFacts connection={connection} />
          <ErrorMessage message={error} />
          <div class="actions">
            <button type="button" disabled={busy} onClick={() => void start()}>
              {busy ? 'Connecting…' : `${reconnects(connection) ? 'Reconnect' : 'Connect'} to ${connection.provider}`}
            </button>
          </div>
        </div>
      )}
      <p>
        <Link to="connections">All your connections</Link>
      </p>
    </Page>
  );
}
