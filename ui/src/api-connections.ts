/**
 * The signed-in person's own connections to per-user servers (an McpServer with `spec.auth.perUser`: each principal
 * connects their own account at the upstream's authorization server, docs/identity.md): the list, starting a
 * connection (Punk answers the authorization URL and binds this browser to it with an HttpOnly cookie; the tab
 * then goes there, and Punk's `/connect/callback` sends it back to `/ui/connections?connected=…` or `?error=…`),
 * and disconnecting.
 */
import type { ConnectionItem } from '@punk/lib';
import { apiRequest } from './api.js';

/** One per-user server as `GET /connections` shows it to the signed-in principal (`connectionItemSchema`). */
export type ConnectionView = ConnectionItem;

const path = (namespace: string, name: string) => `/connections/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;

/** `GET /connections`: every per-user server and whether the signed-in principal has connected it. */
export const listConnections = () => apiRequest<{ items: ConnectionView[] }>('GET', '/connections').then((a) => a.items);

/** `DELETE /connections/{namespace}/{name}`: forgets the principal's tokens for that server. */
export const disconnect = (namespace: string, name: string) => apiRequest<undefined>('DELETE', path(namespace, name));

/**
 * `POST /connections/{namespace}/{name}`, then sends this tab to the answer's `authorizationUrl` (the upstream's
 * authorization server). Resolves never (the page unloads).
 * @throws ApiError from the POST; Error when the answer is not an http(s) URL (nothing else is navigated to).
 */
export async function connect(namespace: string, name: string): Promise<void> {
  const { authorizationUrl } = await apiRequest<{ authorizationUrl: string }>('POST', path(namespace, name));
  let url: URL;
  try {
    url = new URL(authorizationUrl);
  } catch {
    throw new Error(`Punk answered no valid authorizationUrl for ${namespace}/${name} (${authorizationUrl}).`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new Error(`Punk answered an authorizationUrl that is not http(s) for ${namespace}/${name}: ${url.protocol}`);
  location.assign(url.href);
  await new Promise(() => undefined);
}

/** What a connection's state is, in a word for its badge, and the badge's class. */
export function connectionState(connection: ConnectionView): { label: string; class: 'ok' | 'warn' | 'bad' } {
  if (connection.needsReconnect) return { label: 'Needs reconnect', class: 'bad' };
  if (connection.connected) return { label: 'Connected', class: 'ok' };
  return { label: 'Not connected', class: 'warn' };
}

/** The dashboard path of `connection`'s connect page. */
export const connectPath = (connection: { namespace: string; name: string }) =>
  `connect/${encodeURIComponent(connection.namespace)}/${encodeURIComponent(connection.name)}`;
