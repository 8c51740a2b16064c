/**
 * The dashboard's client-side routes under `/ui` (History API; mcp-front answers every `/ui/…` page path with
 * index.html). {@link useRoute} matches the current path against patterns such as `runs/:id`.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Where the dashboard is served. */
export const BASE = '/ui';

const listeners = new Set<() => void>();

/** The path below {@link BASE}, without leading or trailing `/` (`runs/42`; `` for the root). */
export function currentPath(): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname;
  return path.replace(/^\/+|\/+$/g, '');
}

/** Goes to `path` (below {@link BASE}, `servers/time`) and re-renders the routes; `replace` keeps history as it was. */
export function navigate(path: string, replace = false): void {
  const url = `${BASE}/${path.replace(/^\/+/, '')}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const listener of listeners) listener();
}

addEventListener('popstate', () => {
  for (const listener of listeners) listener();
});

/** The current path below {@link BASE}; re-renders on navigation. */
export function usePath(): string {
  const [path, setPath] = useState(currentPath);
  useEffect(() => {
    const update = () => setPath(currentPath());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return path;
}

/** The parameters of `path` when it matches `pattern` (`runs/:id`), or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of want.entries()) {
    const value = got[i]!;
    if (part.startsWith(':')) params[part.slice(1)] = decodeURIComponent(value);
    else if (part !== value) return null;
  }
  return params;
}

/** A link to a dashboard path: a real `<a href>` (opens in a new tab too) that navigates in place on a plain click. */
export function Link(props: { to: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' }) {
  const { to, children, ...rest } = props;
  const onClick = (event: MouseEvent) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return (
    <a {...rest} href={`${BASE}/${to}`} onClick={onClick}>
      {children}
    </a>
  );
}
