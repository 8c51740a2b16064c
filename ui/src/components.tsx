/** Small building blocks every view uses: loading an API answer, showing an error, a page's frame. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.js';

/** What {@link useLoad} holds: the answer once loaded, the error of the last try, and a way to load again. */
export interface Loaded<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  reload: () => Promise<void>;
}

/** The message of any thrown value, for a person. */
export function messageOf(error: unknown): string {
  return error instanceof ApiError || error instanceof Error ? error.message : String(error);
}

/** Loads `load()` on mount and whenever `deps` change; `reload` loads again (after a change the view made). */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[] = []): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  // The caller names what the loader depends on, as with useEffect.
  const run = useCallback(load, deps);
  const reload = useCallback(async () => {
    setLoading(true);
    try {
      setData(await run());
      setError(undefined);
    } catch (caught) {
      setError(messageOf(caught));
    } finally {
      setLoading(false);
    }
  }, [run]);
  useEffect(() => void reload(), [reload]);
  return { data, error, loading, reload };
}

/** An error for the person, announced by screen readers (`role="alert"`); nothing when `message` is empty. */
export function ErrorMessage(props: { message: string | undefined }) {
  if (!props.message) return null;
  return (
    <p class="error" role="alert">
      {props.message}
    </p>
  );
}

/** A view's frame: its heading and, on the right, its actions. */
export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title">{props.title}</h1>
        {props.actions && <div class="actions">{props.actions}</div>}
      </header>
      {props.children}
    </section>
  );
}
