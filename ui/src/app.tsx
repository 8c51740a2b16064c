/**
 * The dashboard's shell: the sign-in (an API key, or with OAuth configured the issuer's sign-in, kept for the
 * browser session; none when authentication is off), who is signed in (`GET /me`), the navigation of the views
 * that caller may use, and the routes.
 */
import type { ComponentChild } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, getCaller, getDashboardConfig, onSignedOut, type Caller, type DashboardConfig } from './api.js';
import { AdminOnly, CallerContext } from './caller.js';
import { ErrorMessage, messageOf } from './components.js';
import { CALLBACK_PATH, finishSignIn, startSignIn, type OAuthConfig } from './oauth.js';
import { currentPath, Link, match, navigate, usePath } from './router.js';
import { clearKey, getKey, setKey } from './session.js';
import { ApprovalsPage } from './pages/Approvals.js';
import { AuditPage } from './pages/Audit.js';
import { ConnectPage } from './pages/Connect.js';
import { ConnectionsPage } from './pages/Connections.js';
import { CredentialsPage } from './pages/Credentials.js';
import { RunPage } from './pages/Run.js';
import { RunsPage } from './pages/Runs.js';
import { ServerPage } from './pages/Server.js';
import { ServersPage } from './pages/Servers.js';
import { SettingsPage } from './pages/Settings.js';
import { WorkflowsPage } from './pages/Workflows.js';

/** The views in the navigation: path below /ui, label, and whether the API serves them to admins only. */
const NAVIGATION = [
  ['servers', 'Servers', true],
  ['credentials', 'Credentials', true],
  ['runs', 'Runs', true],
  ['audit', 'Audit', true],
  ['approvals', 'Approvals', false],
  ['connections', 'Connections', false],
  ['workflows', 'Workflows', true],
  ['settings', 'Settings & keys', true],
] as const;

/** Where the session is: checking Punk, asking for a token, signed in (or no token needed), or Punk unreachable. */
type Phase =
  | { at: 'checking' }
  | { at: 'signIn'; config: DashboardConfig; message?: string }
  | { at: 'ready'; config: DashboardConfig; caller: Caller }
  | { at: 'down'; message: string };

/** The whole app. */
export function App() {
  const [phase, setPhase] = useState<Phase>({ at: 'checking' });
  const check = async () => {
    setPhase({ at: 'checking' });
    let config: DashboardConfig | undefined;
    try {
      config = await getDashboardConfig();
      if (config.oauth && currentPath() === CALLBACK_PATH) {
        const signedIn = await signInWithCode(config.oauth);
        navigate(signedIn.returnTo, true);
        setPhase({ at: 'ready', config, caller: signedIn.caller });
        return;
      }
      if (config.authentication && getKey() === null) {
        setPhase({ at: 'signIn', config });
        return;
      }
      setPhase({ at: 'ready', config, caller: await getCaller() });
    } catch (error) {
      if (config && (!(error instanceof ApiError) || error.kind === 'refused' || error.kind === 'signedOut')) {
        clearKey();
        if (currentPath() === CALLBACK_PATH) navigate('', true);
        setPhase({ at: 'signIn', config, message: messageOf(error) });
      } else setPhase({ at: 'down', message: messageOf(error) });
    }
  };
  useEffect(() => {
    onSignedOut((message) => setPhase((now) => (now.at === 'ready' ? { at: 'signIn', config: now.config, message } : now)));
    void check();
  }, []);

  if (phase.at === 'checking') return <p class="centered">Connecting to Punk…</p>;
  if (phase.at === 'down')
    return (
      <main class="centered">
        <ErrorMessage message={phase.message} />
        <button type="button" onClick={() => void check()}>
          Try again
        </button>
      </main>
    );
  if (phase.at === 'signIn')
    return (
      <SignIn
        config={phase.config}
        message={phase.message}
        onSignedIn={(caller) => setPhase({ at: 'ready', config: phase.config, caller })}
      />
    );
  return (
    <CallerContext.Provider value={phase.caller}>
      <Shell
        caller={phase.caller}
        onSignOut={() => {
          clearKey();
          setPhase({ at: 'signIn', config: phase.config, message: 'Signed out.' });
        }}
      />
    </CallerContext.Provider>
  );
}

/**
 * The end of the OAuth sign-in, on the redirect back: the code exchanged for an access token, which Punk must
 * accept (`GET /me`) before it is kept.
 * @throws Error saying what failed: the authorization server's refusal or exchange, or Punk refusing the token.
 */
