import { useState } from 'preact/hooks';
import {
  createCredential,
  deleteCredential,
  listCredentials,
  replaceCredential,
  type CredentialInput,
  type CredentialView,
} from '../api.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';
import { NamedValues, recordOf, type NamedValue } from '../named-values.js';

/** The keys of an OAuth2 credential (docs/credentials.md): what "+ OAuth2 fields" adds. */
const OAUTH2_KEYS = ['access_token', 'refresh_token', 'expires_at', 'token_url', 'client_id', 'client_secret', 'scope'] as const;

/** The Credentials view: the tenant's credentials (names of keys, never a value), their refresh health, create, replace, delete. */
export function CredentialsPage() {
  const credentials = useLoad(listCredentials);
  const [editing, setEditing] = useState<{ replacing?: CredentialView } | undefined>();
  const done = () => {
    setEditing(undefined);
    void credentials.reload();
  };
  return (
    <Page
      title="Credentials"
      actions={
        <button
          type="button"
          aria-expanded={editing !== undefined && !editing.replacing}
          onClick={() => setEditing(editing ? undefined : {})}
        >
          {editing ? 'Close the form' : 'Create a credential'}
        </button>
      }
    >
      <p class="muted">
        Values are encrypted at rest and never shown again. Servers use a credential as <code>cred:&lt;id&gt;</code> (or{' '}
        <code>cred:&lt;id&gt;/&lt;key&gt;</code>) in a header or environment value.
      </p>
      {editing && <CredentialForm key={editing.replacing?.id ?? 'new'} replacing={editing.replacing} onSaved={done} />}
      <ErrorMessage message={credentials.error} />
      {credentials.data?.length === 0 && <p class="muted">No credential yet.</p>}
      <ul class="cards" aria-label="Credentials">
        {credentials.data?.map((credential) => (
          <CredentialCard
            key={credential.id}
            credential={credential}
            onReplace={() => setEditing({ replacing: credential })}
            onDeleted={() => void credentials.reload()}
          />
        ))}
      </ul>
    </Page>
  );
}

/** How an OAuth2 credential's refresh stands: failing (with why), its access token's expiry, the last refresh. */
function RefreshHealth(props: { credential: CredentialView }) {
  const { credential } = props;
  if (credential.type !== 'oauth2') return null;
  const expires = credential.expiresAt ? Date.parse(credential.expiresAt) : undefined;
  return (
    <>
      <dt>Refresh</dt>
      <dd>
        {credential.refreshError ? (
          <span class="badge bad">failing</span>
        ) : expires !== undefined && expires < Date.now() ? (
          <span class="badge warn">access token expired</span>
        ) : (
          <span class="badge ok">healthy</span>
        )}{' '}
        {credential.lastRefreshAt ? `last refreshed ${new Date(credential.lastRefreshAt).toLocaleString()}` : 'not refreshed yet'}
        {expires !== undefined && `; the access token expires ${new Date(expires).toLocaleString()}`}
        {credential.refreshError && <span class="error block">{credential.refreshError}</span>}
      </dd>
    </>
  );
}

/** One credential: its keys, type, source and refresh health; replace and delete (credentials made through the API). */
function CredentialCard(props: { credential: CredentialView; onReplace: () => void; onDeleted: () => void }) {
  const { credential } = props;
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const remove = async () => {
    try {
      await deleteCredential(credential.id);
      props.onDeleted();
    } catch (caught) {
      setError(messageOf(caught));
    }
  };
  const headingId = `credential-${credential.id}`;
  return (
    <li class="card" aria-labelledby={headingId}>
      <div class="card-head">
        <h2 id={headingId} class="mono">
          {credential.id}
        </h2>
        <span class="badge">{credential.type}</span>
        {credential.source === 'secret' && <span class="badge">from a Kubernetes Secret</span>}
        <div class="actions">
          <button type="button" class="quiet" onClick={props.onReplace} aria-label={`Replace ${credential.id}`}>
            Replace…
          </button>
          {confirming ? (
            <>
              <button type="button" class="danger" onClick={() => void remove()}>
                Delete {credential.id}
              </button>
              <button type="button" class="quiet" onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </>
          ) : (
            <button type="button" class="quiet" onClick={() => setConfirming(true)} aria-label={`Delete ${credential.id}…`}>
              Delete…
            </button>
          )}
        </div>
      </div>
      <dl class="facts">
        <dt>Keys</dt>
        <dd>
          <ul class="chips" aria-label={`Keys of ${credential.id}`}>
            {credential.keys.map((key) => (
              <li class="chip mono" key={key}>
                {key}
              </li>
            ))}
          </ul>
        </dd>
        <dt>Reference</dt>
        <dd class="mono">cred:{credential.id}</dd>
        <dt>Created</dt>
        <dd>
          {new Date(credential.createdAt).toLocaleString()}
          {credential.createdBy && ` by ${credential.createdBy}`}
          {credential.updatedAt &&
            credential.updatedAt !== credential.createdAt &&
            `; replaced ${new Date(credential.updatedAt).toLocaleString()}`}
        </dd>
        <RefreshHealth credential={credential} />
      </dl>
      <ErrorMessage message={error} />
    </li>
  );
}

