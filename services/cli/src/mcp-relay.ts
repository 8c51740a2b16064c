/**
 * `punk mcp --relay`: one stdio MCP server that serves Punk's platform tools (mcp-tools.ts) and every tool,
 * resource, resource template, prompt and completion of the deployment's aggregated `/mcp` beside them, so a client
 * that only launches subprocesses reaches the whole governed catalog (docs/punk-mcp.md "--relay").
 *
 * Per stdio connection it holds two SDK v2 `Client`s: one on an in-memory pair to the platform server, one over
 * Streamable HTTP to `${PUNK_GATEWAY_URL}/mcp` with the same API key, in the era the stdio client opened with (a
 * 2025 `initialize` → the 2025 handshake to the deployment; 2026-07-28 → pinned to 2026-07-28). Passed through:
 * a request's progress (the deployment's `notifications/progress` go out under the stdio client's own token), its
 * cancellation (the client's `notifications/cancelled`, or a closed request in 2026-07-28, aborts the relayed
 * request, which the SDK cancels at the deployment), the deployment's `list_changed` notifications (re-announced to
 * the stdio client), and its JSON-RPC errors (code, message and data unchanged).
 *
 * Names: Punk's own tools are `punk_<verb>` and never contain `__`; every tool and prompt of the deployment is
 * `<server>__<name>` (services/lib/src/naming.ts), so they cannot collide. Should the deployment ever list one of
 * Punk's names, Punk's own tool is served and the deployment's is left out, with one line on standard error.
 */
