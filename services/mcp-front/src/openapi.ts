/**
 * The OpenAPI 3.1 document of Punk's REST API under `/api/v1` (served at `GET /api/v1/openapi.json`): the
 * registry and credentials APIs (mcp-front, answered by the gateway over `punk.gateway.admin`), the API keys,
 * and the ledger. `openapi.test.ts` checks it is a valid OpenAPI document, that it names exactly the routes the
 * routers serve, and the registry tests check answers against its schemas.
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Schema) => ({ 'application/json': { schema } });
const answer = (description: string, schema?: Schema) => ({ description, ...(schema && { content: json(schema) }) });
const error = (description: string) => answer(description, ref('Error'));
const string = (description: string, extra: Schema = {}): Schema => ({ type: 'string', description, ...extra });
const stringMap = (description: string): Schema => ({ type: 'object', description, additionalProperties: { type: 'string' } });
const pathParameter = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const tenantParameter = {
  name: 'tenant',
  in: 'query',
  required: false,
  description: "Tenant (namespace). Default: the caller's tenant (with authentication off, the endpoint's configured tenant).",
  schema: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' },
};
const adminErrors = {
  '401': error('No valid bearer token (authentication on); the `WWW-Authenticate` header carries the RFC 6750 challenge.'),
  '403': error('The token lacks the admin scope (`PUNK_AUTH_ADMIN_SCOPE`, default `punk:admin`).'),
  '503': error('The gateway (or the database behind it) did not answer.'),
};
const server = pathParameter('id', 'Registration name (a DNS-1035 label), unique in the tenant.');
const credential = pathParameter('id', 'Credential id, unique in the tenant.');

const sideEffectLevel: Schema = {
  type: 'integer',
  minimum: 0,
  maximum: 4,
  description:
    'Declared side-effect level: 0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment. Wins over the verb heuristics.',
};

const schemas: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: string('Machine-readable code, such as `InvalidRegistration` or `ServerNotFound`.'),
          message: string('What is wrong, naming the field or object.'),
        },
      },
    },
  },
  ToolsPolicy: {
    type: 'object',
    additionalProperties: false,
    description: 'Which tools are served and how they are classified (the McpServer `spec.tools` fields).',
    properties: {
      allow: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'Only these tools are served (all when absent).' },
      deny: { type: 'array', items: { type: 'string', minLength: 1 }, description: 'These tools are never served.' },
      overrides: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name'],
          additionalProperties: false,
          properties: {
            name: string('Tool name as the server lists it.', { minLength: 1 }),
            sideEffectLevel,
            annotations: { type: 'object', description: "MCP tool annotations that replace the server's own." },
          },
        },
      },
      pinning: {
        type: 'string',
        enum: ['serve', 'hide', 'approval'],
        description:
          "When a tool's definition changes from the pinned one: serve the new one, hide the tool until an admin accepts it, or require approval per call. Default: `PUNK_TOOL_PINNING` (`hide`).",
      },
    },
  },
  Registration: {
    type: 'object',
    required: ['name', 'type'],
    additionalProperties: false,
    description:
      'A server registration: `stdio` (`command`, `args`, `env`; accepted only where the gateway may run processes, i.e. `punk up`) or `http` (`url`, `headers`). Header and env values may be `cred:<id>` (or `cred:<id>/<key>`) references to a credential of the same tenant, resolved at connect time.',
    properties: {
      name: string('DNS-1035 label, unique in the tenant; the tool prefix on the aggregated endpoint.', {
        pattern: '^[a-z]([-a-z0-9]*[a-z0-9])?$',
        maxLength: 63,
      }),
      type: { type: 'string', enum: ['stdio', 'http'] },
      command: string('stdio: the executable.', { minLength: 1 }),
      args: { type: 'array', items: { type: 'string' }, description: 'stdio: arguments.' },
      env: stringMap("stdio: environment of the process (nothing else of the gateway's environment reaches it)."),
      url: string('http: URL of the MCP endpoint (http or https). Checked by the SSRF guard at registration and at every connect.', {
        format: 'uri',
      }),
      headers: stringMap('http: headers sent on every request.'),
      transport: {
        type: 'string',
        enum: ['streamable-http', 'sse'],
        description:
          'http: `streamable-http` (default; falls back to the 2024-11-05 HTTP+SSE transport when the server answers 400, 404 or 405) or `sse` (the old transport only).',
      },
      tools: ref('ToolsPolicy'),
      sessionMode: {
        type: 'string',
        enum: ['shared', 'per-client'],
        description: 'One upstream session shared by all clients (default), or one per client session.',
      },
      timeout: string('Deadline of one call, such as `30s` (default: `PUNK_CALL_TIMEOUT_MS`, 60 s).', { pattern: '^\\d+(ms|s|m|h)$' }),
    },
  },
  Server: {
    type: 'object',
    required: ['name', 'namespace', 'managed', 'state', 'toolCount'],
    properties: {
      name: string('Registration name.'),
      namespace: string('Tenant.'),
      type: { type: 'string', enum: ['stdio', 'http'] },
      managed: { type: 'boolean', description: 'Made from a custom resource (or a manifest under `punk up`): read-only through this API.' },
      state: {
        type: 'string',
        description: 'Connection state on the answering gateway replica (`starting`, `ready`, `idle`, `failed`, `stopped`).',
      },
      lastError: string('Why the server is not ready, when it is not.'),
      circuit: { type: 'string', enum: ['closed', 'open', 'half-open'], description: 'Circuit breaker of the pooled connection.' },
      transport: {
        type: 'string',
        enum: ['stdio', 'streamable-http', 'sse'],
        description:
          'What the pooled connection speaks: `sse` when a Streamable HTTP handshake was refused and the 2024-11-05 HTTP+SSE transport answered.',
      },
      toolCount: { type: 'integer', minimum: 0 },
      status: { type: 'string', enum: ['unknown', 'ok', 'error'], description: 'Outcome of the last `test`.' },
      latencyMs: { type: 'number', minimum: 0, description: 'Connect and list time of the last `test`, in milliseconds.' },
      testedAt: string('Time of the last `test` (RFC 3339).', { format: 'date-time' }),
      registration: {
        type: 'object',
        description:
          'The registration as stored, literal `env` and `headers` values shown as `<redacted>` (managed servers: a summary of the manifest, names only).',
      },
      createdAt: string('Registered servers: RFC 3339.', { format: 'date-time' }),
      createdBy: string('Registered servers: subject of the admin who registered it.'),
      updatedAt: string('Registered servers: RFC 3339.', { format: 'date-time' }),
      updatedBy: string('Registered servers: subject of the admin who last replaced it.'),
    },
  },
  TestResult: {
    type: 'object',
    required: ['ok', 'toolCount', 'tools', 'latencyMs'],
    properties: {
      ok: { type: 'boolean' },
      toolCount: { type: 'integer', minimum: 0 },
      tools: { type: 'array', items: { type: 'object' }, description: 'The tools as the server listed them.' },
      latencyMs: { type: 'number', minimum: 0, description: 'Connect (credentials resolved) and list time, in milliseconds.' },
      error: string('Why the test failed, when `ok` is false.'),
    },
  },
  ToolList: {
    type: 'object',
    required: ['tools', 'cached'],
    properties: {
      tools: { type: 'array', items: { type: 'object' } },
      listedAt: string('When the listing was taken (RFC 3339).', { format: 'date-time' }),
      cached: { type: 'boolean', description: 'True when answered from the cache (listings younger than 10 minutes).' },
      pins: { type: 'array', items: ref('ToolPin') },
    },
  },
  ToolPin: {
    type: 'object',
    required: ['tool', 'fingerprint', 'status'],
    properties: {
      tool: string('Tool name.'),
      fingerprint: string('SHA-256 (hex) of the pinned definition (name, title, description, input and output schema, annotations).'),
      pinnedAt: string('RFC 3339.', { format: 'date-time' }),
      pendingFingerprint: string('Fingerprint of a changed definition waiting to be accepted.'),
      changedAt: string('RFC 3339.', { format: 'date-time' }),
      status: { type: 'string', enum: ['pinned', 'changed-hidden', 'changed-approval'] },
    },
  },
  AcceptedTool: {
    type: 'object',
    required: ['tool', 'fingerprint'],
    properties: { tool: string('Tool name.'), fingerprint: string('The fingerprint now pinned.') },
  },
  CredentialInput: {
    type: 'object',
    required: ['id', 'data'],
    additionalProperties: false,
    properties: {
      id: string('Id, unique in the tenant; referenced as `cred:<id>`.', { pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 }),
      type: {
        type: 'string',
        enum: ['static', 'oauth2'],
        description: 'Default: `oauth2` when `data` has `refresh_token` or `token_url`, else `static`.',
      },
      data: {
        type: 'object',
        minProperties: 1,
        additionalProperties: { type: 'string' },
        description:
          'String keys and values, encrypted at rest (AES-256-GCM) and never returned. A reference resolves to the `value` key or the only key. OAuth2: `access_token`, `refresh_token`, `expires_at` (epoch ms), `token_url`, `client_id`, `client_secret`, `scope`.',
      },
    },
  },
  Credential: {
    type: 'object',
    required: ['id', 'tenant', 'type', 'keys', 'keyId', 'createdAt', 'source'],
    description: 'What is known of a credential: never a value.',
    properties: {
      id: string('Credential id.'),
      tenant: string('Tenant.'),
      type: { type: 'string', enum: ['static', 'oauth2'] },
      keys: { type: 'array', items: { type: 'string' }, description: 'Names of the stored keys.' },
      keyId: string('Id of the encryption key the record is encrypted under.'),
      createdAt: string('RFC 3339.', { format: 'date-time' }),
      updatedAt: string('RFC 3339.', { format: 'date-time' }),
      createdBy: string('Subject of the admin who created it.'),
      expiresAt: string('OAuth2: expiry of the current access token (RFC 3339).', { format: 'date-time' }),
      lastRefreshAt: string('OAuth2: time of the last successful refresh (RFC 3339).', { format: 'date-time' }),
      refreshError: string(
        'OAuth2: why the last refresh failed, when it did (redacted: never a value); cleared by the next successful refresh.',
      ),
      source: {
        type: 'string',
        enum: ['api', 'secret'],
        description:
          '`api`: created through this API. `secret`: applied by the operator from the Kubernetes Secret of an McpCredential (replaced when the Secret changes).',
      },
      sourceChecksum: string('`secret`: checksum of the Secret content the credential was applied from.'),
    },
  },
  ApiKeyInput: {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: string('Label of the key.', { minLength: 1, maxLength: 200 }),
      tenant: string("Tenant of the key's principal (default: the endpoint's)."),
      scopes: { type: 'array', items: { type: 'string' }, description: "Scopes granted (default: the endpoint's required scopes)." },
      groups: { type: 'array', items: { type: 'string' }, description: 'Groups of the principal, for policies.' },
    },
  },
  ApiKey: {
    type: 'object',
    required: ['id', 'name', 'tenant', 'scopes', 'groups', 'createdAt', 'createdBy'],
    properties: {
      key: string('The key (`pk_…`): in the answer to its creation only; stored as its SHA-256.'),
      id: string('Key id.'),
      name: string('Label.'),
      tenant: string('Tenant.'),
      scopes: { type: 'array', items: { type: 'string' } },
      groups: { type: 'array', items: { type: 'string' } },
      createdAt: string('RFC 3339.', { format: 'date-time' }),
      createdBy: string('Subject of the admin who created it.'),
    },
  },
  RunSummary: {
    type: 'object',
    description: "One run of the ledger (the events of one call, or of one server's lifecycle).",
    required: ['runId', 'tenant', 'firstAt', 'lastAt', 'eventCount', 'types'],
    properties: {
      runId: { type: 'string' },
      tenant: { type: 'string' },
      firstAt: string('RFC 3339 time of its first event.'),
      lastAt: string('RFC 3339 time of its last event; the `before` of the next page.'),
      eventCount: { type: 'integer', minimum: 1 },
      types: { type: 'array', items: { type: 'string' }, description: 'Distinct event types, sorted.' },
      server: { type: 'string' },
      tool: string('The tool called, when the run is a tools/call.'),
      subject: string('Who ran it: the principal subject of its first event that names one.'),
      outcome: string('`ok`, `error`, `denied`, `approval_required`, or the outcome a completion event states.'),
    },
  },
  Run: {
    type: 'object',
    required: ['run', 'events'],
    properties: {
      run: ref('RunSummary'),
      events: {
        type: 'array',
        items: { type: 'object', description: 'A stored event with its chain position (`tenantSeq`), `prevHash` and `hash`.' },
      },
    },
  },
  Verification: {
    type: 'object',
    description: "The outcome of recomputing the tenant's hash chain.",
    required: ['ok', 'tenant', 'events'],
    properties: {
      ok: { type: 'boolean' },
      tenant: { type: 'string' },
      events: { type: 'integer', minimum: 0, description: 'Events checked.' },
      head: string('Hash of the last event (ok chains); keep a copy elsewhere to detect a deleted tail.'),
      firstBroken: {
        type: 'object',
        description: 'The first event whose link or hash does not match (broken chains).',
        required: ['id', 'tenantSeq', 'reason', 'message'],
        properties: { id: { type: 'string' }, tenantSeq: { type: 'integer' }, reason: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
};

/** The document, as served. */
export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Punk API',
    version: '1',
    description:
      'REST API of Punk under `/api/v1`: the server registry, credentials, API keys and the ledger. JSON in and out; errors are `{ error: { code, message } }`; answers carry `Cache-Control: no-store`. With `PUNK_AUTH_MODE=on` every operation needs a bearer token with the admin scope; with authentication off (local development) every operation is open.',
  },
  servers: [{ url: '/api/v1' }],
  security: [{ bearer: [] }],
  components: {
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'An API key (`pk_…`) or an OAuth access token with the admin scope.' },
    },
    schemas,
  },
  paths: {
    '/mcp/servers': {
      get: {
        operationId: 'listServers',
        summary: 'The servers of a tenant: registrations made through this API and managed ones (custom resources, manifests).',
        parameters: [tenantParameter],
        responses: {
          '200': answer('The servers.', {
            type: 'object',
            required: ['servers'],
            properties: { servers: { type: 'array', items: ref('Server') } },
          }),
          ...adminErrors,
        },
      },
      post: {
        operationId: 'createServer',
        summary: 'Registers a server. Audited on the ledger (`server.registered`); every gateway replica and front learns of it.',
        parameters: [tenantParameter],
        requestBody: { required: true, content: json(ref('Registration')) },
        responses: {
          '201': answer('Registered.', { type: 'object', required: ['server'], properties: { server: ref('Server') } }),
          '400': error('The body is not a valid registration (the message names the field), or its URL is refused by the SSRF guard.'),
          '409': error('A server of that name exists in the tenant (`ServerExists`, or `ServerManaged` for a managed one).'),
          '413': error('The body is larger than `PUNK_MAX_BODY_BYTES`.'),
          '415': error('The body is not JSON.'),
          ...adminErrors,
        },
      },
    },
    '/mcp/servers/{id}': {
      parameters: [server, tenantParameter],
      get: {
        operationId: 'getServer',
        summary: 'One server.',
        responses: {
          '200': answer('The server.', { type: 'object', required: ['server'], properties: { server: ref('Server') } }),
          '404': error('No such server in the tenant.'),
          ...adminErrors,
        },
      },
      put: {
        operationId: 'replaceServer',
        summary:
          'Replaces a registration (the body is the whole registration; `name` must match). Pooled connections to it are closed on every replica.',
        requestBody: { required: true, content: json(ref('Registration')) },
        responses: {
          '200': answer('Replaced.', { type: 'object', required: ['server'], properties: { server: ref('Server') } }),
          '400': error('Invalid registration.'),
          '404': error('No such server in the tenant.'),
          '409': error('The server is managed (`ServerManaged`): change its custom resource instead.'),
          '413': error('The body is too large.'),
          '415': error('The body is not JSON.'),
          ...adminErrors,
        },
      },
      delete: {
        operationId: 'deleteServer',
        summary: 'Deletes a registration; its connections close on every replica. Audited (`server.deregistered`).',
        responses: {
          '204': answer('Deleted.'),
          '404': error('No such server in the tenant.'),
          '409': error('The server is managed.'),
          ...adminErrors,
        },
      },
    },
    '/mcp/servers/{id}/test': {
      parameters: [server, tenantParameter],
      post: {
        operationId: 'testServer',
        summary:
          'Connects (resolving credentials), lists the tools, and stores the outcome on the registration (`status`, `toolCount`, `lastError`, `latencyMs`). Audited (`server.tested`).',
        responses: {
          '200': answer('The outcome; `ok` is false (with `error`) when the server could not be reached or listed.', ref('TestResult')),
          '404': error('No such server in the tenant.'),
          ...adminErrors,
        },
      },
    },
    '/mcp/servers/{id}/tools': {
      parameters: [server, tenantParameter],
      get: {
        operationId: 'listServerTools',
        summary: 'The tools of the last listing, listed live when that is older than 10 minutes, with their pinned definitions.',
        responses: {
          '200': answer('The tools.', ref('ToolList')),
          '404': error('No such server in the tenant.'),
          '502': error('The cached listing is too old and the server could not be listed live (`ServerUnavailable`, naming why).'),
          ...adminErrors,
        },
      },
    },
    '/mcp/servers/{id}/tools/{tool}/accept': {
      parameters: [server, pathParameter('tool', 'Tool name as the server lists it.'), tenantParameter],
      post: {
        operationId: 'acceptToolDefinition',
        summary:
          "Accepts a tool's changed definition: it becomes the pinned one and the tool is served again. Audited (`tool.definition_accepted`).",
        requestBody: {
          required: false,
          content: json({
            type: 'object',
            additionalProperties: false,
            properties: {
              fingerprint: string('The `pendingFingerprint` the admin reviewed: the accept holds only if it is still the one waiting.', {
                pattern: '^[0-9a-f]{64}$',
              }),
            },
          }),
        },
        responses: {
          '200': answer('Accepted.', ref('AcceptedTool')),
          '400': error('The body is not `{ fingerprint }`.'),
          '404': error('No such server or tool.'),
          '409': error(
            'The tool has no changed definition waiting (`ToolNotPending`), or the one waiting is not the reviewed `fingerprint` (`ToolDefinitionMismatch`).',
          ),
          '415': error('A body that is not JSON.'),
          ...adminErrors,
        },
      },
    },
    '/credentials': {
      get: {
        operationId: 'listCredentials',
        summary: 'The credentials of a tenant, without values.',
        parameters: [tenantParameter],
        responses: {
          '200': answer('The credentials.', {
            type: 'object',
            required: ['credentials'],
            properties: { credentials: { type: 'array', items: ref('Credential') } },
          }),
          ...adminErrors,
        },
      },
      post: {
        operationId: 'createCredential',
        summary:
          'Stores a credential, encrypted with AES-256-GCM under `PUNK_ENCRYPTION_KEY`. Audited (`credential.created`, key names only).',
        parameters: [tenantParameter],
        requestBody: { required: true, content: json(ref('CredentialInput')) },
        responses: {
          '201': answer('Stored; the answer has no values.', {
            type: 'object',
            required: ['credential'],
            properties: { credential: ref('Credential') },
          }),
          '400': error('The body is not a valid credential (the message names the field, never a value).'),
          '409': error('A credential with that id exists in the tenant.'),
          '413': error('The body is too large.'),
          '415': error('The body is not JSON.'),
          ...adminErrors,
        },
      },
    },
    '/credentials/{id}': {
      parameters: [credential, tenantParameter],
      get: {
        operationId: 'getCredential',
        summary: 'One credential, without values.',
        responses: {
          '200': answer('The credential.', { type: 'object', required: ['credential'], properties: { credential: ref('Credential') } }),
          '404': error('No such credential in the tenant.'),
          ...adminErrors,
        },
      },
      delete: {
        operationId: 'deleteCredential',
        summary: 'Deletes a credential; references to it fail at the next connect. Audited (`credential.deleted`).',
        responses: { '204': answer('Deleted.'), '404': error('No such credential in the tenant.'), ...adminErrors },
      },
    },
    '/api-keys': {
      get: {
        operationId: 'listApiKeys',
        summary: 'The API keys (authentication on only), without the keys themselves.',
        parameters: [tenantParameter],
        responses: {
          '200': answer('The keys.', {
            type: 'object',
            required: ['apiKeys'],
            properties: { apiKeys: { type: 'array', items: ref('ApiKey') } },
          }),
          '404': error('Authentication is off (`AuthenticationOff`).'),
          ...adminErrors,
        },
      },
      post: {
        operationId: 'createApiKey',
        summary: 'Creates an API key; the answer shows `key` this once.',
        requestBody: { required: true, content: json(ref('ApiKeyInput')) },
        responses: {
          '201': answer('Created.', ref('ApiKey')),
          '400': error('Invalid body.'),
          '404': error('Authentication is off.'),
          '413': error('The body is larger than 16 KiB.'),
          '415': error('The body is not JSON.'),
          ...adminErrors,
        },
      },
    },
    '/api-keys/{id}': {
      parameters: [pathParameter('id', 'Key id.')],
      delete: {
        operationId: 'revokeApiKey',
        summary: 'Revokes a key on every replica from the next request on.',
        responses: { '204': answer('Revoked.'), '404': error('No such key, or authentication is off.'), ...adminErrors },
      },
    },
    '/runs': {
      get: {
        operationId: 'listRuns',
        summary: 'Runs of the ledger, most recently active first.',
        parameters: [
          tenantParameter,
          {
            name: 'limit',
            in: 'query',
            required: false,
            description: 'Runs per page, 1 to 500 (default 50).',
            schema: { type: 'integer', minimum: 1, maximum: 500 },
          },
          {
            name: 'before',
            in: 'query',
            required: false,
            description: "Runs whose last event is earlier (RFC 3339); pass the last run's `lastAt` for the next page.",
            schema: { type: 'string', format: 'date-time' },
          },
        ],
        responses: {
          '200': answer('The runs.', {
            type: 'object',
            required: ['runs'],
            properties: { runs: { type: 'array', items: ref('RunSummary') } },
          }),
          '400': error('A bad query parameter.'),
          ...adminErrors,
        },
      },
    },
    '/runs/{id}': {
      parameters: [pathParameter('id', 'Run id.'), tenantParameter],
      get: {
        operationId: 'getRun',
        summary: 'One run with its events in chain order.',
        responses: {
          '200': answer('The run.', ref('Run')),
          '400': error('The run id exists in several tenants: add `tenant`.'),
          '404': error('No such run.'),
          ...adminErrors,
        },
      },
    },
    '/ledger/verify': {
      get: {
        operationId: 'verifyLedger',
        summary: "Recomputes the tenant's hash chain and names the first broken event.",
        parameters: [tenantParameter],
        responses: { '200': answer('The verification.', ref('Verification')), ...adminErrors },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'getOpenApiDocument',
        summary: 'This document.',
        security: [],
        responses: { '200': answer('The OpenAPI document.', { type: 'object' }) },
      },
    },
  },
} as const;