/**
 * The form that creates a credential, or replaces one's keys and values (`replacing`: its key names are
 * pre-filled, never its values). "+ OAuth2 fields" adds the OAuth2 keys that are not there yet.
 */
function CredentialForm(props: { replacing: CredentialView | undefined; onSaved: () => void }) {
  const { replacing } = props;
  const [id, setId] = useState(replacing?.id ?? '');
  const [type, setType] = useState<'' | 'static' | 'oauth2'>(replacing?.type ?? '');
  const [values, setValues] = useState<NamedValue[]>(
    replacing ? replacing.keys.map((name) => ({ name, value: '' })) : [{ name: 'value', value: '' }],
  );
  const [shown, setShown] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const addOAuth2 = () => {
    const present = new Set(values.map((row) => row.name));
    const kept = values.filter((row) => row.name !== 'value' || row.value !== '');
    setValues([...kept, ...OAUTH2_KEYS.filter((key) => !present.has(key)).map((name) => ({ name, value: '' }))]);
    setType('oauth2');
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    const data = recordOf(values.filter((row) => row.value !== ''));
    if (!data) {
      setError('Give at least one key a value.');
      return;
    }
    const body: Omit<CredentialInput, 'id'> = { data, ...(type && { type }) };
    setBusy(true);
    try {
      if (replacing) await replaceCredential(replacing.id, body);
      else await createCredential({ id: id.trim(), ...body });
      setValues([]);
      props.onSaved();
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const title = replacing ? `Replace ${replacing.id}` : 'Create a credential';
  return (
    <form class="panel" onSubmit={(event) => void submit(event)} aria-labelledby="credential-form-title">
      <h2 id="credential-form-title">{title}</h2>
      {replacing && <p class="muted">Every key and value is replaced: give all of them again (keys left empty are dropped).</p>}
      <div class="grid">
        <div>
          <label for="cred-id">Id</label>
          <input
            id="cred-id"
            required
            disabled={replacing !== undefined}
            value={id}
            onInput={(e) => setId(e.currentTarget.value)}
            placeholder="github-token"
          />
        </div>
        <div>
          <label for="cred-type">Type</label>
          <select id="cred-type" value={type} onChange={(e) => setType(e.currentTarget.value as '' | 'static' | 'oauth2')}>
            <option value="">from the keys (oauth2 with refresh_token or token_url)</option>
            <option value="static">static</option>
            <option value="oauth2">oauth2</option>
          </select>
        </div>
      </div>
      <NamedValues legend="Keys and values" item="Key" values={values} onChange={setValues} secret={!shown} />
      <div class="actions">
        <button type="button" class="quiet" onClick={addOAuth2}>
          + OAuth2 fields
        </button>
        <label class="inline">
          <input type="checkbox" checked={shown} onChange={(e) => setShown(e.currentTarget.checked)} /> Show values while typing
        </label>
      </div>
      <ErrorMessage message={error} />
      <button type="submit" disabled={busy}>
        {busy ? 'Saving…' : replacing ? 'Replace' : 'Create'}
      </button>
    </form>
  );
}
