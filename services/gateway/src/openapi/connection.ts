/**
 * An `openapi` McpServer as a connection like any other (connect.ts's {@link Connection}): an MCP server in the
 * gateway's process (the SDK's low-level `Server`) on one end of an in-memory transport pair, the gateway's `Client`
 * on the other, so listing, pinning, governance, the ledger, timeouts and size limits are the path of every upstream.
 * The server lists one tool per operation (tools.ts) and answers a call with one HTTP request to the API (call.ts),
 * sent through the SSRF-guarded fetch with `spec.headers` only (resolved from the vault at connect time; an HTTP 401
 * to an OAuth2 credential's header renews it once and sends the request again). Redirects are not followed: a 3xx is
 * answered as it is, so no credential goes to another origin. While connected, the document is watched (watch.ts): a
 * changed one is served and announced with `notifications/tools/list_changed`, one that cannot be served leaves the
 * last good one served and its error among the connection's warnings.
 */
import { Client, type FetchLike } from '@modelcontextprotocol/client';
import { InMemoryTransport, Server } from '@modelcontextprotocol/server';
import { errorMessage, PunkError, type Logger, type McpServer, type OpenApiSource } from '@punk/lib';
import { redact } from '@punk/lib';
import { headerRecord, renewHeaders, resolveHeaders, type ResolvedHeader, type Secrets } from '../upstream-secrets.js';
import { ArgumentValidator, buildRequest, pathParameterProblem, resultOf, type ToolResult } from './call.js';
import { loadDocument, type LoadedDocument, type OpenApiDocument } from './document.js';
import { deriveTools, type OpenApiOperation } from './tools.js';
import { watchDocument } from './watch.js';
import { describeFetchError } from '../pool-fetch.js';
import { redactUrl } from '../egress/url-shape.js';

/** Largest API answer by default, in bytes (the gateway passes its own bound: twice `PUNK_MAX_RESULT_BYTES`). */
const DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024;

/** What {@link openOpenApiConnection} needs of connect.ts's options. */
export interface OpenApiConnectOptions {
  log: Logger;
  /** Budget of loading the document and the handshake, in milliseconds. */
  timeoutMs: number;
  /** The SSRF-guarded fetch of the document and of every call. */
  fetch?: FetchLike;
  secrets?: Secrets;
  /** Largest API answer read, in bytes. */
  maxMessageBytes?: number;
  /** The MCP client of the connection (connect.ts's, with its notification handlers). */
  newClient: (hide: (text: string) => string) => Client;
}

/** What connect.ts returns for an openapi server (its `Connection` with `transport: 'openapi'`). */
export interface OpenApiConnection {
  client: Client;
  transport: 'openapi';
  headers: ResolvedHeader[];
  /** What is wrong but served, now (see Connection.warnings). */
  warnings: () => string[];
  unauthorized: () => number;
  sessionLost: () => number;
  redact(text: string): string;
  redactForClient(text: string): string;
}

/**
 * Loads the document, derives its tools and connects a client to them.
 * @throws PunkError `OpenApiInvalid` (the document, an `x-mcp` or `spec.openapi.operations`, with the path of the
 *   problem), `OpenApiInvalid` for a document without servers and no `spec.openapi.baseUrl`, the guarded fetch's
 *   errors for a url document, and the credential errors of upstream-secrets.ts.
 */
