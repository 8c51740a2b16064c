/**
 * The upstream MCP server the official conformance suite
 * (`@modelcontextprotocol/conformance`) calls for: every fixture tool,
 * resource, prompt and completion its active server scenarios name
 * (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`,
 * the 2026-07-28 `test_input_required_result_*` tools, ...), written once
 * with the MCP SDK v2 and served in both protocol eras:
 *
 * - over Streamable HTTP (`--port <n>`, path `/mcp`): 2025-era requests
 *   (`initialize` and the session they open) go to a sessionful
 *   `NodeStreamableHTTPServerTransport` (server-to-client requests, GET
 *   stream, `resources/subscribe`, `logging/setLevel`, resumable SSE), every
 *   2026-07-28 request to a strict `createMcpHandler` (stateless, MRTR,
 *   `subscriptions/listen`). Host and Origin must name the loopback
 *   (DNS-rebinding protection, as the suite requires of a localhost server).
 * - over stdio (`--stdio`): `serveStdio`, which pins each connection's era
 *   from its opening message.
 *
 * Handlers that need client input return `inputRequired(...)`; on a 2025-era
 * connection the SDK's legacy shim turns that into real `elicitation/create`,
 * `sampling/createMessage` and `roots/list` requests.
 *
 * Run: `node e2e/dist/conformance/fixture-server.js --port 4200` (prints
 * `conformance fixture listening on http://127.0.0.1:4200/mcp`), or `--stdio`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { pathToFileURL } from 'node:url';
import { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import {
  CLIENT_CAPABILITIES_META_KEY,
  McpServer,
  ResourceTemplate,
  acceptedContent,
  completable,
  createMcpHandler,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired,
  inputResponse,
  isInitializeRequest,
  isLegacyRequest,
  type CallToolResult,
  type EventStore,
  type InputRequiredResult,
  type McpHttpHandler,
  type ServerContext,
} from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { z } from 'zod';

/** A 1x1 red PNG, base64. */
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
/** A WAV header with no samples (44 bytes), base64. */
const WAV = Buffer.from('524946462400000057415645666d7420100000000100010044ac000088580100020010006461746100000000', 'hex').toString(
  'base64',
);

/** The JSON Schema 2020-12 input schema the `json-schema-2020-12` scenario expects verbatim in `tools/list`. */
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The answer of `test_sampling`: the sampled content, text blocks as they are and others by type. */
const sampledText = (content: { type: string; text?: string } | { type: string; text?: string }[]): CallToolResult => {
  const reply = Array.isArray(content) ? content : [content];
  return text(`LLM response: ${reply.map((c) => (c.type === 'text' ? String(c.text) : `[${c.type}]`)).join(' ')}`);
};
/** The elicitation schema asking for a `name`. */
const nameSchema = () => ({ type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] });

/** Signs the `requestState` of the multi-round tools, so tampered state is refused (-32602) before a handler runs. */
const stateCodec = createRequestStateCodec<{ round: number; name?: string }>({ key: randomBytes(32), ttlSeconds: 600 });

/** Servers of live 2025-era connections (HTTP sessions, stdio), told of list changes with `notifications/<list>/list_changed`. */
const connected = new Set<McpServer>();
/** Announces a list change to every 2025-era connection; the HTTP entry adds its 2026-07-28 `subscriptions/listen` streams. */
const announceToConnections = (list: 'tools' | 'prompts') => {
  for (const server of connected) {
    if (list === 'tools') server.sendToolListChanged();
    else server.sendPromptListChanged();
  }
};
/** Called by `test_trigger_tool_change` / `test_trigger_prompt_change`: announces a list change to every client. */
let announceChange: (list: 'tools' | 'prompts') => void = announceToConnections;

/** A fixture server for a 2025-era connection, known to {@link announceChange} until it closes. */
export function connectedFixtureServer(options: FixtureOptions = {}): McpServer {
  const server = buildFixtureServer(options);
  connected.add(server);
  server.server.onclose = () => void connected.delete(server);
  return server;
}

/** Client capabilities of the request: the 2026-07-28 `_meta` envelope, else those of the 2025 `initialize`. */
function clientCapabilities(server: McpServer, ctx: ServerContext): Record<string, unknown> {
  const declared = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY];
  return (
    (declared as Record<string, unknown> | undefined) ??
    (server.server.getClientCapabilities() as Record<string, unknown> | undefined) ??
    {}
  );
}

