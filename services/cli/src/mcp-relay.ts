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
 * What the deployment asks of the client passes through as well, in the era of both sides: in 2025-11-25 its
 * `elicitation/create` (form and URL mode), `sampling/createMessage` and `roots/list` requests go to the stdio client
 * as the relay's own requests (the relay declares to the deployment what the client declared in `initialize`, seen by
 * stdio-watch.ts), the client's `notifications/roots/list_changed` goes back; in 2026-07-28 an `input_required`
 * result goes to the client unchanged and its retry's `inputResponses` and `requestState` to the deployment, with the
 * client capabilities and log level of each request's envelope (MCP 2026-07-28 basic/patterns/mrtr). Resource
 * subscriptions (`resources/subscribe`, or the `resourceSubscriptions` of a 2026-07-28 `subscriptions/listen`) are
 * made at the deployment and its `notifications/resources/updated` relayed; `logging/setLevel` is passed on and its
 * `notifications/message` relayed. A session made again (the deployment was down, or lost) gets the level and the
 * 2025-era subscriptions back.
 *
 * Names: Punk's own tools are `punk_<verb>` and never contain `__`; every tool and prompt of the deployment is
 * `<server>__<name>` (services/lib/src/naming.ts), so they cannot collide. Should the deployment ever list one of
 * Punk's names, Punk's own tool is served and the deployment's is left out, with one line on standard error.
 */
