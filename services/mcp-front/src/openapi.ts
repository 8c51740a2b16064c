/**
 * The OpenAPI 3.1 document of Punk's REST API under `/api/v1` (served at `GET /api/v1/openapi.json`): the
 * registry and credentials APIs (mcp-front, answered by the gateway over `punk.gateway.admin`), the API keys,
 * and the ledger. Generated from {@link routes}: each names the zod schemas (`@punk/lib` api-schemas) that
 * validate its query and body and that describe its answers, so the document cannot drift from validation.
 * `openapi.test.ts` checks it is a valid OpenAPI document; `e2e/openapi-routes.test.ts` that it names exactly
 * the routes the routers serve; the registry tests check answers against its schemas.
 */
import { z } from 'zod';
import {
  acceptedToolSchema,
  acceptToolBodySchema,
  apiComponents,
  apiErrorSchema,
  apiKeyInputSchema,
  apiKeyViewSchema,
  approvalDecisionBodySchema,
  connectionItemSchema,
  approvalsQuerySchema,
  approvalViewSchema,
  callerViewSchema,
  credentialInputSchema,
  credentialViewSchema,
  ledgerTenantQuerySchema,
  ledgerVerifyQuerySchema,
  registrationBodySchema,
  runSchema,
  runsPageSchema,
  runsQuerySchema,
  promptIngestAnswerSchema,
  promptIngestBodySchema,
  serverViewSchema,
  settingChangeSchema,
  settingViewSchema,
  tenantQuerySchema,
  testResultSchema,
  toolListSchema,
  verificationSchema,
  workflowDetailSchema,
  workflowRunBodySchema,
  workflowRunReplySchema,
  workflowViewSchema,
} from '@punk/lib';

type JsonSchema = Record<string, unknown>;
type Method = 'get' | 'post' | 'put' | 'delete';

/** One answer of a route: its description and, when it has a JSON body, the zod schema of that body. */
interface Answer {
  description: string;
  schema?: z.ZodType;
}

/** One operation under `/api/v1`, as the document states it. */
interface Route {
  method: Method;
  /** OpenAPI path template (`/mcp/servers/{id}`). */
  path: string;
  operationId: string;
  summary: string;
  /** Description of each `{param}` of `path`. */
  pathParameters?: Record<string, string>;
  /** The zod object that validates the query. */
  query?: z.ZodObject;
  /** The zod schema that validates the body; `required: false` for an optional body. */
  body?: { schema: z.ZodType; required: boolean };
  responses: Record<string, Answer>;
  /** Whether the admin errors (401, 403, 503) apply; true unless false. */
  admin?: boolean;
}

const ok = (description: string, schema?: z.ZodType): Answer => ({ description, ...(schema && { schema }) });
const error = (description: string): Answer => ({ description, schema: apiErrorSchema });
/** `{ <name>: schema }`: an answer that wraps one object or list. */
const wrapped = (name: string, schema: z.ZodType) => z.object({ [name]: schema });

const adminErrors: Record<string, Answer> = {
  '401': error('No valid bearer token (authentication on); the `WWW-Authenticate` header carries the RFC 6750 challenge.'),
  '403': error(
    "The token lacks the admin scope (`PUNK_AUTH_ADMIN_SCOPE`, default `punk:admin`); or it is a tenant admin's and the request reaches another tenant than its own (`tenant` in the query or an API key's body, or the key to revoke), or makes a key with the platform admin scope: that needs the platform admin scope (`PUNK_AUTH_PLATFORM_ADMIN_SCOPE`, default `punk:platform-admin`). The message names the tenant and the scope.",
  ),
  '503': error('The gateway (or the database behind it) did not answer.'),
};
const server = { id: 'Registration name (a DNS-1035 label), unique in the tenant.' };
const credential = { id: 'Credential id, unique in the tenant.' };
const registration = { schema: registrationBodySchema, required: true };
const oneServer = wrapped('server', serverViewSchema);
const approval = { id: 'Approval id (a UUID).' };
const connection = { namespace: "The server's namespace (the caller's tenant).", name: 'The server name.' };
const oneApproval = wrapped('approval', approvalViewSchema);
const approvalDecisionAnswers: Record<string, Answer> = {
  '200': ok('The decided request.', oneApproval),
  '400': error('Invalid body.'),
  '403': error(
    "The caller may not decide it: it made the call (and the rule does not set `approval.allowSelf`), or it is not one of the rule's approvers (or, when the rule names none, not an admin). The message names who may.",
  ),
  '404': error('No such request.'),
  '409': error('The request is not pending any more (approved, denied, expired or consumed).'),
};