import { Client, InMemoryTransport, SdkError, SdkErrorCode, type ClientOptions } from '@modelcontextprotocol/client';
import {
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type CallToolResult,
  type ServerCapabilities,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { PLATFORM_TOOLS, platformServer } from './mcp-tools.js';
import { PunkApiError, mcpErrorOf, type PunkApi } from './punk-api.js';

/** How long a relayed answer waits after the last progress notification written before it, in milliseconds (see `passThrough`). */
const PROGRESS_SETTLE_MS = 25;

/**
 * Longest a relayed request may wait for its answer, in milliseconds, restarted by each progress notification (an
 * approval wait reports progress). The stdio client's own timeout and cancellation usually end it sooner.
 */
const RELAYED_REQUEST_TIMEOUT_MS = 60 * 60_000;

const PLATFORM_NAMES: ReadonlySet<string> = new Set(PLATFORM_TOOLS);

/** Where the relay writes what is not protocol (standard error in `punk mcp`). */
export type RelayLog = (line: string) => void;

/**
 * The server of one stdio connection in `era`: Punk's platform tools over `api`, and the deployment's `/mcp`
 * relayed beside them. When the deployment cannot be reached or refuses the key, it says so on `log` and serves
 * the platform tools (their own answers then name the failure), connecting again at each later `tools/list` or
 * relayed call; resources and prompts are offered only when the deployment answered as the session began.
 */
export async function relayServer(api: PunkApi, version: string, era: 'legacy' | 'modern', log: RelayLog): Promise<Server> {
  // The deployment's list changes are announced on the stdio server, once it exists (it is built from what the
  // deployment offers).
  const downstream: { server?: Server } = {};
  const reannounce = (send: (server: Server) => Promise<void>) => ({
    autoRefresh: false,
    debounceMs: 0,
    onChanged: () => void (downstream.server ? send(downstream.server) : Promise.resolve()).catch(() => undefined),
  });
  const listChanged: ClientOptions['listChanged'] = {
    tools: reannounce((server) => server.sendToolListChanged()),
    prompts: reannounce((server) => server.sendPromptListChanged()),
    resources: reannounce((server) => server.sendResourceListChanged()),
  };
  let deployment: Client | undefined;
  let connecting: Promise<Client> | undefined;
  /** The deployment's client, connected now if it was not (the deployment may have been down when the session began). */
  const connect = (): Promise<Client> => {
    if (deployment) return Promise.resolve(deployment);
    connecting ??= api
      .connectMcp(era, { listChanged })
      .then((client) => {
        deployment = client;
        log(`punk mcp --relay: relaying ${api.target.baseUrl}/mcp (protocol ${client.getNegotiatedProtocolVersion() ?? '?'})`);
        return client;
      })
      .finally(() => (connecting = undefined));
    return connecting;
  };
  await connect().catch((error: unknown) => {
    if (!(error instanceof PunkApiError)) throw error;
    log(
      `punk mcp --relay: not relaying ${api.target.baseUrl}/mcp yet (${error.message}); serving the platform tools, trying again at each tools/list`,
    );
  });

  const platform = new Client({ name: 'punk-relay', version });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const own = platformServer(api, version);
  await own.connect(serverSide);
  await platform.connect(clientSide);

  const upstream = deployment?.getServerCapabilities() ?? {};
  const capabilities: ServerCapabilities = {
    tools: { listChanged: true },
    ...(upstream.resources && { resources: { listChanged: true } }),
    ...(upstream.prompts && { prompts: { listChanged: true } }),
    ...(upstream.completions && { completions: {} }),
  };
  const instructions = [platform.getInstructions(), deployment?.getInstructions()].filter(Boolean).join('\n\n');
  const server = new Server({ name: 'punk', version }, { capabilities, ...(instructions && { instructions }) });
  downstream.server = server;
  server.onclose = () => {
    void deployment?.close().catch(() => undefined);
    void platform.close().catch(() => undefined);
    void own.close().catch(() => undefined);
  };

  /**
   * After a transport failure (the deployment went away, or restarted and no longer knows the session), drops the
   * deployment's client so that the next request connects again; a cancelled or timed-out request keeps it.
   */
  const forget = (error: unknown, signal?: AbortSignal) => {
    if (signal?.aborted || !deployment || (error instanceof SdkError && error.code === SdkErrorCode.RequestTimeout)) return;
    const gone = deployment;
    deployment = undefined;
    log(
      `punk mcp --relay: lost ${api.target.baseUrl}/mcp (${error instanceof Error ? error.message : String(error)}); connecting again at the next request`,
    );
    void gone.close().catch(() => undefined);
  };
  /**
   * Request options relaying `ctx`'s cancellation and progress, and `sent()`: settles once every progress
   * notification relayed so far is written, so that the answer goes out after them, as the deployment sent them.
   */
  const passThrough = (ctx: ServerContext) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    let sent = Promise.resolve();
    let progressed = false;
    const options = {
      signal: ctx.mcpReq.signal,
      timeout: RELAYED_REQUEST_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      ...(progressToken !== undefined && {
        onprogress: (progress: { progress: number; total?: number; message?: string }) => {
          progressed = true;
          sent = sent
            .then(() => ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, ...progress } }))
            .catch(() => undefined);
        },
      }),
    };
    // The SDK's clients hand a notification to its handler a microtask later but settle a response at once: a
    // response read in the same chunk as the progress before it ends the request first, and that progress is
    // dropped as "for an unknown token". After relayed progress the answer waits a moment, so it is read apart.
    const settled = async () => {
      await sent;
      if (progressed) await new Promise((resolve) => setTimeout(resolve, PROGRESS_SETTLE_MS));
    };
    return { options, sent: settled };
  };
  type RelayOptions = ReturnType<typeof passThrough>['options'];
  /**
   * Runs a relayed request for `ctx`. The deployment's JSON-RPC errors pass through; when it did not answer (down,
   * key refused, connection lost: then dropped, {@link forget}) the answer is `unanswered(message)`, by default a
   * -32603 error naming the deployment.
   */
  const relay = async <T>(
    ctx: ServerContext,
    work: (deployment: Client, options: RelayOptions) => Promise<T>,
    unanswered: (message: string) => T = (message) => {
      throw new ProtocolError(ProtocolErrorCode.InternalError, message);
    },
  ): Promise<T> => {
    const pass = passThrough(ctx);
    try {
      const result = await work(await connect(), pass.options);
      await pass.sent();
      return result;
    } catch (error) {
      if (error instanceof ProtocolError) throw error;
      forget(error, ctx.mcpReq.signal);
      return unanswered(mcpErrorOf(error, api.target.baseUrl).message);
    }
  };

  let warned = false;
  server.setRequestHandler('tools/list', async (_request, ctx) => {
    const own = (await platform.listTools()).tools;
    // Without the deployment the platform tools are still served; each list tries to reach it again.
    let theirs: typeof own = [];
    try {
      theirs = (await (await connect()).listTools()).tools;
    } catch (error) {
      if (error instanceof ProtocolError) throw error;
      forget(error, ctx.mcpReq.signal);
    }
    const clashing = theirs.filter((t) => PLATFORM_NAMES.has(t.name));
    if (clashing.length > 0 && !warned) {
      warned = true;
      log(`punk mcp --relay: the deployment lists ${clashing.map((t) => t.name).join(', ')}, which Punk's own tools use; serving Punk's`);
    }
    return { tools: [...own, ...theirs.filter((t) => !PLATFORM_NAMES.has(t.name))] };
  });
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const { name, arguments: args } = request.params;
    const params = { name, ...(args && { arguments: args }) };
    if (PLATFORM_NAMES.has(name)) return platform.callTool(params, { signal: ctx.mcpReq.signal });
    // A deployment that did not answer (down, key refused) is a tool error the model can read, not a crash.
    return relay<CallToolResult>(
      ctx,
      (d, options) => d.callTool(params, options),
      (message) => ({ content: [{ type: 'text', text: message }], isError: true }),
    );
  });
  if (capabilities.resources) {
    server.setRequestHandler('resources/list', (_request, ctx) => relay(ctx, (d, options) => d.listResources(undefined, options)));
    server.setRequestHandler('resources/templates/list', (_request, ctx) =>
      relay(ctx, (d, options) => d.listResourceTemplates(undefined, options)),
    );
    server.setRequestHandler('resources/read', (request, ctx) =>
      relay(ctx, (d, options) => d.readResource({ uri: request.params.uri }, options)),
    );
  }
  if (capabilities.prompts) {
    server.setRequestHandler('prompts/list', (_request, ctx) => relay(ctx, (d, options) => d.listPrompts(undefined, options)));
    server.setRequestHandler('prompts/get', (request, ctx) =>
      relay(ctx, (d, options) =>
        d.getPrompt({ name: request.params.name, ...(request.params.arguments && { arguments: request.params.arguments }) }, options),
      ),
    );
  }
  if (capabilities.completions) {
    server.setRequestHandler('completion/complete', (request, ctx) =>
      relay(ctx, (d, options) =>
        d.complete(
          {
            ref: request.params.ref,
            argument: request.params.argument,
            ...(request.params.context && { context: request.params.context }),
          },
          options,
        ),
      ),
    );
  }
  return server;
}