import {
  Client,
  InMemoryTransport,
  SdkError,
  SdkErrorCode,
  type ClientCapabilities,
  type ClientOptions,
  type McpSubscription,
} from '@modelcontextprotocol/client';
import {
  CLIENT_CAPABILITIES_META_KEY,
  LOG_LEVEL_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type CallToolResult,
  type CompleteResult,
  type LoggingLevel,
  type Notification,
  type ServerCapabilities,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { errorMessage } from '@punk/lib';
import { PLATFORM_TOOLS, platformServer } from './mcp-tools.js';
import { PunkApiError, mcpErrorOf, type PunkApi } from './punk-api.js';
import type { StdioWatch } from './stdio-watch.js';

/** How long a relayed answer waits after the last progress notification written before it, in milliseconds (see `passThrough`). */
const PROGRESS_SETTLE_MS = 25;

/**
 * Longest a relayed request may wait for its answer, in milliseconds, restarted by each progress notification (an
 * approval wait reports progress). The stdio client's own timeout and cancellation usually end it sooner.
 */
const RELAYED_REQUEST_TIMEOUT_MS = 60 * 60_000;

const PLATFORM_NAMES: ReadonlySet<string> = new Set(PLATFORM_TOOLS);

/** How long after the deployment ended a listen stream the relay opens it again, in milliseconds (doubled after each failure, up to 30 s). */
const LISTEN_AGAIN_MS = 1_000;

/**
 * What the relay declares to the stdio client, whatever the deployment answered as the session began: Punk's `/mcp`
 * may serve each of them (its capabilities are the union of its servers', docs/endpoint.md). A request the
 * deployment does not serve gets what it has (an empty list, no completion values) or an error naming what it lacks.
 */
const RELAY_CAPABILITIES: ServerCapabilities = {
  tools: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  prompts: { listChanged: true },
  completions: {},
  logging: {},
};

/** The 2026-07-28 envelope keys of a request the relay passes to the deployment: what the client can answer, and its log level. */
const ENVELOPE_KEYS = [CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY] as const;

/** Of a client's 2025-era capabilities, those the deployment asks through the relay (MCP 2025-11-25 client/roots, sampling, elicitation). */
function askable(capabilities: ClientCapabilities | undefined): ClientCapabilities {
  const { elicitation, sampling, roots } = capabilities ?? {};
  return { ...(elicitation && { elicitation }), ...(sampling && { sampling }), ...(roots && { roots }) };
}

/**
 * What of `ctx`'s request goes to the deployment beside its own params (2026-07-28): the envelope's client
 * capabilities and log level, so that the deployment asks this client only what it can answer, and a retry's
 * `inputResponses` and `requestState`, unchanged (the deployment signed the state; the relay keeps none).
 */
function clientsOwn(ctx: ServerContext): {
  _meta?: Record<string, unknown>;
  inputResponses?: Record<string, unknown>;
  requestState?: string;
} {
  const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const meta = Object.fromEntries(ENVELOPE_KEYS.filter((key) => envelope[key] !== undefined).map((key) => [key, envelope[key]]));
  const requestState = ctx.mcpReq.requestState<string>();
  return {
    ...(Object.keys(meta).length > 0 && { _meta: meta }),
    ...(ctx.mcpReq.inputResponses && { inputResponses: ctx.mcpReq.inputResponses }),
    ...(requestState !== undefined && { requestState }),
  };
}

/** Where the relay writes what is not protocol (standard error in `punk mcp`). */
export type RelayLog = (line: string) => void;

/**
 * The server of one stdio connection in `era`: Punk's platform tools over `api`, and the deployment's `/mcp`
 * relayed beside them. `watch` is the connection's stdio transport (what the client declared, what it listens to).
 * When the deployment cannot be reached or refuses the key, it says so on `log` and serves the platform tools (their
 * own answers then name the failure), connecting again at each later request that needs the deployment.
 */
export async function relayServer(
  api: PunkApi,
  version: string,
  era: 'legacy' | 'modern',
  log: RelayLog,
  watch: StdioWatch,
): Promise<Server> {
  // The deployment's list changes and messages go to the stdio server, once it exists (it is built from what the
  // deployment answered first).
  const downstream: { server?: Server } = {};
  // 2025: what the deployment may ask, as the client declared it at initialize (a stdio connection's client is one).
  const asks = era === 'legacy' ? askable(watch.clientCapabilities) : undefined;
  const reannounce = (send: (server: Server) => Promise<void>) => ({
    autoRefresh: false,
    debounceMs: 0,
    onChanged: () => void (downstream.server ? send(downstream.server) : Promise.resolve()).catch(() => undefined),
  });
  const clientOptions: ClientOptions = {
    listChanged: {
      tools: reannounce((server) => server.sendToolListChanged()),
      prompts: reannounce((server) => server.sendPromptListChanged()),
      resources: reannounce((server) => server.sendResourceListChanged()),
    },
    // 2025: the deployment may ask what the client declared. 2026-07-28: each request carries the client's own
    // capabilities, and an input_required result goes back to the client instead of being answered here.
    ...(asks ? { capabilities: asks } : { inputRequired: { autoFulfill: false } }),
  };
  /** The stdio server a request of the deployment goes to (as the relay's own), and its options: aborted with the deployment's. */
  const ask = (ctx: { mcpReq: { signal: AbortSignal } }) => {
    if (!downstream.server) throw new ProtocolError(ProtocolErrorCode.InternalError, 'punk mcp --relay: no client connected yet');
    return { server: downstream.server, options: { signal: ctx.mcpReq.signal, timeout: RELAYED_REQUEST_TIMEOUT_MS } };
  };
  const tell = (notification: Notification) => void downstream.server?.notification(notification).catch(() => undefined);
  /** The deployment's client's handlers: its requests to the client (2025) and the notifications the client is told. */
  const setUp = (client: Client) => {
    if (asks?.elicitation)
      client.setRequestHandler('elicitation/create', (request, ctx) => {
        const { server, options } = ask(ctx);
        return server.request({ method: 'elicitation/create', params: request.params }, options);
      });
    if (asks?.sampling)
      client.setRequestHandler('sampling/createMessage', (request, ctx) => {
        const { server, options } = ask(ctx);
        return server.request({ method: 'sampling/createMessage', params: request.params }, options);
      });
    if (asks?.roots)
      client.setRequestHandler('roots/list', (request, ctx) => {
        const { server, options } = ask(ctx);
        return server.request({ method: 'roots/list', ...(request.params && { params: request.params }) }, options);
      });
    client.setNotificationHandler('notifications/resources/updated', tell);
    client.setNotificationHandler('notifications/message', tell);
    if (asks?.elicitation) client.setNotificationHandler('notifications/elicitation/complete', tell);
  };

  /** The client's `logging/setLevel` and 2025-era subscriptions, made again on a new session to the deployment. */
  let level: LoggingLevel | undefined;
  const subscribed = new Set<string>();
  let deployment: Client | undefined;
  let connecting: Promise<Client> | undefined;
  /** The deployment's client, connected now if it was not (the deployment may have been down when the session began). */
  const connect = (): Promise<Client> => {
    if (deployment) return Promise.resolve(deployment);
    connecting ??= api
      .connectMcp(era, clientOptions, setUp)
      .then(async (client) => {
        await restore(client);
        deployment = client;
        log(`punk mcp --relay: relaying ${api.target.baseUrl}/mcp (protocol ${client.getNegotiatedProtocolVersion() ?? '?'})`);
        return client;
      })
      .finally(() => (connecting = undefined));
    return connecting;
  };
  /** Gives a new session the client's log level and subscriptions; one the deployment refuses is said on `log`. */
  const restore = async (client: Client) => {
    const offers = client.getServerCapabilities() ?? {};
    const again = [
      ...(level && offers.logging ? [{ what: `logging/setLevel ${level}`, run: () => client.setLoggingLevel(level!) }] : []),
      ...[...subscribed].map((uri) => ({ what: `resources/subscribe ${uri}`, run: () => client.subscribeResource({ uri }) })),
    ];
    for (const { what, run } of again)
      await run().catch((error: unknown) =>
        log(`punk mcp --relay: ${what} not made again at ${api.target.baseUrl}/mcp (${errorMessage(error)})`),
      );
  };
  await connect().catch((error: unknown) => {
    if (!(error instanceof PunkApiError)) throw error;
    log(
      `punk mcp --relay: not relaying ${api.target.baseUrl}/mcp yet (${error.message}); serving the platform tools, trying again at each request`,
    );
  });

  const platform = new Client({ name: 'punk-relay', version });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const own = platformServer(api, version);
  await own.connect(serverSide);
  await platform.connect(clientSide);

  const instructions = [platform.getInstructions(), deployment?.getInstructions()].filter(Boolean).join('\n\n');
  const server = new Server({ name: 'punk', version }, { capabilities: RELAY_CAPABILITIES, ...(instructions && { instructions }) });
  downstream.server = server;
  /** The deployment's listen streams of the client's 2026-07-28 `subscriptions/listen` streams, by their request id. */
  const listening = new Map<string | number, Promise<McpSubscription | undefined>>();
  /**
   * Opens the deployment's listen stream for the client's listen `id`, for as long as the client's is open: one the
   * deployment ends (it restarted, the connection broke) is opened again a second later, one it cannot open now is
   * tried again after 1 s, doubling up to 30 s (said on `log` the first time).
   */
  const listen = (id: string | number, uris: string[], failures = 0) => {
    const again = (nextFailures: number) =>
      setTimeout(
        () => listening.get(id) === opening && listen(id, uris, nextFailures),
        Math.min(LISTEN_AGAIN_MS * 2 ** nextFailures, 30_000),
      ).unref();
    const opening: Promise<McpSubscription | undefined> = connect()
      .then((d) => d.listen({ resourceSubscriptions: uris }))
      .then((subscription) => {
        void subscription.closed.then((how) => {
          if (how === 'local' || listening.get(id) !== opening) return;
          log(`punk mcp --relay: the deployment ended the listen stream for ${uris.join(', ')} (${how}); listening again`);
          again(0);
        });
        return subscription;
      })
      .catch((error: unknown) => {
        if (failures === 0)
          log(`punk mcp --relay: updates of ${uris.join(', ')} are not relayed yet (${errorMessage(error)}); trying again`);
        again(failures + 1);
        return undefined;
      });
    listening.set(id, opening);
  };
  if (era === 'modern')
    watch.watchListens({
      opened: listen,
      closed: (id) => {
        void listening.get(id)?.then((subscription) => subscription?.close());
        listening.delete(id);
      },
    });
  server.onclose = () => {
    for (const subscription of listening.values()) void subscription.then((s) => s?.close()).catch(() => undefined);
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
    log(`punk mcp --relay: lost ${api.target.baseUrl}/mcp (${errorMessage(error)}); connecting again at the next request`);
    void gone.close().catch(() => undefined);
  };
  /**
   * Request options relaying `ctx`'s cancellation and progress, and `sent()`: settles once every progress
   * notification relayed so far is written, so that the answer goes out after them, as the deployment sent them.
   * An `input_required` result of the deployment (2026-07-28) is an answer like any other: it goes to the client.
   */
  const passThrough = (ctx: ServerContext) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    let sent = Promise.resolve();
    let progressed = false;
    const options = {
      signal: ctx.mcpReq.signal,
      timeout: RELAYED_REQUEST_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      allowInputRequired: true,
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
  /** @throws ProtocolError -32601 naming what the deployment's session does not offer (no server of it did as it began). */
  const offered = (has: unknown, what: string) => {
    if (!has)
      throw new ProtocolError(
        ProtocolErrorCode.MethodNotFound,
        `${api.target.baseUrl}/mcp offers no ${what}: none of the deployment's servers did when the relay's session to it began`,
      );
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
      (d, options) => d.callTool({ ...params, ...clientsOwn(ctx) }, options),
      (message) => ({ content: [{ type: 'text', text: message }], isError: true }),
    );
  });
  // Lists of what the deployment's session does not offer are empty (the SDK's client answers them so).
  server.setRequestHandler('resources/list', (_request, ctx) => relay(ctx, (d, options) => d.listResources(undefined, options)));
  server.setRequestHandler('resources/templates/list', (_request, ctx) =>
    relay(ctx, (d, options) => d.listResourceTemplates(undefined, options)),
  );
  server.setRequestHandler('resources/read', (request, ctx) =>
    relay(ctx, (d, options) => {
      offered(d.getServerCapabilities()?.resources, 'resources');
      return d.readResource({ uri: request.params.uri, ...clientsOwn(ctx) }, options);
    }),
  );
  server.setRequestHandler('resources/subscribe', (request, ctx) =>
    relay(ctx, async (d, options) => {
      offered(d.getServerCapabilities()?.resources?.subscribe, 'resource subscriptions');
      await d.subscribeResource({ uri: request.params.uri }, options);
      subscribed.add(request.params.uri);
      return {};
    }),
  );
  server.setRequestHandler('resources/unsubscribe', (request, ctx) => {
    // Forgotten here at once: a session made again is not subscribed to it, whether or not this one answers.
    subscribed.delete(request.params.uri);
    return relay(
      ctx,
      (d, options) => d.unsubscribeResource({ uri: request.params.uri }, options),
      () => ({}),
    );
  });
  server.setRequestHandler('prompts/list', (_request, ctx) => relay(ctx, (d, options) => d.listPrompts(undefined, options)));
  server.setRequestHandler('prompts/get', (request, ctx) =>
    relay(ctx, (d, options) => {
      offered(d.getServerCapabilities()?.prompts, 'prompts');
      const { name, arguments: args } = request.params;
      return d.getPrompt({ name, ...(args && { arguments: args }), ...clientsOwn(ctx) }, options);
    }),
  );
  server.setRequestHandler('completion/complete', (request, ctx) =>
    relay<CompleteResult>(ctx, (d, options) => {
      // A deployment without completions has none to give (MCP 2025-11-25 server/utilities/completion).
      if (!d.getServerCapabilities()?.completions) return Promise.resolve({ completion: { values: [], hasMore: false } });
      const { ref, argument, context } = request.params;
      return d.complete({ ref, argument, ...(context && { context }) }, options);
    }),
  );
  server.setRequestHandler('logging/setLevel', (request, ctx) => {
    // Kept for a session made again; a deployment down now gets it then.
    level = request.params.level;
    return relay(
      ctx,
      async (d, options) => {
        if (d.getServerCapabilities()?.logging) await d.setLoggingLevel(request.params.level, options);
        return {};
      },
      () => ({}),
    );
  });
  server.setNotificationHandler('notifications/roots/list_changed', () => void deployment?.sendRootsListChanged().catch(() => undefined));
  return server;
}
