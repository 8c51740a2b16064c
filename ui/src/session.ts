/**
 * The session's bearer token: an API key or an OAuth access token, kept in `sessionStorage` (this tab, until it
 * closes) with what it is, never in a cookie, so no request carries it unless the dashboard's own code adds it
 * (no CSRF surface). The OAuth sign-in's transient state (PKCE verifier, `state`) lives there too while the
 * browser is at the authorization server (oauth.ts).
 */
const TOKEN = 'punk.token';
const KIND = 'punk.tokenKind';

/** What the session's token is: an API key pasted in, or an access token from the OAuth sign-in. */
export type TokenKind = 'apiKey' | 'oauth';

/** The token the person signed in with, or null. */
export function getKey(): string | null {
  return sessionStorage.getItem(TOKEN);
}

/** What the session's token is (`apiKey` when none is kept). */
export function getTokenKind(): TokenKind {
  return sessionStorage.getItem(KIND) === 'oauth' ? 'oauth' : 'apiKey';
}

/** Keeps `token` for this browser session. */
export function setKey(token: string, kind: TokenKind = 'apiKey'): void {
  sessionStorage.setItem(TOKEN, token);
  sessionStorage.setItem(KIND, kind);
}

/** Forgets the token (sign out, or a token that stopped working). */
export function clearKey(): void {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(KIND);
}