export async function openOpenApiConnection(
  server: McpServer,
  source: OpenApiSource,
  options: OpenApiConnectOptions,
): Promise<OpenApiConnection> {
  const name = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
  const secrets = new Set<string>();
  const vaultSecrets = new Set<string>();
  const hide = (text: string) => redact(text, secrets);
  const hideFromClient = (text: string) => redact(text, vaultSecrets);
  const remember = (headers: ResolvedHeader[]) => {
    for (const header of headers) {
      secrets.add(header.value);
      if (header.fromVault) vaultSecrets.add(header.value);
    }
    return headers;
  };
  // Resolved once, as for a url server: a missing credential fails the start (the status names it), a changed one
  // reconnects the server, and an HTTP 401 renews an OAuth2 one for this call and the next.
  const headers = remember(await resolveHeaders(server, options.secrets));
  let current = headers;
  const loading = { ...(options.fetch && { fetch: options.fetch }), timeoutMs: options.timeoutMs };
  const loaded = await loadDocument(server, source, loading);
  let served = serve(loaded, source, name, options.log);
  /** Why the document, changed since it was served, could not be served again (the last good one is). */
  let reloadProblem: string | undefined;
  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_BODY_BYTES;
  let unauthorized = 0;

  const send = async (operation: OpenApiOperation, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> => {
    const { validator, baseUrl } = served;
    const problem = validator.check(operation, args) ?? pathParameterProblem(operation, args);
    if (problem !== undefined)
      return { content: [{ type: 'text', text: `tool ${operation.tool.name}: ${problem}; nothing was sent to the API` }], isError: true };
    const request = buildRequest(baseUrl, operation, args);
    for (let renewed = false; ; renewed = true) {
      const response = await (options.fetch ?? fetch)(request.url, {
        method: request.method,
        // The configured headers win over a header parameter of the same name; nothing of the MCP client is sent.
        headers: { accept: 'application/json, */*;q=0.8', ...request.headers, ...headerRecord(current) },
        ...(request.body !== undefined && { body: request.body }),
        redirect: 'manual',
        signal,
      });
      if (response.status !== 401 || renewed) return resultOf(response, maxBytes, `openapi://${name}/${operation.tool.name}`);
      unauthorized++;
      const renewal = await renewHeaders(current, options.secrets);
      if (!renewal) return resultOf(response, maxBytes, `openapi://${name}/${operation.tool.name}`);
      await response.body?.cancel();
      options.log.info({ server: name }, `server ${name}: the API answered HTTP 401; its OAuth2 credentials were renewed, sending again`);
      current = remember(renewal);
    }
  };

  const mcp = new Server(
    { name: server.metadata.name, version: String(loaded.document.info && (loaded.document.info as { version?: unknown }).version) },
    { capabilities: { tools: { listChanged: true } } },
  );
  mcp.setRequestHandler('tools/list', () => ({ tools: structuredClone(served.operations.map((operation) => operation.tool)) }) as never);
  mcp.setRequestHandler('tools/call', async (request, ctx) => {
    const operation = served.operations.find((o) => o.tool.name === request.params.name);
    if (!operation) return { content: [{ type: 'text', text: `unknown tool ${request.params.name}` }], isError: true };
    try {
      return (await send(operation, request.params.arguments ?? {}, ctx.mcpReq.signal)) as never;
    } catch (error) {
      // A refusal of the egress guard, an unreachable host, a timeout: a tool error naming it (secrets hidden).
      const why = error instanceof PunkError ? error.message : `${describeFetchError(error)} reaching ${redactUrl(served.baseUrl)}`;
      return {
        content: [{ type: 'text', text: hide(`tool ${operation.tool.name}: the request to the API failed: ${why}`) }],
        isError: true,
      } as never;
    }
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await mcp.connect(serverSide);
  const client = options.newClient(hideFromClient);
  client.onclose = () => void mcp.close();
  await client.connect(clientSide, { timeout: options.timeoutMs });
  // A changed document is served at once: its tools are listed again (notifications/tools/list_changed), so pinning
  // reviews every changed definition; one that cannot be served leaves the last good one served, its error a warning.
  const watcher = watchDocument(source, loaded, {
    reload: async (since) => {
      const next = await loadDocument(server, source, { ...loading, ...(since && { since }) });
      if (next === undefined) return undefined;
      const before = JSON.stringify(served.operations.map((operation) => operation.tool));
      served = serve(next, source, name, options.log);
      if (reloadProblem !== undefined) options.log.info({ server: name }, `server ${name}: its OpenAPI document is valid again`);
      reloadProblem = undefined;
      if (JSON.stringify(served.operations.map((operation) => operation.tool)) !== before) {
        options.log.info(
          { server: name, tools: served.operations.length },
          `server ${name}: its OpenAPI document changed; listing its tools again`,
        );
        await mcp.sendToolListChanged();
      }
      return next;
    },
    onError: (error) => {
      reloadProblem = hide(`the OpenAPI document changed but cannot be served, so its last good version is: ${errorMessage(error)}`);
      options.log.warn({ server: name }, `server ${name}: ${reloadProblem}`);
    },
  });
  mcp.onclose = () => {
    watcher.close();
  };
  options.log.info(
    { server: name, tools: served.operations.length, baseUrl: served.baseUrl },
    `serving server ${name}: ${served.operations.length} tools from its OpenAPI document`,
  );
  return {
    client,
    transport: 'openapi',
    warnings: () => [...served.warnings, ...(reloadProblem !== undefined ? [reloadProblem] : [])],
    headers,
    unauthorized: () => unauthorized,
    sessionLost: () => 0,
    redact: hide,
    redactForClient: hideFromClient,
  };
}

/** A loaded document as served: its operations, their argument validator, the base URL of its requests and its warnings. */
interface ServedDocument {
  operations: OpenApiOperation[];
  validator: ArgumentValidator;
  baseUrl: string;
  warnings: string[];
}

/**
 * The tools of a loaded document, ready to serve (its warnings logged).
 * @throws PunkError `OpenApiInvalid` as {@link deriveTools} and {@link baseUrlOf} do.
 */
function serve(loaded: LoadedDocument, source: OpenApiSource, name: string, log: Logger): ServedDocument {
  const { operations, warnings } = deriveTools(loaded.document, source.operations, name);
  if (warnings.length > 0) log.warn({ server: name, warnings }, `server ${name}: ${warnings.join('; ')}`);
  const baseUrl = baseUrlOf(loaded.document, source, loaded.location, name);
  return { operations, validator: new ArgumentValidator(loaded.document.openapi), baseUrl, warnings };
}

/** `spec.openapi.baseUrl`, else the document's first server (its variables at their defaults, relative to the document's URL). */
function baseUrlOf(document: OpenApiDocument, source: OpenApiSource, location: string | undefined, server: string): string {
  if (source.baseUrl !== undefined) return source.baseUrl;
  const first = Array.isArray(document.servers) ? (document.servers[0] as Record<string, unknown> | undefined) : undefined;
  if (typeof first?.url === 'string') {
    const variables = (first.variables ?? {}) as Record<string, { default?: unknown }>;
    const url = first.url.replace(/\{([^}]+)\}/g, (whole, key: string) => {
      const value = variables[key]?.default;
      return typeof value === 'string' ? value : whole;
    });
    try {
      return new URL(url, location !== undefined && /^https?:/.test(location) ? location : undefined).toString();
    } catch {
      throw new PunkError(
        'OpenApiInvalid',
        `server ${server}: the OpenAPI document's servers[0].url ${url} is not an absolute URL: set spec.openapi.baseUrl`,
        { server },
      );
    }
  }
  throw new PunkError('OpenApiInvalid', `server ${server}: the OpenAPI document lists no servers: set spec.openapi.baseUrl`, { server });
}