/** How the 2025-era client-input tools (`test_sampling`, `test_elicitation*`) ask their client. */
export interface FixtureOptions {
  /**
   * `input-required` (default): they return `inputRequired(...)`, which the SDK's legacy shim turns into real requests on
   * a 2025-era connection. `push`: they send the request themselves (`ctx.mcpReq.requestSampling`, `elicitInput`), the
   * usual way of a 2025-era server, which the SDK refuses on a 2026-07-28 request.
   */
  serverRequests?: 'input-required' | 'push';
  /** Announces a list change for `test_trigger_tool_change` / `test_trigger_prompt_change`; default the fixture's own. */
  announce?: (list: 'tools' | 'prompts') => void;
}

/** The server of one connection (2025 era) or one request (2026-07-28). */
export function buildFixtureServer(options: FixtureOptions = {}): McpServer {
  const push = options.serverRequests === 'push';
  const announce =
    options.announce ??
    ((list: 'tools' | 'prompts') => {
      announceChange(list);
    });
  const server = new McpServer(
    { name: 'punk-conformance-fixture', version: '1.0.0' },
    {
      capabilities: {
        tools: { listChanged: true },
        prompts: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        logging: {},
        completions: {},
      },
      requestState: { verify: stateCodec.verify },
      cacheHints: {
        'tools/list': { ttlMs: 60_000, cacheScope: 'public' },
        'prompts/list': { ttlMs: 60_000, cacheScope: 'public' },
        'resources/list': { ttlMs: 60_000, cacheScope: 'public' },
        'resources/templates/list': { ttlMs: 60_000, cacheScope: 'public' },
        'resources/read': { ttlMs: 60_000, cacheScope: 'public' },
        'server/discover': { ttlMs: 60_000, cacheScope: 'public' },
      },
    },
  );
  const tool = (
    name: string,
    description: string,
    handler: (args: Record<string, unknown>, ctx: ServerContext) => Promise<CallToolResult | InputRequiredResult>,
    inputSchema: object = { type: 'object', properties: {} },
  ) => server.registerTool(name, { description, inputSchema: fromJsonSchema(inputSchema as never) }, handler as never);

  // Content types (tools-call-*).
  tool('test_simple_text', 'Returns one text block', async () => text('This is a simple text response for testing.'));
  tool('test_image_content', 'Returns one PNG image', async () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
  tool('test_audio_content', 'Returns one WAV clip', async () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
  tool('test_embedded_resource', 'Returns an embedded text resource', async () => ({
    content: [
      {
        type: 'resource',
        resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' },
      },
    ],
  }));
  tool('test_multiple_content_types', 'Returns text, an image and a resource', async () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      {
        type: 'resource',
        resource: {
          uri: 'test://mixed-content-resource',
          mimeType: 'application/json',
          text: JSON.stringify({ test: 'data', value: 123 }),
        },
      },
    ],
  }));
  tool('test_error_handling', 'Always fails', async () => ({
    isError: true,
    content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }],
  }));
  // SEP-2243: a parameter mirrored into an `Mcp-Param-Region` header, which the server checks against the body.
  tool(
    'test_custom_header',
    'Echoes a region that also travels in the Mcp-Param-Region header',
    async (args) => text(`region=${String(args.region)}`),
    {
      type: 'object',
      properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
      required: ['region'],
    },
  );
  tool('json_schema_2020_12_tool', 'Tool with JSON Schema 2020-12 features', async () => text('ok'), JSON_SCHEMA_2020_12);

  // Notifications during a call (tools-call-with-logging, -with-progress; server-stateless).
  tool('test_tool_with_logging', 'Logs three info messages while it runs', async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'Tool execution started');
    await sleep(50);
    await ctx.mcpReq.log('info', 'Tool processing data');
    await sleep(50);
    await ctx.mcpReq.log('info', 'Tool execution completed');
    return text('Logging tool completed');
  });
  tool('test_logging_tool', 'Logs one info message (only when the request asked for logs)', async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'Diagnostic trace logging activated');
    return text('Logging evaluated');
  });
  tool('test_tool_with_progress', 'Reports progress 0, 50 and 100 of 100', async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (progressToken !== undefined)
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken, progress, total: 100, message: `${progress}%` },
        });
      if (progress < 100) await sleep(50);
    }
    return text('Progress tool completed');
  });
  tool('test_reconnection', 'Closes its SSE stream mid-call (the client resumes with Last-Event-ID)', async (_args, ctx) => {
    await sleep(50);
    ctx.http?.closeSSE?.();
    await sleep(200);
    return text('Reconnection test completed');
  });

  // Client input (2025: elicitation/sampling requests through the SDK's legacy shim; 2026-07-28: input_required).
  tool(
    'test_sampling',
    'Asks the client to sample a message for `prompt`',
    async (args, ctx) => {
      const message = { role: 'user' as const, content: { type: 'text' as const, text: String(args.prompt) } };

      if (push) return sampledText((await ctx.mcpReq.requestSampling({ messages: [message], maxTokens: 100 })).content);
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'sample');
      if (answer.kind !== 'sampling') {
        return inputRequired({
          inputRequests: {
            sample: inputRequired.createMessage({
              messages: [message],
              maxTokens: 100,
            }),
          },
        });
      }
      return sampledText(answer.result.content);
    },
    { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
  );
  const elicitTool = (
    name: string,
    description: string,
    message: (args: Record<string, unknown>) => string,
    requestedSchema: object,
    reply: (action: string, content: unknown) => string,
    inputSchema?: object,
  ) =>
    tool(
      name,
      description,
      async (args, ctx) => {
        if (push) {
          const elicited = await ctx.mcpReq.elicitInput({ message: message(args), requestedSchema: requestedSchema as never });
          return text(reply(elicited.action, elicited.content ?? {}));
        }
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'response');
        if (answer.kind !== 'elicit')
          return inputRequired({
            inputRequests: { response: inputRequired.elicit({ message: message(args), requestedSchema: requestedSchema as never }) },
          });
        return text(reply(answer.action, answer.content ?? {}));
      },
      inputSchema,
    );
  elicitTool(
    'test_elicitation',
    'Asks the user for a username and email',
    (args) => String(args.message),
    {
      type: 'object',
      properties: {
        username: { type: 'string', description: "User's response" },
        email: { type: 'string', description: "User's email address" },
      },
      required: ['username', 'email'],
    },
    (action, content) => `User response: action=${action}, content=${JSON.stringify(content)}`,
    { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  );
  elicitTool(
    'test_elicitation_sep1034_defaults',
    'Elicitation with a default for every primitive type (SEP-1034)',
    () => 'Please review and update the form fields with defaults',
    {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'User name', default: 'John Doe' },
        age: { type: 'integer', description: 'User age', default: 30 },
        score: { type: 'number', description: 'User score', default: 95.5 },
        status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
        verified: { type: 'boolean', description: 'Verification status', default: true },
      },
      required: [],
    },
    (action, content) => `Elicitation completed: action=${action}, content=${JSON.stringify(content)}`,
  );
  elicitTool(
    'test_elicitation_sep1330_enums',
    'Elicitation with the five enum shapes (SEP-1330)',
    () => 'Please select options from the enum fields',
    {
      type: 'object',
      properties: {
        untitledSingle: { type: 'string', description: 'Untitled single-select', enum: ['option1', 'option2', 'option3'] },
        titledSingle: {
          type: 'string',
          description: 'Titled single-select',
          oneOf: [
            { const: 'value1', title: 'First Option' },
            { const: 'value2', title: 'Second Option' },
            { const: 'value3', title: 'Third Option' },
          ],
        },
        legacyEnum: {
          type: 'string',
          description: 'Legacy titled enum',
          enum: ['opt1', 'opt2', 'opt3'],
          enumNames: ['Option One', 'Option Two', 'Option Three'],
        },
        untitledMulti: {
          type: 'array',
          description: 'Untitled multi-select',
          items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
        },
        titledMulti: {
          type: 'array',
          description: 'Titled multi-select',
          items: {
            anyOf: [
              { const: 'value1', title: 'First Choice' },
              { const: 'value2', title: 'Second Choice' },
              { const: 'value3', title: 'Third Choice' },
            ],
          },
        },
      },
      required: [],
    },
    (action, content) => `Elicitation completed: action=${action}, content=${JSON.stringify(content)}`,
  );

  // Multi-round-trip requests (input-required-result-*, SEP-2322).
  tool('test_input_required_result_elicitation', 'Asks for a name, then greets', async (_args, ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name', z.object({ name: z.string() }));
    if (!answer)
      return inputRequired({
        inputRequests: { user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema() }) },
      });
    return text(`Hello, ${answer.name}!`);
  });
  tool('test_input_required_result_sampling', 'Asks the client to sample an answer', async (_args, ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
    if (answer.kind !== 'sampling') {
      return inputRequired({
        inputRequests: {
          capital_question: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
            maxTokens: 100,
          }),
        },
      });
    }
    const content = answer.result.content;
    return text(`Sampling answered: ${JSON.stringify(content)}`);
  });
  tool('test_input_required_result_list_roots', 'Asks the client for its roots', async (_args, ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    if (answer.kind !== 'roots') return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    return text(`Roots: ${answer.roots.map((r) => r.uri).join(', ') || '(none)'}`);
  });
  tool('test_input_required_result_request_state', 'Confirms, carrying signed state', async (_args, ctx) => {
    const state = ctx.mcpReq.requestState<{ round: number }>();
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'confirm');
    if (!state || !answer) {
      return inputRequired({
        inputRequests: {
          confirm: inputRequired.elicit({
            message: 'Please confirm',
            requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
          }),
        },
        requestState: await stateCodec.mint({ round: 1 }),
      });
    }
    return text(`state-ok: confirmed=${JSON.stringify(answer)}`);
  });
  tool('test_input_required_result_multiple_inputs', 'Asks for a name, a sampled greeting and the roots at once', async (_args, ctx) => {
    const name = acceptedContent(ctx.mcpReq.inputResponses, 'user_name');
    const greeting = inputResponse(ctx.mcpReq.inputResponses, 'greeting');
    const roots = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    if (!name || greeting.kind !== 'sampling' || roots.kind !== 'roots' || !ctx.mcpReq.requestState()) {
      return inputRequired({
        inputRequests: {
          user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema() }),
          greeting: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
            maxTokens: 50,
          }),
          client_roots: inputRequired.listRoots(),
        },
        requestState: await stateCodec.mint({ round: 1 }),
      });
    }
    return text(`All inputs received: name=${JSON.stringify(name)}, roots=${roots.roots.length}`);
  });
  tool('test_input_required_result_multi_round', 'Two rounds: a name, then a colour', async (_args, ctx) => {
    const state = ctx.mcpReq.requestState<{ round: number; name?: string }>();
    if (state?.round === 2) {
      const color = acceptedContent(ctx.mcpReq.inputResponses, 'step2', z.object({ color: z.string() }));
      if (color) return text(`Done: ${state.name ?? '?'} likes ${color.color}`);
    }
    const name = state?.round === 1 ? acceptedContent(ctx.mcpReq.inputResponses, 'step1', z.object({ name: z.string() })) : undefined;
    if (name || state?.round === 2) {
      return inputRequired({
        inputRequests: {
          step2: inputRequired.elicit({
            message: 'Step 2: What is your favorite color?',
            requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
          }),
        },
        requestState: await stateCodec.mint({ round: 2, name: name?.name ?? state?.name ?? '' }),
      });
    }
    return inputRequired({
      inputRequests: { step1: inputRequired.elicit({ message: 'Step 1: What is your name?', requestedSchema: nameSchema() }) },
      requestState: await stateCodec.mint({ round: 1 }),
    });
  });
  tool('test_input_required_result_tampered_state', 'Carries signed state; refuses it tampered', async (_args, ctx) => {
    if (ctx.mcpReq.requestState() && acceptedContent(ctx.mcpReq.inputResponses, 'confirm')) return text('state verified');
    return inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({
          message: 'Please confirm',
          requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
        }),
      },
      requestState: await stateCodec.mint({ round: 1 }),
    });
  });
  tool('test_input_required_result_capabilities', 'Asks only for what the client declared', async (_args, ctx) => {
    const caps = clientCapabilities(server, ctx);
    if (ctx.mcpReq.inputResponses && Object.keys(ctx.mcpReq.inputResponses).length > 0) return text('inputs received');
    const requests: Record<string, ReturnType<typeof inputRequired.listRoots>> = {};
    if (caps.elicitation) requests.user_name = inputRequired.elicit({ message: 'What is your name?', requestedSchema: nameSchema() });
    if (caps.sampling)
      requests.greeting = inputRequired.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }],
        maxTokens: 50,
      });
    if (caps.roots) requests.client_roots = inputRequired.listRoots();
    if (Object.keys(requests).length === 0) return text('the client declared no input capability');
    return inputRequired({ inputRequests: requests });
  });
  tool('test_missing_capability', 'Needs sampling, whatever the client declared', async (_args, ctx) => {
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'sample');
    if (answer.kind === 'sampling') return text('sampled');
    return inputRequired({
      inputRequests: {
        sample: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Say hi' } }], maxTokens: 10 }),
      },
    });
  });
  tool('test_streaming_elicitation', 'Reports progress, then answers', async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    if (progressToken !== undefined)
      await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: 50, total: 100 } });
    return text('Streaming complete');
  });
  tool('test_trigger_tool_change', 'Announces a tools/list change', async () => {
    announce('tools');
    return text('Mutation triggered');
  });
  tool('test_trigger_prompt_change', 'Announces a prompts/list change', async () => {
    announce('prompts');
    return text('Mutation triggered');
  });

  // Resources.
  server.registerResource(
    'static-text',
    'test://static-text',
    { description: 'A static text resource', mimeType: 'text/plain' },
    async () => ({
      contents: [{ uri: 'test://static-text', mimeType: 'text/plain', text: 'This is the content of the static text resource.' }],
    }),
  );
  server.registerResource(
    'static-binary',
    'test://static-binary',
    { description: 'A static binary resource', mimeType: 'image/png' },
    async () => ({
      contents: [{ uri: 'test://static-binary', mimeType: 'image/png', blob: PNG }],
    }),
  );
  server.registerResource(
    'watched-resource',
    'test://watched-resource',
    { description: 'A resource clients subscribe to', mimeType: 'text/plain' },
    async () => ({
      contents: [{ uri: 'test://watched-resource', mimeType: 'text/plain', text: 'Watched resource content' }],
    }),
  );
  server.registerResource(
    'template-data',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'Data for an id', mimeType: 'application/json' },
    async (uri, { id }) => ({
      contents: [
        {
          uri: uri.href,
          mimeType: 'application/json',
          text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }),
        },
      ],
    }),
  );
  const subscriptions = new Set<string>();
  server.server.setRequestHandler('resources/subscribe', async (request) => {
    subscriptions.add(request.params.uri);
    return {};
  });
  server.server.setRequestHandler('resources/unsubscribe', async (request) => {
    subscriptions.delete(request.params.uri);
    return {};
  });

  // Prompts and completion.
  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'), (value) =>
          ['paris', 'park', 'party', 'test-value'].filter((v) => v.startsWith(value)),
        ),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    ({ arg1, arg2 }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }],
    }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    {
      description: 'A prompt embedding a resource',
      argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }),
    },
    ({ resourceUri }) => ({
      messages: [
        {
          role: 'user',
          content: {
            type: 'resource',
            resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' },
          },
        },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));
  server.registerPrompt(
    'test_input_required_result_prompt',
    { description: 'A prompt that asks for context first' },
    (ctx: ServerContext) => {
      const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_context', z.object({ context: z.string() }));
      if (!answer) {
        return inputRequired({
          inputRequests: {
            user_context: inputRequired.elicit({
              message: 'What context should the prompt use?',
              requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] },
            }),
          },
        });
      }
      return { messages: [{ role: 'user', content: { type: 'text', text: `Prompt with context: ${answer.context}` } }] };
    },
  );
  return server;
}

