/**
 * The template of a new embedded database: what PGlite's initdb makes, kept as a gzipped tarball (PGlite's `dumpDataDir`,
 * 4.5 MB against 40 MB plain, which PGlite would keep in memory after loading it) in
 * `${XDG_CACHE_HOME:-~/.cache}/punk/pglite/<PGlite version>.tgz` and loaded into every new data directory
 * (`loadDataDir`). Running initdb takes seconds (about 5 on an idle 2-core machine, 15 on a loaded one); loading
 * the template takes well under one. `npm ci` makes it (the `prepare` script); else the first new database does.
 *
 * A new data directory is a copy of the template's directory form instead, `<PGlite version>/` beside the tarball
 * (made from the tarball once): loading the tarball through PGlite unpacks 40 MB in memory, and the process kept
 * about 150 MiB more resident for its whole life than one opening an existing directory (measured idle: 440 MiB
 * against 290 MiB).
 */
import { cp, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { errorMessage } from '../errors.js';
import type { Logger } from '../log.js';

/** Where the template of this PGlite version is kept. */
export function pgliteTemplatePath(): string {
  const require = createRequire(import.meta.url);
  // The package's exports hide its package.json: read it beside the entry point (dist/index.cjs).
  const entry = require.resolve('@electric-sql/pglite');
  const { version } = require(join(dirname(entry), '..', 'package.json')) as { version: string };
  const cache = process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache');
  return join(cache, 'punk', 'pglite', `${version}.tgz`);
}

/**
 * The template, read from the cache, or made now by initdb in memory and saved there (best effort: a cache that
 * cannot be written is logged, and the next new database runs initdb again).
 * @throws Error from PGlite when initdb fails.
 */
export async function pgliteTemplate(startParams: string[], log: Logger): Promise<Blob> {
  const path = pgliteTemplatePath();
  try {
    return new Blob([await readFile(path)]);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      log.warn({ err: error, path }, 'cannot read the PGlite template; running initdb');
  }
  const lite = await PGlite.create(undefined, { startParams });
  let template: Blob;
  try {
    template = await lite.dumpDataDir('gzip');
  } finally {
    await lite.close();
  }
  try {
    await mkdir(dirname(path), { recursive: true });
    // Written aside, then renamed: a reader never sees half a tarball.
    const partial = `${path}.${process.pid}.partial`;
    await writeFile(partial, new Uint8Array(await template.arrayBuffer()));
    await rename(partial, path).catch(async (error: unknown) => {
      await rm(partial, { force: true });
      throw error;
    });
  } catch (error) {
    log.warn({ path }, `cannot keep the PGlite template (${errorMessage(error)}): the next new database runs initdb again`);
  }
  return template;
}

/** Where the directory form of the template is kept: beside the tarball, named by the PGlite version. */
export function pgliteTemplateDirectoryPath(): string {
  return pgliteTemplatePath().replace(/\.tgz$/, '');
}

/**
 * Copies the template's directory form into `directory` (a new data directory: no database in it yet), making that
 * form first when the cache has none: a PGlite opened on a directory aside, loaded from the tarball
 * (`pgliteTemplate`), closed, then renamed into place, so a reader never sees half a directory.
 * @throws Error from PGlite when the tarball cannot be loaded or initdb fails; the file system's error when the
 *   copy fails.
 */
export async function copyPgliteTemplate(directory: string, startParams: string[], log: Logger): Promise<void> {
  const template = pgliteTemplateDirectoryPath();
  const copy = () => cp(template, directory, { recursive: true, force: false, errorOnExist: false });
  try {
    await copy();
    return;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const partial = `${template}.${process.pid}.partial`;
  await rm(partial, { recursive: true, force: true });
  const lite = await PGlite.create(partial, { startParams, loadDataDir: await pgliteTemplate(startParams, log) });
  await lite.close();
  await rename(partial, template).catch(async (error: unknown) => {
    // Another process made it meanwhile: theirs is as good.
    await rm(partial, { recursive: true, force: true });
    if (!['ENOTEMPTY', 'EEXIST'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error;
  });
  await copy();
}

/** Forgets a template that PGlite could not load (both forms), so the next new database makes a fresh one. */
export async function discardPgliteTemplate(): Promise<void> {
  await rm(pgliteTemplatePath(), { force: true });
  await rm(pgliteTemplateDirectoryPath(), { recursive: true, force: true });
}
