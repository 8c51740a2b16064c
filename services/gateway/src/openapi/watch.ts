/**
 * Watches the OpenAPI document of a connected openapi server (docs/openapi.md "The document"), so a changed document
 * is read while the server is connected, not only at its next connect:
 * - a `file` document: the directories of the files it was read from (the document and the files of its `$ref`s),
 *   with `fs.watch` (so a file an editor replaces by a rename is seen); an event on one of those files, debounced,
 *   loads the document again;
 * - a `url` document: fetched again every `spec.openapi.refreshInterval` (default 5m) with the validators of its last
 *   load (`If-None-Match`, `If-Modified-Since`, RFC 9110 section 13.1); an HTTP 304 loads nothing.
 * `content` and `configMapKeyRef` documents change only with the server's spec, which reconnects it: nothing to watch.
 * Loads never overlap; a failed one is reported and the next event or interval tries again.
 */
import { watch, type FSWatcher } from 'node:fs';
import { dirname, join } from 'node:path';
import { durationMs, OPENAPI_REFRESH_INTERVAL, type OpenApiSource } from '@punk/lib';
import type { DocumentValidators, LoadedDocument } from './document.js';

/** How long file events are gathered into one load, in milliseconds (an editor's save is several events). */
const FILE_DEBOUNCE_MS = 100;

/** What {@link watchDocument} calls. */
export interface DocumentWatchOptions {
  /**
   * Loads the document again and serves it; `since`: a url document's validators, for a conditional request.
   * Resolves with the load (undefined: unchanged, HTTP 304); rejects when the document cannot be loaded or served.
   */
  reload(since: DocumentValidators | undefined): Promise<LoadedDocument | undefined>;
  /** A failed reload's error (the document stays as last served). */
  onError(error: unknown): void;
}

/** A running watch; {@link close} stops it (a load under way still ends, but reports no error). */
export interface DocumentWatch {
  close(): void;
}

/** Watches the document `source` names, last loaded as `loaded`. */
export function watchDocument(source: OpenApiSource, loaded: LoadedDocument, options: DocumentWatchOptions): DocumentWatch {
  let closed = false;
  let running: Promise<void> = Promise.resolve();
  let last = loaded;
  /** Loads again after the previous load (if any) ended; resolves once done. */
  const reload = (): Promise<void> =>
    (running = running.then(async () => {
      if (closed) return;
      try {
        last = (await options.reload(last.validators)) ?? last;
      } catch (error) {
        if (!closed) options.onError(error);
      }
    }));

  if (source.url !== undefined) {
    const intervalMs = durationMs(source.refreshInterval ?? OPENAPI_REFRESH_INTERVAL.default);
    let timer: NodeJS.Timeout | undefined;
    const next = () => {
      timer = setTimeout(() => void reload().then(() => !closed && next()), intervalMs);
      timer.unref();
    };
    next();
    return {
      close() {
        closed = true;
        clearTimeout(timer);
      },
    };
  }
  if (source.file === undefined) return { close: () => undefined };

  let watchers: FSWatcher[] = [];
  let debounce: NodeJS.Timeout | undefined;
  /** Watches the directories of the files of the last load (a change may add or drop a `$ref`'d file). */
  const rewatch = () => {
    for (const watcher of watchers) watcher.close();
    const files = new Set(last.files);
    watchers = [...new Set(last.files.map((file) => dirname(file)))].map((dir) => {
      const watcher = watch(dir, { persistent: false }, (_event, filename) => {
        if (filename !== null && !files.has(join(dir, filename))) return;
        clearTimeout(debounce);
        debounce = setTimeout(() => {
          const before = last.files.join('\n');
          void reload().then(() => !closed && last.files.join('\n') !== before && rewatch());
        }, FILE_DEBOUNCE_MS);
      });
      watcher.on('error', (error) => {
        options.onError(error);
      });
      return watcher;
    });
  };
  rewatch();
  return {
    close() {
      closed = true;
      clearTimeout(debounce);
      for (const watcher of watchers) watcher.close();
    },
  };
}