/** In-memory SSE event store of the 2025-era sessions (resumability with `Last-Event-ID`). */
function memoryEventStore(): EventStore {
  const events = new Map<string, { streamId: string; message: unknown }>();
  return {
    storeEvent: async (streamId, message) => {
      const eventId = `${streamId}_${Date.now()}_${randomUUID().slice(0, 8)}`;
      events.set(eventId, { streamId, message });
      return eventId;
    },
    getStreamIdForEventId: async (eventId) => events.get(eventId)?.streamId,
    replayEventsAfter: async (lastEventId, { send }) => {
      const streamId = events.get(lastEventId)?.streamId;
      if (!streamId) throw new Error(`unknown event id ${lastEventId}`);
      let after = false;
      for (const [id, event] of events) {
        if (id === lastEventId) after = true;
        else if (after && event.streamId === streamId) await send(id, event.message as never);
      }
      return streamId;
    },
  };
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);
/** True when `value` (a Host header, or an Origin's host) names the loopback, with any port. */
function isLoopbackHost(value: string | undefined): boolean {
  if (value === undefined) return false;
  const host = value.startsWith('[') ? value.slice(0, value.indexOf(']') + 1) : value.split(':')[0]!;
  return LOOPBACK.has(host.toLowerCase());
}

function jsonError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** A listening fixture: its `/mcp` URL and a way to stop it. */
export interface FixtureHttpServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves the fixture over Streamable HTTP on `127.0.0.1:<port>` (0: a free port), path `/mcp`.
 * @throws Error when the port cannot be bound.
 */
