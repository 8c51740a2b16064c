import { useState } from 'preact/hooks';
import { ApiError, createApiKey, getSettings, listApiKeys, putSetting, revokeApiKey, type ApiKeyView } from '../api.js';
import { ErrorMessage, messageOf, Page, useLoad } from '../components.js';

/** The Settings & keys view: the tenant's redaction setting, and its API keys (create: shown once; revoke). */
export function SettingsPage() {
  return (
    <Page title={'Settings & keys'}>
      <Redaction />
      <ApiKeys />
    </Page>
  );
}

/** The `redaction` setting: masks emails, phone and card numbers and secret-shaped tokens in ledger events. */
function Redaction() {
  const settings = useLoad(getSettings);
  const [error, setError] = useState<string | undefined>();
  const [busy, setBusy] = useState(false);
  const setting = settings.data?.find((s) => s.key === 'redaction');
  const change = async (value: boolean) => {
    setBusy(true);
    try {
      await putSetting('redaction', value);
      setError(undefined);
      await settings.reload();
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="redaction-title" class="panel">
      <h2 id="redaction-title">Redaction</h2>
      <ErrorMessage message={settings.error ?? error} />
      {settings.data && (
        <>
          <label class="inline">
            <input
              type="checkbox"
              checked={setting?.value === true}
              disabled={busy}
              onChange={(e) => void change(e.currentTarget.checked)}
            />
            Mask emails, phone and card numbers and secret-shaped tokens in the arguments, results and prompts the ledger stores
          </label>
          <p class="muted" role="status">
            Redaction is {setting?.value === true ? 'on' : 'off'}
            {setting?.updatedAt
              ? ` (set ${new Date(setting.updatedAt).toLocaleString()}${setting.updatedBy ? ` by ${setting.updatedBy}` : ''})`
              : ' (the default)'}
            . It applies to events recorded from now on.
          </p>
        </>
      )}
    </section>
  );
}

/** The tenant's API keys: the list, the creation form (the key is shown once) and revocation. */
function ApiKeys() {
  const keys = useLoad(async () => {
    try {
      return await listApiKeys();
    } catch (error) {
      if (error instanceof ApiError && error.code === 'AuthenticationOff') return null;
      throw error;
    }
  });
  const [created, setCreated] = useState<ApiKeyView | undefined>();
  return (
    <section aria-labelledby="keys-title" class="panel">
      <h2 id="keys-title">API keys</h2>
      <ErrorMessage message={keys.error} />
      {keys.data === null && (
        <p class="notice">Authentication is off (PUNK_AUTH_MODE=off): Punk takes no API keys, and anyone who reaches it is an admin.</p>
      )}
      {keys.data && (
        <>
          {created?.key ? (
            <div class="notice" role="status" aria-labelledby="new-key-title">
              <h3 id="new-key-title">Key {created.name} created</h3>
              <p>Copy it now: it is shown this once, and Punk keeps only its hash.</p>
              <label for="new-key">The new key</label>
              <input id="new-key" class="mono" readOnly value={created.key} onFocus={(e) => e.currentTarget.select()} />
              <button type="button" class="quiet" onClick={() => setCreated(undefined)}>
                Done
              </button>
            </div>
          ) : (
            <CreateKey
              onCreated={(key) => {
                setCreated(key);
                void keys.reload();
              }}
            />
          )}
          <div class="table-wrap">
            <table>
              <caption class="muted">Keys of this tenant ({keys.data.length})</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Id</th>
                  <th scope="col">Scopes</th>
                  <th scope="col">Groups</th>
                  <th scope="col">Created</th>
                  <th scope="col">
                    <span class="visually-hidden">Revoke</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {keys.data.map((key) => (
                  <KeyRow key={key.id} apiKey={key} onRevoked={() => void keys.reload()} />
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}

/** The creation form: a name, scopes and groups (space-separated; scopes default to the endpoint's required ones). */
function CreateKey(props: { onCreated: (key: ApiKeyView) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState('');
  const [groups, setGroups] = useState('');
  const [error, setError] = useState<string | undefined>();
  const words = (text: string) => text.split(/\s+/).filter((word) => word !== '');
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      const key = await createApiKey({
        name: name.trim(),
        ...(words(scopes).length > 0 && { scopes: words(scopes) }),
        ...(words(groups).length > 0 && { groups: words(groups) }),
      });
      setName('');
      setScopes('');
      setGroups('');
      setError(undefined);
      props.onCreated(key);
    } catch (caught) {
      setError(messageOf(caught));
    }
  };
  return (
    <form onSubmit={(event) => void submit(event)} aria-label="Create an API key">
      <div class="grid">
        <div>
          <label for="key-name">Name</label>
          <input id="key-name" required value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="my laptop" />
        </div>
        <div>
          <label for="key-scopes">Scopes (space-separated)</label>
          <input id="key-scopes" value={scopes} onInput={(e) => setScopes(e.currentTarget.value)} placeholder="punk:admin" />
        </div>
        <div>
          <label for="key-groups">Groups (space-separated)</label>
          <input id="key-groups" value={groups} onInput={(e) => setGroups(e.currentTarget.value)} />
        </div>
      </div>
      <ErrorMessage message={error} />
      <p>
        <button type="submit">Create a key</button>
      </p>
    </form>
  );
}

/** One key, with its revoke button (asks first). */
function KeyRow(props: { apiKey: ApiKeyView; onRevoked: () => void }) {
  const { apiKey } = props;
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState<string | undefined>();
  const revoke = async () => {
    try {
      await revokeApiKey(apiKey.id);
      props.onRevoked();
    } catch (caught) {
      setError(messageOf(caught));
    }
  };
  return (
    <tr>
      <td>{apiKey.name}</td>
      <td class="mono">{apiKey.id}</td>
      <td>{apiKey.scopes.join(' ') || '—'}</td>
      <td>{apiKey.groups.join(' ') || '—'}</td>
      <td>
        {new Date(apiKey.createdAt).toLocaleString()}
        {apiKey.createdBy && ` by ${apiKey.createdBy}`}
      </td>
      <td>
        {confirming ? (
          <span class="actions">
            <button type="button" class="danger" onClick={() => void revoke()}>
              Revoke {apiKey.name}
            </button>
            <button type="button" class="quiet" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </span>
        ) : (
          <button type="button" class="quiet" onClick={() => setConfirming(true)} aria-label={`Revoke ${apiKey.name}…`}>
            Revoke…
          </button>
        )}
        <ErrorMessage message={error} />
      </td>
    </tr>
  );
}
