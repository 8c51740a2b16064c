import { readdir, readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { z } from 'zod';
import { mcpCredentialSchema, type McpCredential } from './mcpcredential.js';
import { mcpPolicySchema, type McpPolicy } from './mcppolicy.js';
import { API_VERSION, mcpServerSchema, type McpServer } from './mcpserver.js';
import { parseWorkflowDocument, type LoadedWorkflow } from './workflow-loader.js';

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

/** A valid McpPolicy or McpCredential (`object`) and the file it came from. */
export interface LoadedDocument<T> {
  object: T;
  file: string;
  document: number;
}

/** What loading found: every valid server, policy and credential, and every error. */
export interface ManifestLoadResult {
  servers: LoadedServer[];
  policies: LoadedDocument<McpPolicy>[];
  credentials: LoadedDocument<McpCredential>[];
  workflows: LoadedWorkflow[];
  errors: ManifestError[];
}

/** Renders a manifest error as one line: `file#doc field: message`. */
export function formatManifestError(error: ManifestError): string {
  return `${error.file} (document ${error.document}) ${error.field}: ${error.message}`;
}

/** The kinds a manifest directory may hold, each with its schema. */
const SCHEMAS: Record<string, z.ZodType<{ metadata: { name: string; namespace?: string | undefined } }>> = {
  McpServer: mcpServerSchema,
  McpPolicy: mcpPolicySchema,
  McpCredential: mcpCredentialSchema,
};

/**
 * Parses the McpServer, McpPolicy, McpCredential and McpWorkflow documents of one YAML text (multi-document).
 * Invalid documents and documents of any other kind become errors, each naming its field (a workflow also needs a
 * valid graph); valid ones are returned, with `defaultNamespace` where they name none.
 */
export function parseManifests(text: string, file: string, defaultNamespace: string): ManifestLoadResult {
  const result: ManifestLoadResult = { servers: [], policies: [], credentials: [], workflows: [], errors: [] };
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
    if (object.apiVersion === API_VERSION && object.kind === 'McpWorkflow') {
      const loaded = parseWorkflowDocument(object, file, document, defaultNamespace);
      if ('errors' in loaded) result.errors.push(...loaded.errors);
      else result.workflows.push(loaded.workflow);
      return;
    }
    const kind = typeof object.kind === 'string' && Object.hasOwn(SCHEMAS, object.kind) ? object.kind : undefined;
    if (kind === undefined || object.apiVersion !== API_VERSION) {
      result.errors.push({
        file,
        document,
        field: kind === undefined ? 'kind' : 'apiVersion',
        message: `expected apiVersion ${API_VERSION} and kind McpServer, McpPolicy or McpCredential (got ${JSON.stringify(object.apiVersion)} ${JSON.stringify(object.kind)})`,
      });
      return;
    }
    const parsed = SCHEMAS[kind]!.safeParse(object);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        result.errors.push({ file, document, field: issue.path.length > 0 ? issue.path.join('.') : '(document)', message: issue.message });
      }
      return;
    }
    parsed.data.metadata.namespace ??= defaultNamespace;
    if (kind === 'McpServer') result.servers.push({ server: parsed.data as McpServer, file, document });
    else if (kind === 'McpPolicy') result.policies.push({ object: parsed.data as McpPolicy, file, document });
    else result.credentials.push({ object: parsed.data as McpCredential, file, document });
  });
  return result;
}

/** The YAML files under `dir` (any depth), leaving out dot directories; the first readdir's error is thrown. */
async function manifestFiles(dir: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && !entry.name.startsWith('.')) files.push(...(await manifestFiles(path)));
    else if (entry.isFile() && /\.ya?ml$/.test(entry.name)) files.push(path);
  }
  return files;
}

/**
 * Loads every `*.yaml` / `*.yml` file under a directory (recursively, in
 * name order, outside dot directories: those hold state, such as `punk up`'s `.punk/`). Bad files and documents are reported and skipped; valid
 * documents are kept. Two documents of one kind with the same namespace and
 * name: the first wins and the second is an error. A relative
 * `spec.openapi.file` is made absolute, beside its manifest; the file it names
 * is an OpenAPI document, not a manifest, so it is not reported as one.
 *
 * @throws Error when the directory cannot be read at all.
 */
export async function loadManifestDirectory(dir: string, defaultNamespace: string): Promise<ManifestLoadResult> {
  const result: ManifestLoadResult = { servers: [], policies: [], credentials: [], workflows: [], errors: [] };
  const files = (await manifestFiles(dir)).sort();
  const seen = new Set<string>();
  const documents = new Set<string>();
  const problems: Array<{ path: string; errors: ManifestError[] }> = [];
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
    problems.push({ path, errors: loaded.errors });
    for (const entry of loaded.servers) {
      const openapi = entry.server.spec.openapi;
      if (openapi?.file !== undefined) {
        if (!isAbsolute(openapi.file)) openapi.file = resolve(dirname(path), openapi.file);
        documents.add(openapi.file);
      }
    }
    /** Whether the first of its kind and name; a later one is an error. */
    const first = (kind: string, metadata: { name: string; namespace?: string | undefined }, document: number) => {
      const key = `${metadata.namespace}/${metadata.name}`;
      if (!seen.has(`${kind} ${key}`)) {
        seen.add(`${kind} ${key}`);
        return true;
      }
      result.errors.push({ file, document, field: 'metadata.name', message: `${kind} ${key} is already defined by an earlier manifest` });
      return false;
    };
    result.servers.push(...loaded.servers.filter((e) => first('McpServer', e.server.metadata, e.document)));
    result.policies.push(...loaded.policies.filter((e) => first('McpPolicy', e.object.metadata, e.document)));
    result.credentials.push(...loaded.credentials.filter((e) => first('McpCredential', e.object.metadata, e.document)));
    result.workflows.push(...loaded.workflows.filter((e) => first('McpWorkflow', e.workflow.metadata, e.document)));
  }
  for (const { path, errors } of problems) if (!documents.has(resolve(path))) result.errors.push(...errors);
  result.errors.sort((a, b) => a.file.localeCompare(b.file) || a.document - b.document);
  return result;
}