async function signInWithCode(oauth: OAuthConfig): Promise<{ caller: Caller; returnTo: string }> {
  const { accessToken, returnTo } = await finishSignIn(oauth, new URL(location.href));
  let caller: Caller;
  try {
    caller = await getCaller(accessToken);
  } catch (error) {
    if (error instanceof ApiError && (error.kind === 'refused' || error.kind === 'forbidden'))
      throw new Error(
        `Punk refused the access token from ${oauth.issuer} (${error.detail ?? error.message}): check PUNK_AUTH_* and the scopes the issuer grants.`,
        { cause: error },
      );
    throw error;
  }
  setKey(accessToken, 'oauth');
  return { caller, returnTo };
}

/** The sign-in: an API key, checked against Punk before it is kept; and, with OAuth configured, the issuer's sign-in. */
function SignIn(props: { config: DashboardConfig; message: string | undefined; onSignedIn: (caller: Caller) => void }) {
  const { oauth } = props.config;
  const [key, setKeyText] = useState('');
  const [error, setError] = useState(props.message);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const entered = key.trim();
    if (!entered) {
      setError('Enter an API key (pk_…): `punk keys create` or an admin makes one.');
      return;
    }
    setBusy(true);
    try {
      const caller = await getCaller(entered);
      setKey(entered, 'apiKey');
      props.onSignedIn(caller);
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setBusy(false);
    }
  };
  const redirect = async () => {
    setBusy(true);
    try {
      const path = currentPath();
      await startSignIn(oauth!, path === CALLBACK_PATH ? '' : path);
    } catch (caught) {
      setError(messageOf(caught));
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <form onSubmit={(event) => void submit(event)} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Sign in to Punk</h1>
        {oauth && (
          <>
            <button type="button" disabled={busy} onClick={() => void redirect()}>
              Sign in with {new URL(oauth.issuer).host}
            </button>
            <p>Or paste an API key. Either way, the sign-in stays in this browser tab only, until you close it or sign out.</p>
          </>
        )}
        {!oauth && <p>Paste an API key. It stays in this browser tab only, until you close it or sign out.</p>}
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={key}
          onInput={(event) => setKeyText(event.currentTarget.value)}
          autofocus={!oauth}
        />
        <ErrorMessage message={error} />
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

/** The signed-in frame: the navigation of the views the caller may use, who it is, and the current view. */
function Shell(props: { caller: Caller; onSignOut: () => void }) {
  const { caller } = props;
  const path = usePath();
  useEffect(() => {
    if (path === '') navigate(caller.admin ? 'servers' : 'approvals', true);
  }, [path]);
  const section = path.split('/')[0] ?? '';
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Punk</span>
        <nav aria-label="Views">
          <ul>
            {NAVIGATION.filter(([, , admin]) => caller.admin || !admin).map(([to, label]) => (
              <li key={to}>
                <Link to={to} aria-current={section === to ? 'page' : undefined}>
                  {label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        {caller.authentication && (
          <>
            <span class="muted who" title={caller.scopes.join(' ') || 'no scopes'}>
              {caller.subject}
              {!caller.admin && ' (not an admin)'}
            </span>
            <button type="button" class="quiet" onClick={props.onSignOut}>
              Sign out
            </button>
          </>
        )}
      </header>
      <main id="main" tabIndex={-1}>
        <View path={path} />
      </main>
    </div>
  );
}

/**
 * The admin views by path pattern (router.tsx `match`), each with the title its refusal names for a non-admin;
 * the views for every caller (Approvals, Connections and a server's connect page) are not among them.
 */
const ADMIN_VIEWS: Array<{ pattern: string; title: string; view: (params: Record<string, string>) => ComponentChild }> = [
  { pattern: 'servers', title: 'Servers', view: () => <ServersPage /> },
  { pattern: 'servers/:name', title: 'Server', view: (params) => <ServerPage name={params['name']!} /> },
  { pattern: 'credentials', title: 'Credentials', view: () => <CredentialsPage /> },
  { pattern: 'runs', title: 'Runs', view: () => <RunsPage /> },
  { pattern: 'runs/:id', title: 'Run', view: (params) => <RunPage id={params['id']!} /> },
  { pattern: 'audit', title: 'Audit', view: () => <AuditPage /> },
  { pattern: 'workflows', title: 'Workflows', view: () => <WorkflowsPage /> },
  { pattern: 'settings', title: 'Settings & keys', view: () => <SettingsPage /> },
];

/** The view of a path. */
function View(props: { path: string }) {
  const { path } = props;
  for (const { pattern, title, view } of ADMIN_VIEWS) {
    const params = match(pattern, path);
    if (params) return <AdminOnly title={title}>{view(params)}</AdminOnly>;
  }
  if (path === 'approvals') return <ApprovalsPage />;
  if (path === 'connections') return <ConnectionsPage />;
  const connecting = match('connect/:namespace/:name', path);
  if (connecting) return <ConnectPage namespace={connecting['namespace']!} name={connecting['name']!} />;
  if (path === '') return null;
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        No view at /ui/{path}. <Link to="servers">Go to Servers</Link>.
      </p>
    </section>
  );
}
