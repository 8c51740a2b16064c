/**
 * Loads the OpenAPI document of an `openapi` McpServer (`spec.openapi`): from its url (through the SSRF-guarded
 * fetch), from a file (its relative `$ref`s resolved beside it, never outside its directory), or from its inline
 * content (no external `$ref`s), then parses, dereferences and validates it with @apidevtools/swagger-parser
 * (OpenAPI 3.0 and 3.1). Errors name the server and the problem, with its path in the document.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { errorMessage, PunkError, type McpServer, type OpenApiSource } from '@punk/lib';
import type { FetchLike } from '@modelcontextprotocol/client';

/** A dereferenced, validated OpenAPI 3.x document (its `$ref`s replaced, except circular ones). */
export type OpenApiDocument = Record<string, unknown> & { openapi: string; paths?: Record<string, Record<string, unknown>> };

/** A loaded document and where it came from (the base of a relative `servers[0].url`). */
export interface LoadedDocument {
  document: OpenApiDocument;
  /** The document's URL or `file:` URL; undefined for inline content. */
  location?: string;
  /** The absolute paths of the files read (a `file` document and the files of its `$ref`s): what to watch. */
  files: string[];
  /** A url document's validators (RFC 9110 section 8.8), sent back to fetch it again only if it changed. */
  validators?: DocumentValidators;
}

/** The `ETag` and `Last-Modified` of a fetched document, as the server sent them. */
export interface DocumentValidators {
  etag?: string;
  lastModified?: string;
}

/** Largest document (or external `$ref` file) read, in bytes. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** Options of {@link loadDocument}. */
export interface LoadOptions {
  /** The SSRF-guarded fetch every download goes through. */
  fetch?: FetchLike;
  /** Budget of each download, in milliseconds. */
  timeoutMs: number;
  /**
   * The validators of the last load of a url document: it is fetched with `If-None-Match` / `If-Modified-Since`
   * (RFC 9110 section 13.1), and an HTTP 304 answer loads nothing.
   */
  since?: DocumentValidators;
}

/**
 * Reads, parses and validates the document `spec.openapi` names; resolves with undefined when `options.since` is given
 * and the url document is unchanged (HTTP 304).
 * @throws PunkError `OpenApiInvalid` naming the server, the document and the problem (with its path in the document
 *   when the validator gives one); `EgressRefused` and the other errors of the guarded fetch for a url.
 */