/** Every operation under `/api/v1`. */
export const routes: readonly Route[] = [
  {
    method: 'get',
    path: '/mcp/servers',
    operationId: 'listServers',
    summary: 'The servers of a tenant: registrations made through this API and managed ones (custom resources, manifests).',
    query: tenantQuerySchema,
    responses: { '200': ok('The servers.', wrapped('servers', z.array(serverViewSchema))) },
  },
  {
    method: 'post',
    path: '/mcp/servers',
    operationId: 'createServer',
    summary: 'Registers a server. Audited on the ledger (`server.registered`); every gateway replica and front learns of it.',
    query: tenantQuerySchema,
    body: registration,
    responses: {
      '201': ok('Registered.', oneServer),
      '400': error('The body is not a valid registration (the message names the field), or its URL is refused by the SSRF guard.'),
      '409': error('A server of that name exists in the tenant (`ServerExists`, or `ServerManaged` for a managed one).'),
      '413': error('The body is larger than `PUNK_MAX_BODY_BYTES`.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'get',
    path: '/mcp/servers/{id}',
    operationId: 'getServer',
    summary: 'One server.',
    pathParameters: server,
    query: tenantQuerySchema,
    responses: { '200': ok('The server.', oneServer), '404': error('No such server in the tenant.') },
  },
  {
    method: 'put',
    path: '/mcp/servers/{id}',
    operationId: 'replaceServer',
    summary:
      'Replaces a registration (the body is the whole registration; `name` must match). Pooled connections to it are closed on every replica.',
    pathParameters: server,
    query: tenantQuerySchema,
    body: registration,
    responses: {
      '200': ok('Replaced.', oneServer),
      '400': error('Invalid registration.'),
      '404': error('No such server in the tenant.'),
      '409': error('The server is managed (`ServerManaged`): change its custom resource instead.'),
      '413': error('The body is too large.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'delete',
    path: '/mcp/servers/{id}',
    operationId: 'deleteServer',
    summary: 'Deletes a registration; its connections close on every replica. Audited (`server.deregistered`).',
    pathParameters: server,
    query: tenantQuerySchema,
    responses: { '204': ok('Deleted.'), '404': error('No such server in the tenant.'), '409': error('The server is managed.') },
  },
  {
    method: 'post',
    path: '/mcp/servers/{id}/test',
    operationId: 'testServer',
    summary:
      'Connects (resolving credentials), lists the tools, and stores the outcome on the registration (`status`, `toolCount`, `lastError`, `latencyMs`). Audited (`server.tested`).',
    pathParameters: server,
    query: tenantQuerySchema,
    responses: {
      '200': ok('The outcome; `ok` is false (with `error`) when the server could not be reached or listed.', testResultSchema),
      '404': error('No such server in the tenant.'),
    },
  },
  {
    method: 'get',
    path: '/mcp/servers/{id}/tools',
    operationId: 'listServerTools',
    summary: 'The tools of the last listing, listed live when that is older than 10 minutes, with their pinned definitions.',
    pathParameters: server,
    query: tenantQuerySchema,
    responses: {
      '200': ok('The tools.', toolListSchema),
      '404': error('No such server in the tenant.'),
      '502': error('The cached listing is too old and the server could not be listed live (`ServerUnavailable`, naming why).'),
    },
  },
  {
    method: 'post',
    path: '/mcp/servers/{id}/tools/{tool}/accept',
    operationId: 'acceptToolDefinition',
    summary:
      "Accepts a tool's changed definition: it becomes the pinned one and the tool is served again. Audited (`tool.definition_accepted`).",
    pathParameters: { ...server, tool: 'Tool name as the server lists it.' },
    query: tenantQuerySchema,
    body: { schema: acceptToolBodySchema, required: false },
    responses: {
      '200': ok('Accepted.', acceptedToolSchema),
      '400': error('The body is not `{ fingerprint }`.'),
      '404': error('No such server or tool.'),
      '409': error(
        'The tool has no changed definition waiting (`ToolNotPending`), or the one waiting is not the reviewed `fingerprint` (`ToolDefinitionMismatch`).',
      ),
      '415': error('A body that is not JSON.'),
    },
  },
  {
    method: 'get',
    path: '/credentials',
    operationId: 'listCredentials',
    summary: 'The credentials of a tenant, without values.',
    query: tenantQuerySchema,
    responses: { '200': ok('The credentials.', wrapped('credentials', z.array(credentialViewSchema))) },
  },
  {
    method: 'post',
    path: '/credentials',
    operationId: 'createCredential',
    summary: 'Stores a credential, encrypted with AES-256-GCM under `PUNK_ENCRYPTION_KEY`. Audited (`credential.created`, key names only).',
    query: tenantQuerySchema,
    body: { schema: credentialInputSchema, required: true },
    responses: {
      '201': ok('Stored; the answer has no values.', wrapped('credential', credentialViewSchema)),
      '400': error('The body is not a valid credential (the message names the field, never a value).'),
      '409': error('A credential with that id exists in the tenant.'),
      '413': error('The body is too large.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'get',
    path: '/credentials/{id}',
    operationId: 'getCredential',
    summary: 'One credential, without values.',
    pathParameters: credential,
    query: tenantQuerySchema,
    responses: {
      '200': ok('The credential.', wrapped('credential', credentialViewSchema)),
      '404': error('No such credential in the tenant.'),
    },
  },
  {
    method: 'put',
    path: '/credentials/{id}',
    operationId: 'replaceCredential',
    summary:
      'Replaces the keys of a credential in place, in one statement: references to it never find it missing (a rotation without a window). Servers using it reconnect. Audited (`credential.replaced`, key names only).',
    pathParameters: credential,
    query: tenantQuerySchema,
    body: { schema: credentialInputSchema, required: true },
    responses: {
      '200': ok('Replaced; the answer has no values.', wrapped('credential', credentialViewSchema)),
      '400': error(
        'The body is not a valid credential, or its `id` is not the one in the path (the message names the field, never a value).',
      ),
      '404': error('No such credential in the tenant (create it with POST).'),
      '409': error('The credential is applied from a Kubernetes Secret (`CredentialManaged`): change the Secret.'),
      '413': error('The body is too large.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'delete',
    path: '/credentials/{id}',
    operationId: 'deleteCredential',
    summary: 'Deletes a credential; references to it fail at the next connect. Audited (`credential.deleted`).',
    pathParameters: credential,
    query: tenantQuerySchema,
    responses: { '204': ok('Deleted.'), '404': error('No such credential in the tenant.') },
  },
  {
    method: 'get',
    path: '/workflows',
    operationId: 'listWorkflows',
    summary: 'The McpWorkflows of a tenant, each with its tool on /mcp, its side-effect level and whether it is ready (docs/workflows.md).',
    query: tenantQuerySchema,
    responses: { '200': ok('The workflows.', wrapped('workflows', z.array(workflowViewSchema))) },
  },
  {
    method: 'get',
    path: '/workflows/{name}',
    operationId: 'getWorkflow',
    summary: 'One workflow with its spec.',
    pathParameters: { name: "The McpWorkflow's metadata.name." },
    query: tenantQuerySchema,
    responses: { '200': ok('The workflow.', wrapped('workflow', workflowDetailSchema)), '404': error('No such workflow in the tenant.') },
  },
  {
    method: 'post',
    path: '/workflows/{name}/runs',
    operationId: 'runWorkflow',
    summary:
      'Starts a run of a ready workflow (trigger `api`) and waits up to `waitSeconds` for it to end. Each node is governed and on the ledger: GET /runs/{runId}.',
    pathParameters: { name: "The McpWorkflow's metadata.name." },
    query: tenantQuerySchema,
    body: { schema: workflowRunBodySchema, required: false },
    responses: {
      '201': ok('The run ended within the wait: `completed` with its result, or `failed` with its error.', workflowRunReplySchema),
      '202': ok('The run is still running.', workflowRunReplySchema),
      '400': error('The body is invalid, or the arguments do not match the input schema (`InvalidArguments`, naming the field).'),
      '403': error('A policy rule denies the caller this workflow (`PolicyDenied`, naming the rule; the decision is on the ledger).'),
      '404': error('No such workflow in the tenant.'),
      '409': error('The workflow is not ready (`WorkflowNotReady`, naming its errors).'),
      '415': error('A body that is not JSON.'),
    },
  },
  {
    method: 'post',
    path: '/workflows/{name}/runs/{runId}/cancel',
    operationId: 'cancelWorkflowRun',
    summary:
      'Cancels a running run on whichever gateway replica runs it: it stops before its next node, the node in flight is cancelled (its upstream call too), and `workflow.cancelled` ends it on the ledger.',
    pathParameters: { name: "The McpWorkflow's metadata.name.", runId: 'The run id (from POST /workflows/{name}/runs or GET /runs).' },
    query: tenantQuerySchema,
    responses: {
      '200': ok('The run is cancelled.', workflowRunReplySchema),
      '202': ok('The run has not stopped within 10 s; its end will be on the ledger.', workflowRunReplySchema),
      '404': error('The workflow has no such run (`WorkflowRunNotFound`; runs are known here until a day after their end).'),
      '409': error(
        'The run is not running (`WorkflowRunNotRunning`, naming the state it ended in: completed, failed, cancelled, interrupted).',
      ),
    },
  },
  {
    method: 'get',
    path: '/settings',
    operationId: 'getSettings',
    summary: "The tenant's settings (answered by governance), each with its value, and who set it when.",
    query: tenantQuerySchema,
    responses: { '200': ok('Every setting.', wrapped('settings', z.array(settingViewSchema))) },
  },
  {
    method: 'put',
    path: '/settings',
    operationId: 'putSetting',
    summary:
      'Sets one setting of the tenant (`{"key":"redaction","value":true}`), on every replica within moments. Audited (`settings.changed`).',
    query: tenantQuerySchema,
    body: { schema: settingChangeSchema, required: true },
    responses: {
      '200': ok('Set.', wrapped('setting', settingViewSchema)),
      '400': error('An unknown key (the message lists the known ones) or a value of the wrong type (`InvalidSetting`).'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'get',
    path: '/api-keys',
    operationId: 'listApiKeys',
    summary: 'The API keys (authentication on only), without the keys themselves.',
    query: tenantQuerySchema,
    responses: {
      '200': ok('The keys.', wrapped('apiKeys', z.array(apiKeyViewSchema))),
      '404': error('Authentication is off (`AuthenticationOff`).'),
    },
  },
  {
    method: 'post',
    path: '/api-keys',
    operationId: 'createApiKey',
    summary: 'Creates an API key; the answer shows `key` this once.',
    body: { schema: apiKeyInputSchema, required: true },
    responses: {
      '201': ok('Created.', apiKeyViewSchema),
      '400': error('Invalid body.'),
      '404': error('Authentication is off.'),
      '413': error('The body is larger than 16 KiB.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'delete',
    path: '/api-keys/{id}',
    operationId: 'revokeApiKey',
    summary: 'Revokes a key on every replica from the next request on.',
    pathParameters: { id: 'Key id.' },
    responses: { '204': ok('Revoked.'), '404': error('No such key, or authentication is off.') },
  },
  {
    method: 'get',
    path: '/runs',
    operationId: 'listRuns',
    summary: 'Runs of the ledger, most recently active first.',
    query: runsQuerySchema,
    responses: {
      '200': ok('A page of runs.', runsPageSchema),
      '400': error('A bad query parameter (`cursor`: not a `nextCursor` of this API).'),
    },
  },
  {
    method: 'get',
    path: '/runs/{id}',
    operationId: 'getRun',
    summary: 'One run with its events in chain order.',
    pathParameters: { id: 'Run id.' },
    query: ledgerTenantQuerySchema,
    responses: {
      '200': ok('The run.', runSchema),
      '400': error('The run id exists in several tenants: add `tenant`.'),
      '404': error('No such run.'),
    },
  },
  {
    method: 'get',
    path: '/ledger/verify',
    operationId: 'verifyLedger',
    summary:
      "Verifies the tenant's hash chain incrementally (new events since the last verification, the head record, then a stretch of older ones), bounded per request; names the first broken event or a deleted tail.",
    query: ledgerVerifyQuerySchema,
    responses: { '200': ok('The verification.', verificationSchema), '400': error('A bad query parameter.') },
  },
  {
    method: 'post',
    path: '/ingest/prompt',
    operationId: 'ingestPrompt',
    summary:
      'Records a prompt typed in Claude Code (its UserPromptSubmit hook input) as a completed observed run under the caller: provider claude-code, model external, route live, cost 0, its events chained.',
    body: { schema: promptIngestBodySchema, required: true },
    responses: {
      '201': ok('Recorded.', promptIngestAnswerSchema),
      '400': error('A bad body (names the field).'),
      '413': error('The body is too large.'),
      '415': error('The body is not JSON.'),
    },
  },
  {
    method: 'get',
    path: '/me',
    operationId: 'getCaller',
    summary:
      "Who the caller's bearer token says it is (kind, subject, tenant, scopes, groups, whether an admin); any valid token of the tenant.",
    responses: {
      '200': ok('The caller.', callerViewSchema),
      '403': error('The key or token is of another tenant (and lacks the platform admin scope).'),
    },
  },
  {
    method: 'get',
    path: '/approvals',
    operationId: 'listApprovals',
    summary: 'Approval requests the caller may see (those it may decide or made; all for an admin), newest first.',
    query: approvalsQuerySchema,
    responses: {
      '200': ok('The requests.', wrapped('approvals', z.array(approvalViewSchema))),
      '400': error('A bad or unknown query parameter.'),
    },
  },
  {
    method: 'get',
    path: '/approvals/{id}',
    operationId: 'getApproval',
    summary: 'One approval request.',
    pathParameters: approval,
    responses: {
      '200': ok('The request.', oneApproval),
      '403': error('The caller neither made the call nor may decide it.'),
      '404': error('No such request.'),
    },
  },
  {
    method: 'post',
    path: '/approvals/{id}/approve',
    operationId: 'approveApproval',
    summary: 'Approves a pending request: the same call (principal, server, tool, arguments) then runs once before it expires.',
    pathParameters: approval,
    body: { schema: approvalDecisionBodySchema, required: false },
    responses: approvalDecisionAnswers,
  },
  {
    method: 'post',
    path: '/approvals/{id}/deny',
    operationId: 'denyApproval',
    summary: 'Denies a pending request; the waiting call fails closed.',
    pathParameters: approval,
    body: { schema: approvalDecisionBodySchema, required: false },
    responses: approvalDecisionAnswers,
  },
  {
    method: 'get',
    path: '/connections',
    operationId: 'listConnections',
    summary:
      "The caller's per-user connections: one item per server of its tenant with `spec.auth.perUser`, connected or not (docs/identity.md). Any valid token.",
    responses: { '200': ok("The caller's connections.", wrapped('items', z.array(connectionItemSchema))) },
  },
  {
    method: 'post',
    path: '/connections/{namespace}/{name}',
    operationId: 'beginConnection',
    summary:
      "Starts the caller's connect flow to a server (authorization code with PKCE S256): answers the provider's authorization URL and sets an HttpOnly cookie binding the flow to this browser; the provider redirects back to `/connect/callback`.",
    pathParameters: connection,
    responses: {
      '200': ok('Where to send the browser.', z.object({ authorizationUrl: z.string() })),
      '403': error('An API key naming no user.'),
      '404': error('No such server with `spec.auth.perUser` in the caller’s tenant.'),
    },
  },
  {
    method: 'delete',
    path: '/connections/{namespace}/{name}',
    operationId: 'deleteConnection',
    summary: "Disconnects: deletes the caller's tokens for the server (ledgered `connection.deleted`).",
    pathParameters: connection,
    responses: { '204': ok('Deleted.'), '404': error('The caller has no connection to the server.') },
  },
  {
    method: 'get',
    path: '/openapi.json',
    operationId: 'getOpenApiDocument',
    summary: 'This document.',
    admin: false,
    responses: { '200': ok('The OpenAPI document.', z.looseObject({})) },
  },
];

/**
 * JSON Schema of zod schemas, all converted in one pass: the schemas of {@link apiComponents} become
 * `components.schemas` (referred to by `$ref`), every other schema {@link JsonSchemas.of} is asked for is inlined.
 */
class JsonSchemas {
  private readonly registry = z.registry<{ id: string; description?: string }>();
  private readonly ids = new Map<z.ZodType, string>();
  private output: Record<string, JsonSchema> | undefined;

  constructor() {
    for (const [id, schema] of apiComponents._idmap) {
      this.registry.add(schema, { ...apiComponents.get(schema), id });
      this.ids.set(schema as z.ZodType, id);
    }
  }

  /** A placeholder for the JSON Schema of `schema`, filled in by {@link resolve}. */
  of(schema: z.ZodType): JsonSchema {
    const component = apiComponents.get(schema)?.id;
    if (component !== undefined) return { $ref: `#/components/schemas/${component}` };
    let id = this.ids.get(schema);
    if (id === undefined) {
      id = `~${String(this.ids.size)}`;
      this.ids.set(schema, id);
      this.registry.add(schema, { ...z.globalRegistry.get(schema), id });
    }
    return { [PLACEHOLDER]: id };
  }

  /** Every schema, by id (`$schema` and `$id` dropped). */
  private all(): Record<string, JsonSchema> {
    this.output ??= Object.fromEntries(
      Object.entries(
        z.toJSONSchema(this.registry, {
          target: 'draft-2020-12',
          io: 'input',
          uri: (id) => `#/components/schemas/${id}`,
        }).schemas,
      ).map(([id, schema]) => [id, Object.fromEntries(Object.entries(schema).filter(([key]) => key !== '$schema' && key !== '$id'))]),
    );
    return this.output;
  }

  /** `components.schemas`. */
  components(): Record<string, JsonSchema> {
    return Object.fromEntries(Object.entries(this.all()).filter(([id]) => !id.startsWith('~')));
  }

  /** `value` with every placeholder replaced by its JSON Schema. */
  resolve<T>(value: T): T {
    return JSON.parse(JSON.stringify(value), (_key, item: unknown) => {
      const id = item !== null && typeof item === 'object' ? (item as Record<string, unknown>)[PLACEHOLDER] : undefined;
      return typeof id === 'string' ? this.all()[id] : item;
    }) as T;
  }
}
const PLACEHOLDER = '$zod';

/** The OpenAPI parameters of a route: its path parameters, then one per field of its query schema. */
function parametersOf(route: Route, schemas: JsonSchemas): JsonSchema[] {
  const path = Object.entries(route.pathParameters ?? {}).map(([name, description]) => ({
    name,
    in: 'path',
    required: true,
    description,
    schema: { type: 'string' },
  }));
  const query = Object.entries(route.query?.shape ?? {}).map(([name, field]) => {
    const schema = field as z.ZodType;
    return { name, in: 'query', required: !schema.safeParse(undefined).success, schema: schemas.of(schema) };
  });
  return [...path, ...query];
}

/** The OpenAPI operation of a route. */
function operationOf(route: Route, schemas: JsonSchemas): JsonSchema {
  const json = (schema: z.ZodType) => ({ 'application/json': { schema: schemas.of(schema) } });
  // A route's own description of a status (such as its 403) says more than the admin one.
  const answers = { ...(route.admin !== false && adminErrors), ...route.responses };
  const parameters = parametersOf(route, schemas);
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(parameters.length > 0 && { parameters }),
    ...(route.admin === false && { security: [] }),
    ...(route.body && { requestBody: { required: route.body.required, content: json(route.body.schema) } }),
    responses: Object.fromEntries(
      Object.entries(answers).map(([status, answer]) => [
        status,
        { description: answer.description, ...(answer.schema && { content: json(answer.schema) }) },
      ]),
    ),
  };
}

/** The OpenAPI document of `all`: its paths and the components they refer to. */
function documentOf(all: readonly Route[]) {
  const schemas = new JsonSchemas();
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const route of all) (paths[route.path] ??= {})[route.method] = operationOf(route, schemas);
  return { paths: schemas.resolve(paths), schemas: schemas.components() };
}
const generated = documentOf(routes);

/** The document, as served. */
export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Punk API',
    version: '1',
    description:
      'REST API of Punk under `/api/v1`: the server registry, credentials, API keys and the ledger. JSON in and out; errors are `{ error: { code, message } }`; answers carry `Cache-Control: no-store`. With `PUNK_AUTH_MODE=on` every operation needs a bearer token with the admin scope, in its own tenant (a tenant admin), or the platform admin scope, in every tenant; with authentication off (local development) every operation is open.',
  },
  servers: [{ url: '/api/v1' }],
  security: [{ bearer: [] }],
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'An API key (`pk_…`) or an OAuth access token with the admin scope.' },
    },
    schemas: generated.schemas,
  },
  paths: generated.paths,
};
