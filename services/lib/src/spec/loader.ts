import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { API_VERSION, mcpServerSchema, type McpServer } from './mcpserver.js';

/** One problem found while loading manifests: where it is and what is wrong. */
export interface ManifestError {
  /** File path, relative to the loaded directory when inside it. */
  file: string;
  /** 1-based index of the YAML document inside the file. */
  document: number;
  /** Dotted field path (`spec.transport`), or `(document)` for the whole document. */
  field: string;
  message: string;
}

/** A valid McpServer and the file it came from. */
export interface LoadedServer {
  server: McpServer;
  file: string;
  document: number;
}

/** What loading found: every valid server and every error. */
export interface ManifestLoadResult {
  servers: LoadedServer[];
  errors: ManifestError[];
}

/** Renders a manifest error as one line: `file#doc field: message`. */
export function formatManifestError(error: ManifestError): string {
  return `${error.file} (document ${error.document}) ${error.field}: ${error.message}`;
}

/**
 * Kinds of `mcp.punk.dev` that only a cluster serves (through the operator): a manifest directory may hold
 * them beside its McpServers, and the loader passes over them.
 */
const CLUSTER_ONLY_KINDS = new Set(['McpCredential', 'McpPolicy']);

/**
 * Parses the McpServer documents of one YAML text (multi-document).
 * Invalid documents become errors; valid ones are returned. McpCredential and
 * McpPolicy documents are skipped (the operator serves them in a cluster);
 * documents of any other kind are reported as errors.
 */
export function parseManifests(text: string, file: string, defaultNamespace: string): ManifestLoadResult {
  const result: ManifestLoadResult = { servers: [], errors: [] };
  const documents = parseAllDocuments(text);
  const list = Array.isArray(documents) ? documents : [documents];
  list.forEach((doc, index) => {
    const document = index + 1;
    if (doc.errors.length > 0) {
      for (const error of doc.errors)
        result.errors.push({ file, document, field: '(document)', message: `YAML: ${error.message.split('\n')[0]}` });
      return;
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return; // empty document
    if (typeof value !== 'object' || Array.isArray(value)) {
      result.errors.push({
        file,
        document,
        field: '(document)',
        message: 'a manifest must be a mapping with apiVersion, kind, metadata and spec',
      });
      return;
    }
    const object = value as Record<string, unknown>;
    if (object.apiVersion === API_VERSION && CLUSTER_ONLY_KINDS.has(object.kind as string)) return;
    if (object.kind !== 'McpServer' || object.apiVersion !== API_VERSION) {
      result.errors.push({
        file,
        document,
        field: object.kind !== 'McpServer' ? 'kind' : 'apiVersion',
        message: `expected apiVersion ${API_VERSION} and kind McpServer (got ${JSON.stringify(object.apiVersion)} ${JSON.stringify(object.kind)})`,
      });
      return;
    }
    const parsed = mcpServerSchema.safeParse(object);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        result.errors.push({ file, document, field: issue.path.length > 0 ? issue.path.join('.') : '(document)', message: issue.message });
      }
      return;
    }
    const server = parsed.data;
    server.metadata.namespace ??= defaultNamespace;
    result.servers.push({ server, file, document });
  });
  return result;
}

/**
 * Loads every `*.yaml` / `*.yml` file under a directory (recursively, in
 * name order). Bad files and documents are reported and skipped; valid
 * servers are kept. Two servers with the same namespace and name: the first
 * wins and the second is an error.
 *
 * @throws Error when the directory cannot be read at all.
 */
export async function loadManifestDirectory(dir: string, defaultNamespace: string): Promise<ManifestLoadResult> {
  const result: ManifestLoadResult = { servers: [], errors: [] };
  const files = (await readdir(dir, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  const seen = new Set<string>();
  for (const path of files) {
    const file = relative(process.cwd(), path) || path;
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      result.errors.push({ file, document: 0, field: '(file)', message: `cannot read: ${(error as Error).message}` });
      continue;
    }
    const loaded = parseManifests(text, file, defaultNamespace);
    result.errors.push(...loaded.errors);
    for (const entry of loaded.servers) {
      const key = `${entry.server.metadata.namespace}/${entry.server.metadata.name}`;
      if (seen.has(key)) {
        result.errors.push({
          file,
          document: entry.document,
          field: 'metadata.name',
          message: `McpServer ${key} is already defined by an earlier manifest`,
        });
        continue;
      }
      seen.add(key);
      result.servers.push(entry);
    }
  }
  return result;
}