export async function loadDocument(
  server: McpServer,
  source: OpenApiSource,
  options: LoadOptions & { since?: undefined },
): Promise<LoadedDocument>;
export async function loadDocument(server: McpServer, source: OpenApiSource, options: LoadOptions): Promise<LoadedDocument | undefined>;
export async function loadDocument(server: McpServer, source: OpenApiSource, options: LoadOptions): Promise<LoadedDocument | undefined> {
  const name = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
  const invalid = (where: string, why: string) =>
    new PunkError('OpenApiInvalid', `server ${name}: the OpenAPI document ${where} is invalid: ${why}`, { server: name });
  if (source.configMapKeyRef !== undefined) {
    throw invalid(
      `in ConfigMap ${source.configMapKeyRef.name} key ${source.configMapKeyRef.key}`,
      'a ConfigMap is read in the cluster only; under punk up or through the registry API use openapi.file, openapi.url or openapi.content',
    );
  }
  const download = async (url: string) => (await fetchText(url, options))!.text;
  const files: string[] = [];
  let where: string;
  let location: string | undefined;
  let validators: DocumentValidators | undefined;
  let text: string;
  if (source.url !== undefined) {
    where = source.url;
    location = source.url;
    const fetched = await fetchText(source.url, options, options.since);
    if (fetched === undefined) return undefined;
    ({ text, validators } = fetched);
  } else if (source.file !== undefined) {
    where = source.file;
    if (!isAbsolute(source.file))
      throw invalid(where, 'openapi.file must be an absolute path here (punk up makes a relative one absolute, beside its manifest)');
    location = `file://${source.file}`;
    files.push(source.file);
    text = await readBounded(source.file).catch((error: unknown) => {
      throw invalid(where, `cannot read it: ${errorMessage(error)}`);
    });
  } else {
    where = '(openapi.content)';
    text = source.content ?? '';
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text, { maxAliasCount: 100 }); // YAML is a superset of JSON
  } catch (error) {
    throw invalid(where, `it is neither JSON nor YAML: ${errorMessage(error).split('\n')[0]}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalid(where, 'it is not a JSON or YAML object');
  const version = (parsed as Record<string, unknown>).openapi;
  if (typeof version !== 'string' || !/^3\.[01]\./.test(version))
    throw invalid(
      where,
      `openapi is ${JSON.stringify(version)}: Punk reads OpenAPI 3.0 and 3.1 documents (convert a Swagger 2.0 one first)`,
    );
  const root = source.file !== undefined ? dirname(source.file) : undefined;
  try {
    // Loaded with the first OpenAPI document: a start without OpenAPI servers needs none of the parser's modules.
    const { default: SwaggerParser } = await import('@apidevtools/swagger-parser');
    const document = await SwaggerParser.validate(location ?? '', parsed as never, {
      resolve: {
        external: source.content === undefined,
        file:
          root === undefined
            ? false
            : {
                order: 1,
                canRead: (file) => !/^https?:/i.test(file.url),
                read: async (file) => {
                  const path = file.url.startsWith('file:') ? fileURLToPath(file.url) : file.url;
                  const inside = relative(root, path);
                  if (inside.startsWith(`..${sep}`) || inside === '..' || isAbsolute(inside))
                    throw new Error(`$ref ${path} is outside the document's directory ${root}`);
                  files.push(path);
                  return readBounded(path);
                },
              },
        http: source.url === undefined ? false : { order: 1, canRead: /^https?:/i, read: (file) => download(file.url) },
      },
      dereference: { circular: 'ignore' },
    });
    return {
      document: document as unknown as OpenApiDocument,
      ...(location !== undefined && { location }),
      files,
      ...(validators && { validators }),
    };
  } catch (error) {
    throw invalid(where, errorMessage(error).replace(/\s+/g, ' ').trim());
  }
}

/** A file's text, refused past {@link MAX_DOCUMENT_BYTES}. */
async function readBounded(path: string): Promise<string> {
  const bytes = await readFile(path);
  if (bytes.length > MAX_DOCUMENT_BYTES) throw new Error(`${path} is larger than ${MAX_DOCUMENT_BYTES} bytes`);
  return bytes.toString('utf8');
}

/**
 * A document's text from `url` over the guarded fetch, and its validators; a status other than 2xx or more than
 * {@link MAX_DOCUMENT_BYTES} is an error. With `since`, a conditional request: undefined when answered HTTP 304.
 */
async function fetchText(
  url: string,
  options: LoadOptions,
  since?: DocumentValidators,
): Promise<{ text: string; validators: DocumentValidators } | undefined> {
  const fetcher = options.fetch ?? fetch;
  const response = await fetcher(url, {
    headers: {
      accept: 'application/json, application/yaml, text/yaml, */*',
      ...(since?.etag !== undefined && { 'if-none-match': since.etag }),
      ...(since?.lastModified !== undefined && { 'if-modified-since': since.lastModified }),
    },
    signal: AbortSignal.timeout(options.timeoutMs),
  });
  if (since !== undefined && response.status === 304) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new PunkError('OpenApiInvalid', `the OpenAPI document ${url} could not be fetched: HTTP ${response.status}`, {
      status: response.status,
    });
  }
  const bytes = await readLimited(response, MAX_DOCUMENT_BYTES);
  if (bytes === undefined) throw new PunkError('OpenApiInvalid', `the OpenAPI document ${url} is larger than ${MAX_DOCUMENT_BYTES} bytes`);
  const etag = response.headers.get('etag') ?? undefined;
  const lastModified = response.headers.get('last-modified') ?? undefined;
  return {
    text: new TextDecoder().decode(bytes),
    validators: { ...(etag !== undefined && { etag }), ...(lastModified !== undefined && { lastModified }) },
  };
}

/** A response's body, or undefined (the rest cancelled) once it passes `max` bytes. */
export async function readLimited(response: Response, max: number): Promise<Uint8Array | undefined> {
  if (!response.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}