export async function startFixtureHttp(port: number): Promise<FixtureHttpServer> {
  const sessions = new Map<string, NodeStreamableHTTPServerTransport>();
  const modern: McpHttpHandler = createMcpHandler(() => buildFixtureServer(), { legacy: 'reject' });
  const modernNode = toNodeHandler(modern);
  announceChange = (list) => {
    if (list === 'tools') modern.notify.toolsChanged();
    else modern.notify.promptsChanged();
    announceToConnections(list);
  };

  const legacy = async (req: IncomingMessage, res: ServerResponse, body: unknown) => {
    const sessionId = req.headers['mcp-session-id'] as string | undefined;
    const existing = sessionId === undefined ? undefined : sessions.get(sessionId);
    if (existing) return existing.handleRequest(req, res, body);
    if (sessionId !== undefined) {
      jsonError(res, 404, -32001, 'Session not found');
      return;
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      jsonError(res, 400, -32000, 'Bad Request: Mcp-Session-Id required');
      return;
    }
    const transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: memoryEventStore(),
      retryInterval: 500,
      onsessioninitialized: (id) => void sessions.set(id, transport),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await connectedFixtureServer().connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const http = createServer((req, res) => {
    void (async () => {
      if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
        jsonError(res, 404, -32000, 'Not found: the endpoint is /mcp');
        return;
      }
      // DNS-rebinding protection: a localhost server answers only requests addressed to the loopback.
      const origin = req.headers.origin;
      if (
        !isLoopbackHost(req.headers.host) ||
        (origin !== undefined && !isLoopbackHost(URL.canParse(origin) ? new URL(origin).host : undefined))
      ) {
        jsonError(res, 403, -32000, 'Forbidden: Host and Origin must name the loopback');
        return;
      }
      if (req.method !== 'POST') return legacy(req, res, undefined);
      const raw = await readBody(req);
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        jsonError(res, 400, -32700, 'Parse error: the body is not JSON');
        return;
      }
      if (await isLegacyRequest(await toWebRequest(req, body))) return legacy(req, res, body);
      return modernNode(req, res, body);
    })().catch((error: unknown) => {
      if (!res.headersSent) jsonError(res, 500, -32603, `fixture failed: ${(error as Error).message}`);
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, '127.0.0.1', () => resolve());
  });
  const address = http.address() as { port: number };
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    close: async () => {
      await modern.close();
      await Promise.all([...sessions.values()].map((t) => t.close().catch(() => undefined)));
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  if (args.includes('--stdio')) {
    void serveStdio(() => connectedFixtureServer());
  } else {
    const index = args.indexOf('--port');
    const port = index === -1 ? 0 : Number(args[index + 1]);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      console.error(`--port must be a TCP port (0-65535), not ${args[index + 1]}`);
      process.exit(2);
    }
    const fixture = await startFixtureHttp(port);
    console.log(`conformance fixture listening on ${fixture.url}`);
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void fixture.close().then(() => process.exit(0)));
  }
}
