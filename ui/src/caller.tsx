/**
 * Who is signed in (`GET /me`) for every view: {@link useCaller}, {@link AdminOnly} (a view the API serves to admins
 * only). The dashboard only hides what the API would refuse; the API still decides every request.
 */
import { createContext, type ComponentChildren } from 'preact';
import { useContext } from 'preact/hooks';
import type { Caller } from './api.js';
import { ErrorMessage, Page } from './components.js';

/** The signed-in caller; provided by the app's shell. */
export const CallerContext = createContext<Caller | null>(null);

/** The signed-in caller. @throws Error outside the shell (a programming error). */
export function useCaller(): Caller {
  const caller = useContext(CallerContext);
  if (!caller) throw new Error('useCaller outside the signed-in shell');
  return caller;
}

/** Why `caller` may not use the admin APIs, for a person. */
export function notAdminMessage(caller: Caller): string {
  const scopes = caller.scopes.length > 0 ? `scopes ${caller.scopes.join(', ')}` : 'no scopes';
  return `Not allowed with this key: this view is for admins (the admin scope, punk:admin unless PUNK_AUTH_ADMIN_SCOPE names another), and ${caller.subject} has ${scopes}.`;
}

/** A view the API serves to admins only: its children for an admin, otherwise why not (and no API call). */
export function AdminOnly(props: { title: string; children: ComponentChildren }) {
  const caller = useCaller();
  if (caller.admin) return <>{props.children}</>;
  return (
    <Page title={props.title}>
      <ErrorMessage message={notAdminMessage(caller)} />
    </Page>
  );
}
