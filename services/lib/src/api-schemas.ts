/**
 * The bodies of Punk's REST API under `/api/v1`, each declared once: the services validate requests with these
 * schemas (the gateway the registrations, credentials and accepts, the front the API keys and `?tenant=`, the
 * ledger the `/runs` query) and the front generates its OpenAPI document from them (`z.toJSONSchema`). Schemas
 * registered in {@link apiComponents} become `#/components/schemas/<id>` of that document.
 */
import { z } from 'zod';
import { apiKeySchema, approvalSchema, approvalStateSchema } from './contracts.js';
import { PunkError } from './errors.js';
import { decodeRunsCursor } from './runs-cursor.js';
import {
  commandSchema,
  dnsLabel,
  durationSchema,
  envVarSchema,
  headerSchema,
  openApiSourceSchema,
  referenceText,
  serverAuthSchema,
} from './spec/mcpserver.js';

/** The named schemas of the OpenAPI document (`components.schemas`), by `id`. */
export const apiComponents = z.registry<{ id: string; description?: string }>();

/** One of `values`; the error lists them (`must be a, b or c`), or says `required` when the field is absent. */
export function choice<const T extends readonly [string, ...string[]]>(values: T) {
  const listed = values.length === 2 ? values.join(' or ') : `${values.slice(0, -1).join(', ')} or ${String(values.at(-1))}`;
  return z.enum(values, { error: (issue) => (issue.input === undefined ? 'required' : `must be ${listed}`) });
}

/** An RFC 3339 time in an answer. */
const time = (description: string) => z.string().meta({ format: 'date-time', description });
const integer = z.number().int().min(0);

// ---------------------------------------------------------------- query parameters

/** A tenant (namespace): one DNS label. */
export const tenantSchema = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be one DNS label')
  .describe("Tenant (namespace). Default: the caller's tenant (with authentication off, the endpoint's configured tenant).");

/** `?tenant=` of the registry, credentials and API-key routes. */
export const tenantQuerySchema = z.object({ tenant: tenantSchema.optional() });

/** The query of a route that takes no parameters (`parseQuery` refuses any). */
export const noQuerySchema = z.object({});

/** Largest `limit` of `GET /runs`. */
export const MAX_RUNS_LIMIT = 500;
const limitRule = `must be an integer from 1 to ${String(MAX_RUNS_LIMIT)}`;
const dateTimeRule = 'must be an RFC 3339 date-time';

/** An RFC 3339 date-time query value. */
const dateTime = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T/, dateTimeRule)
  .refine((text) => !Number.isNaN(new Date(text).getTime()), dateTimeRule)
  .meta({ format: 'date-time' });
/** A filter's exact value. */
const filterText = z.string().min(1, 'must not be empty').max(500, 'must be at most 500 characters');

/** The query of `GET /runs` (each value a single string; the ledger refuses repeated ones); filters combine with AND. */
export const runsQuerySchema = z.object({
  tenant: z.string().min(1, 'must not be empty').describe('Tenant (default `default`).').optional(),
  limit: z
    .string()
    .regex(/^\d+$/, limitRule)
    .pipe(z.transform(Number))
    .pipe(z.number().min(1, limitRule).max(MAX_RUNS_LIMIT, limitRule))
    .describe(`Runs per page, 1 to ${String(MAX_RUNS_LIMIT)} (default 50).`)
    .optional(),
  cursor: z
    .string()
    .transform((text, ctx) => {
      const position = decodeRunsCursor(text);
      if (!position) ctx.addIssue({ code: 'custom', message: 'is not a nextCursor this API returned (leave it out for the first page)' });
      return position ?? z.NEVER;
    })
    .describe('The next page: the `nextCursor` of the previous answer (opaque; keep the same filters).')
    .optional(),
  before: dateTime.describe('Only runs whose last event is earlier (RFC 3339). To page, pass `cursor` instead.').optional(),
  server: filterText.describe('Only runs of this server (the registration name).').optional(),
  tool: filterText.describe('Only runs of this tool (its name on its server, not namespaced).').optional(),
  subject: filterText.describe('Only runs of this principal subject.').optional(),
  type: filterText
    .describe('Only runs with an event of this type (`tool.completed`, `approval.consumed`, `prompt.observed`, …).')
    .optional(),
  outcome: filterText.describe('Only runs with this outcome (`ok`, `error`, `denied`, `approval_required`, …).').optional(),
  trigger: filterText
    .describe('Only runs started by this trigger (`hook`: a prompt posted by a hook; `mcp` or `api`: a workflow run).')
    .optional(),
  since: dateTime.describe('Only runs still active at or after this time: their last event is not earlier (RFC 3339).').optional(),
  until: dateTime.describe('Only runs begun at or before this time: their first event is not later (RFC 3339).').optional(),
});

/** `?tenant=` of `GET /runs/{id}`. */
export const ledgerTenantQuerySchema = runsQuerySchema.pick({ tenant: true });

/** Largest `maxEvents` of `GET /ledger/verify`. */
export const MAX_VERIFY_EVENTS = 100_000;
const maxEventsRule = `must be an integer from 1 to ${String(MAX_VERIFY_EVENTS)}`;

/** The query of `GET /ledger/verify`. */
export const ledgerVerifyQuerySchema = ledgerTenantQuerySchema.extend({
  from: choice(['checkpoint', 'genesis'])
    .describe(
      '`checkpoint` (default): check the events appended since the last verification, then a stretch of the sweep over older ones; `genesis`: start again from the first event.',
    )
    .optional(),
  maxEvents: z
    .string()
    .regex(/^\d+$/, maxEventsRule)
    .pipe(z.transform(Number))
    .pipe(z.number().min(1, maxEventsRule).max(MAX_VERIFY_EVENTS, maxEventsRule))
    .describe(
      `Most events this request checks, 1 to ${String(MAX_VERIFY_EVENTS)} (default ${String(MAX_VERIFY_EVENTS)}; a request also stops after about 2 s). The next request resumes where it stopped.`,
    )
    .optional(),
});

/** The query of `GET /approvals`: filters, each optional; `state=all` is every state, as no `state` is. */
export const approvalsQuerySchema = z.object({
  state: choice(['pending', 'approved', 'denied', 'expired', 'consumed', 'all'] satisfies [...typeof approvalStateSchema.options, 'all'])
    .transform((state) => (state === 'all' ? undefined : state))
    .describe('Only requests in this state; `all` (as no `state`): every state.')
    .optional(),
  server: z.string().min(1, 'must not be empty').describe('Only requests of this server.').optional(),
  tool: z.string().min(1, 'must not be empty').describe('Only requests of this tool.').optional(),
  subject: z.string().min(1, 'must not be empty').describe('Only requests of calls by this principal subject.').optional(),
});

function badParameter(name: string, rule: string, value: unknown): PunkError {
  return new PunkError('InvalidParameter', `query parameter ${name} ${rule}, got ${JSON.stringify(value)}`, { parameter: name });
}

/**
 * A route's query (express's `req.query`) parsed with `schema` (one of the query schemas above), each parameter
 * given once. A parameter the route does not know is refused, naming it and the accepted ones (a misspelt
 * `tennant=` would otherwise silently answer for the default tenant). `route` names the route in that message.
 * @throws PunkError `InvalidParameter` naming the first bad parameter, its rule and its value.
 */
export function parseQuery<T>(
  query: Record<string, unknown>,
  schema: {
    shape: object;
    safeParse(
      input: unknown,
    ): { success: true; data: T } | { success: false; error: { issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }> } };
  },
  route: string,
): T {
  const accepted = Object.keys(schema.shape);
  const unknown = Object.keys(query).filter((name) => !accepted.includes(name));
  if (unknown.length > 0) {
    const names = unknown.map((name) => JSON.stringify(name)).join(', ');
    throw new PunkError(
      'InvalidParameter',
      `unknown query parameter${unknown.length > 1 ? 's' : ''} ${names} of ${route}; ${accepted.length > 0 ? `accepted: ${accepted.join(', ')}` : 'it accepts no query parameters'}`,
      { parameters: unknown, accepted },
    );
  }
  const values: Record<string, string | undefined> = {};
  for (const name of accepted) {
    const value = query[name];
    if (value !== undefined && typeof value !== 'string') throw badParameter(name, 'must be given once as a plain value', value);
    values[name] = value;
  }
  const parsed = schema.safeParse(values);
  if (parsed.success) return parsed.data;
  const [issue] = parsed.error.issues;
  const name = String(issue?.path[0]);
  throw badParameter(name, issue?.message ?? 'is invalid', values[name]);
}

// ---------------------------------------------------------------- errors

/** Every error answer: `{ error: { code, message } }`. */
export const apiErrorSchema = z
  .object({
    error: z.object({
      code: z.string().describe('Machine-readable code, such as `InvalidRegistration` or `ServerNotFound`.'),
      message: z.string().describe('What is wrong, naming the field or object.'),
    }),
  })
  .register(apiComponents, { id: 'Error' });

// ---------------------------------------------------------------- registry

const envName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name (letters, digits and _, not starting with a digit)');
const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name (RFC 9110 token)');

/**
 * `env` or `headers` of a registration: a record of values (`{ "TOKEN": "cred:github" }`), or a list of
 * `{ name, value | valueFrom }` entries as a manifest has them, which becomes that record (a
 * `valueFrom.credentialRef` its `cred:<name>[/<key>]` reference). A list must not name an entry twice, and
 * cannot take a `valueFrom.secretKeyRef`: the gateway reads no Kubernetes Secret.
 */
function namedValues(name: z.ZodString, entry: typeof envVarSchema | typeof headerSchema, caseInsensitive: boolean) {
  const list = z.array(entry).transform((entries, ctx) => {
    const out: Record<string, string> = {};
    const seen = new Map<string, number>();
    entries.forEach((item, i) => {
      const key = caseInsensitive ? item.name.toLowerCase() : item.name;
      const first = seen.get(key);
      if (first !== undefined) {
        ctx.issues.push({ code: 'custom', input: item, path: [i, 'name'], message: `names the same entry as [${String(first)}]` });
      }
      seen.set(key, i);
      const { secretKeyRef, credentialRef } = item.valueFrom ?? {};
      if (secretKeyRef) {
        ctx.issues.push({
          code: 'custom',
          input: item,
          path: [i, 'valueFrom', 'secretKeyRef'],
          message: 'the gateway reads no Kubernetes Secret: store the value as a credential and use valueFrom.credentialRef',
        });
      } else if (item.value !== undefined) out[item.name] = item.value;
      else if (credentialRef) out[item.name] = referenceText(credentialRef);
      else ctx.issues.push({ code: 'custom', input: item, path: [i, 'valueFrom'], message: 'must hold credentialRef' });
    });
    return out;
  });
  return z.union([z.record(name, z.string()), list]);
}

const sideEffectLevel = z
  .number()
  .int()
  .min(0)
  .max(4)
  .describe(
    'Declared side-effect level: 0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment. Wins over the verb heuristics.',
  );

/** `tools` of a registration: which tools are served and how they are classified (the McpServer `spec.tools` fields). */
export const toolsPolicySchema = z
  .object({
    allow: z.array(z.string().min(1)).describe('Only these tools are served (all when absent).').optional(),
    deny: z.array(z.string().min(1)).describe('These tools are never served.').optional(),
    overrides: z
      .array(
        z
          .object({
            name: z.string().min(1, 'must be a non-empty tool name').describe('Tool name as the server lists it.'),
            sideEffectLevel: sideEffectLevel.optional(),
            annotations: z.record(z.string(), z.unknown()).describe("MCP tool annotations that replace the server's own.").optional(),
          })
          .strict(),
      )
      .optional(),
    pinning: choice(['serve', 'hide', 'approval'])
      .describe(
        "When a tool's definition changes from the pinned one: serve the new one, hide the tool until an admin accepts it, or require approval per call. Default: `PUNK_TOOL_PINNING` (`hide`).",
      )
      .optional(),
  })
  .strict()
  .register(apiComponents, {
    id: 'ToolsPolicy',
    description: 'Which tools are served and how they are classified (the McpServer `spec.tools` fields).',
  });

/**
 * The body of a registration (`POST /mcp/servers`, `PUT /mcp/servers/{id}`), field by field. `type` says where the
 * server comes from: `stdio` (a `command` the gateway runs as a child process, with `args` and `env`) or `http` (a
 * remote `url`, with `headers` and the `transport`). The gateway adds the checks across fields (which fields go
 * with which `type`, `cred:` references, header values) in `parseRegistration`.
 */
export const registrationBodySchema = z
  .object({
    name: dnsLabel.describe('DNS-1035 label, unique in the tenant; the tool prefix on the aggregated endpoint.'),
    type: choice(['stdio', 'http', 'openapi']),
    command: commandSchema
      .describe(
        'stdio: the executable (`"node"`, its arguments in `args`), or, as in a manifest, the whole command line as a list (`["node", "server.mjs"]`, `args` appended).',
      )
      .optional(),
    args: z.array(z.string()).describe('stdio: arguments (after those of a `command` list).').optional(),
    env: namedValues(envName, envVarSchema, false)
      .describe(
        "stdio: environment of the process (nothing else of the gateway's environment reaches it): a record of values, or a manifest's list of `{ name, value | valueFrom: { credentialRef } }`.",
      )
      .optional(),
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .describe('http: URL of the MCP endpoint (http or https). Checked by the SSRF guard at registration and at every connect.')
      .optional(),
    headers: namedValues(headerName, headerSchema, true)
      .describe(
        "http and openapi: headers sent on every request: a record of values, or a manifest's list of `{ name, value | valueFrom: { credentialRef } }`.",
      )
      .optional(),
    openapi: openApiSourceSchema
      .describe(
        'openapi: the OpenAPI 3.0 or 3.1 document (`url` or `content`), `baseUrl` and the `operations` allow-list; each operation becomes a tool (docs/openapi.md).',
      )
      .optional(),
    transport: choice(['streamable-http', 'sse'])
      .describe(
        'http: `streamable-http` (default; falls back to the 2024-11-05 HTTP+SSE transport when the server answers 400, 404 or 405) or `sse` (the old transport only).',
      )
      .optional(),
    tools: toolsPolicySchema.optional(),
    sessionMode: choice(['shared', 'per-client'])
      .describe('One upstream session shared by all clients (default), or one per client session.')
      .optional(),
    timeout: durationSchema.describe('Deadline of one call, such as `30s` (default: `PUNK_CALL_TIMEOUT_MS`, 60 s).').optional(),
    auth: serverAuthSchema
      .describe(
        "http: whose identity reaches the upstream, as an McpServer's `spec.auth` (`tokenExchange` or `perUser`; docs/identity.md).",
      )
      .optional(),
  })
  .strict()
  .register(apiComponents, {
    id: 'Registration',
    description:
      'A server registration: `stdio` (`command`, `args`, `env`; accepted only where the gateway may run processes, i.e. `punk up`), `http` (`url`, `headers`) or `openapi` (`openapi`, `headers`). Header and env values may be `cred:<id>` (or `cred:<id>/<key>`) references to a credential of the same tenant, resolved at connect time.',
  });

/** The body of `POST /mcp/servers/{id}/tools/{tool}/accept` (optional): the fingerprint the admin reviewed. */
export const acceptToolBodySchema = z
  .object({
    fingerprint: z
      .string()
      .regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 fingerprint (64 lower-case hex digits)')
      .describe('The `pendingFingerprint` the admin reviewed: the accept holds only if it is still the one waiting.')
      .optional(),
  })
  .strict()
  .register(apiComponents, { id: 'AcceptToolInput' });

/** A server as the registry API shows it. */
export const serverViewSchema = z
  .object({
    name: z.string().describe('Registration name.'),
    namespace: z.string().describe('Tenant.'),
    type: z.enum(['stdio', 'http', 'openapi']).optional(),
    managed: z.boolean().describe('Made from a custom resource (or a manifest under `punk up`): read-only through this API.'),
    state: z.string().describe('Connection state on the answering gateway replica (`starting`, `ready`, `idle`, `failed`, `stopped`).'),
    lastError: z.string().describe('Why the server is not ready, when it is not.').optional(),
    warnings: z
      .array(z.string())
      .describe(
        'What is wrong but served, from the last connection, each naming where: an OpenAPI operation without operationId, `paths./pets/{id}.get: no operationId; named get_pets_id`.',
      )
      .optional(),
    circuit: z.enum(['closed', 'open', 'half-open']).describe('Circuit breaker of the pooled connection.').optional(),
    transport: z
      .enum(['stdio', 'streamable-http', 'sse', 'openapi'])
      .describe(
        'What the pooled connection speaks: `sse` when a Streamable HTTP handshake was refused and the 2024-11-05 HTTP+SSE transport answered; `openapi` for a REST API served in the gateway.',
      )
      .optional(),
    toolCount: integer,
    pendingReviews: z
      .array(z.string())
      .describe("Tools whose changed definition awaits an admin's review (tool pinning); a hidden one is not in `toolCount`.")
      .optional(),
    nameConflicts: z
      .array(z.string())
      .describe('Tools of the server no endpoint exposes because their name collides (the server lists a name twice), each with why.')
      .optional(),
    status: z.enum(['unknown', 'ok', 'error']).describe('Outcome of the last `test`.').optional(),
    latencyMs: z.number().min(0).describe('Connect and list time of the last `test`, in milliseconds.').optional(),
    testedAt: time('Time of the last `test` (RFC 3339).').optional(),
    registration: z
      .looseObject({})
      .describe(
        'The registration as stored, literal `env` and `headers` values shown as `<redacted>` (managed servers: a summary of the manifest, names only).',
      )
      .optional(),
    createdAt: time('Registered servers: RFC 3339.').optional(),
    createdBy: z.string().describe('Registered servers: subject of the admin who registered it.').optional(),
    updatedAt: time('Registered servers: RFC 3339.').optional(),
    updatedBy: z.string().describe('Registered servers: subject of the admin who last replaced it.').optional(),
  })
  .register(apiComponents, { id: 'Server' });

/** The answer of `POST /mcp/servers/{id}/test`. */
export const testResultSchema = z
  .object({
    ok: z.boolean(),
    toolCount: integer,
    pendingReviews: z
      .array(z.string())
      .describe("Tools whose changed definition awaits an admin's review (tool pinning); a hidden one is not in `toolCount`.")
      .optional(),
    tools: z.array(z.looseObject({})).describe('The tools as the server listed them.'),
    latencyMs: z.number().min(0).describe('Connect (credentials resolved) and list time, in milliseconds.'),
    error: z.string().describe('Why the test failed, when `ok` is false.').optional(),
  })
  .register(apiComponents, { id: 'TestResult' });

/** The pinned definition of one tool. */
export const toolPinSchema = z
  .object({
    tool: z.string().describe('Tool name.'),
    fingerprint: z
      .string()
      .describe('SHA-256 (hex) of the pinned definition (name, title, description, input and output schema, annotations).'),
    pinnedAt: time('RFC 3339.').optional(),
    pinnedBy: z
      .string()
      .describe('`first-listing`, `serve-policy`, or the subject of the admin who accepted the pinned definition.')
      .optional(),
    pendingFingerprint: z.string().describe('Fingerprint of a changed definition waiting to be accepted.').optional(),
    changedAt: time('RFC 3339.').optional(),
    status: z.enum(['pinned', 'changed-hidden', 'changed-approval']),
    diff: z
      .object({
        changes: z.array(
          z.object({
            op: z.enum(['added', 'removed', 'changed']),
            path: z.string().describe('RFC 6901 JSON Pointer of the member in the definition (`` is the whole definition).'),
            before: z.unknown().describe('The pinned value (`changed`, `removed`).').optional(),
            after: z.unknown().describe('The pending value (`changed`, `added`).').optional(),
          }),
        ),
        omitted: integer.describe('Differences found beyond the 50 listed.'),
      })
      .describe('What changed from the pinned definition to the pending one, member by member; long values are cut.')
      .optional(),
  })
  .register(apiComponents, { id: 'ToolPin' });

/** The answer of `GET /mcp/servers/{id}/tools`. */
export const toolListSchema = z
  .object({
    tools: z.array(z.looseObject({})),
    listedAt: time('When the listing was taken (RFC 3339).').optional(),
    cached: z.boolean().describe('True when answered from the cache (listings younger than 10 minutes).'),
    pins: z.array(toolPinSchema).optional(),
    levels: z
      .record(
        z.string(),
        z.object({
          level: sideEffectLevel,
          source: z.enum(['declared', 'heuristic']).describe('`declared` by the registration (or an OpenAPI method), else from the name.'),
        }),
      )
      .describe("Each listed tool's side-effect level, by name, as governance classifies its calls.")
      .optional(),
  })
  .register(apiComponents, { id: 'ToolList' });

/** The answer of an accept. */
export const acceptedToolSchema = z
  .object({ tool: z.string().describe('Tool name.'), fingerprint: z.string().describe('The fingerprint now pinned.') })
  .register(apiComponents, { id: 'AcceptedTool' });

// ---------------------------------------------------------------- settings

/** The body of `PUT /settings`: one setting's new value (governance checks the key and the value's type). */
export const settingChangeSchema = z
  .object({
    key: z
      .enum(['redaction'])
      .describe('The setting: `redaction` masks emails, phone and card numbers and secret-shaped tokens in ledger events.'),
    value: z.unknown().describe('Its new value: a boolean for `redaction`.'),
  })
  .register(apiComponents, { id: 'SettingChange' });

/** One setting of a tenant, as `GET` and `PUT /settings` answer it. */
export const settingViewSchema = z
  .object({
    key: z.string(),
    value: z.unknown(),
    updatedAt: z.string().describe('RFC 3339 time it was last set; absent while it has its default.').optional(),
    updatedBy: z.string().describe('Subject of the admin who last set it.').optional(),
  })
  .register(apiComponents, { id: 'Setting' });

// ---------------------------------------------------------------- credentials

/** Most keys of a credential. */
export const MAX_CREDENTIAL_KEYS = 64;
/** A key name: what a Kubernetes Secret accepts as a data key. */
export const credentialKeyPattern = /^[A-Za-z0-9._-]{1,253}$/;
const credentialIdRule = 'must be a DNS label: 1-63 lower-case letters, digits or "-", starting and ending with a letter or digit';
/** A credential id: a DNS label (RFC 1123), as Kubernetes names McpCredential objects. */
export const credentialIdSchema = z.string(credentialIdRule).regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, credentialIdRule);

/**
 * The body of `POST /credentials`, field by field: `{ id, type?, data }`. The gateway adds the checks of each
 * value and of the oauth2 keys in `parseCredentialInput` (messages never echo a value).
 */
export const credentialInputSchema = z
  .object({
    id: credentialIdSchema.describe('Id, unique in the tenant; referenced as `cred:<id>`.'),
    type: z
      .enum(['static', 'oauth2'], 'must be "static" or "oauth2"')
      .describe('Default: `oauth2` when `data` has `refresh_token` or `token_url`, else `static`.')
      .optional(),
    data: z
      .record(
        z.string().regex(credentialKeyPattern, 'key names must be 1-253 letters, digits, ".", "_" or "-"'),
        z.union([z.string(), z.number()], 'must be a non-empty string'),
        'must be an object of string keys and string values',
      )
      .refine((data) => Object.keys(data).length > 0, 'must hold at least one key')
      .refine((data) => Object.keys(data).length <= MAX_CREDENTIAL_KEYS, `holds more than ${String(MAX_CREDENTIAL_KEYS)} keys`)
      .meta({ minProperties: 1, maxProperties: MAX_CREDENTIAL_KEYS })
      .describe(
        'String keys and values, encrypted at rest (AES-256-GCM) and never returned. A reference resolves to the `value` key or the only key. OAuth2: `access_token`, `refresh_token`, `expires_at` (epoch ms; a number is accepted), `token_url`, `client_id`, `client_secret`, `scope`.',
      ),
  })
  .strict()
  .register(apiComponents, { id: 'CredentialInput' });

/** What the credentials API shows of a credential: never a value. */
export const credentialViewSchema = z
  .object({
    id: z.string().describe('Credential id.'),
    tenant: z.string().describe('Tenant.'),
    type: z.enum(['static', 'oauth2']),
    keys: z.array(z.string()).describe('Names of the stored keys.'),
    keyId: z.string().describe('Id of the encryption key the record is encrypted under.'),
    createdAt: time('RFC 3339.'),
    updatedAt: time('RFC 3339.').optional(),
    createdBy: z.string().describe('Subject of the admin who created it.').optional(),
    expiresAt: time('OAuth2: expiry of the current access token (RFC 3339).').optional(),
    lastRefreshAt: time('OAuth2: time of the last successful refresh (RFC 3339).').optional(),
    refreshError: z
      .string()
      .describe('OAuth2: why the last refresh failed, when it did (redacted: never a value); cleared by the next successful refresh.')
      .optional(),
    source: z
      .enum(['api', 'secret'])
      .describe(
        '`api`: created through this API. `secret`: applied by the operator from the Kubernetes Secret of an McpCredential (replaced when the Secret changes).',
      ),
    sourceChecksum: z.string().describe('`secret`: checksum of the Secret content the credential was applied from.').optional(),
  })
  .register(apiComponents, { id: 'Credential', description: 'What is known of a credential: never a value.' });

// ---------------------------------------------------------------- API keys

const scopePattern = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** The body of `POST /api-keys`. */
export const apiKeyInputSchema = z
  .object({
    name: z.string().trim().min(1).max(200).describe('Label of the key.'),
    tenant: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lower-case letters, digits, -)')
      .describe("Tenant of the key's principal (default: the endpoint's).")
      .optional(),
    scopes: z
      .array(z.string().regex(scopePattern, 'must be a scope token (RFC 6749 §3.3: printable ASCII, no space, " or \\)'))
      .max(100)
      .describe("Scopes granted (default: the endpoint's required scopes).")
      .optional(),
    groups: z.array(z.string().min(1).max(200)).max(100).describe('Groups of the principal, for policies.').optional(),
  })
  .strict()
  .register(apiComponents, { id: 'ApiKeyInput' });

/** An API key as the API shows it: the stored record without its hash, and `key` in the answer to its creation only. */
export const apiKeyViewSchema = apiKeySchema
  .omit({ sha256: true })
  .extend({
    key: z.string().describe('The key (`pk_…`): in the answer to its creation only; stored as its SHA-256.').optional(),
    warnings: z
      .array(z.string())
      .describe(
        'In the answer to its creation only: each `punk:` scope of the key that Punk does not define (a misspelt admin scope makes a key that is not an admin); the key keeps its scopes as given.',
      )
      .optional(),
  })
  .register(apiComponents, { id: 'ApiKey' });

// ---------------------------------------------------------------- the caller, the dashboard's sign-in

/** How the caller of a request authenticated: no authentication, the bootstrap admin key, an API key, an OAuth access token. */
export const callerKindSchema = choice(['anonymous', 'bootstrap', 'apiKey', 'oauth']);

/** The caller of `GET /me`: who its bearer token says it is, and whether it is an admin. */
export const callerViewSchema = z
  .object({
    authentication: z
      .boolean()
      .describe('Whether Punk authenticates callers (`PUNK_AUTH_MODE=on`); false: every caller is the anonymous admin.'),
    kind: callerKindSchema,
    subject: z.string().describe("`api-key:<id>`, `bootstrap-admin`, an OAuth token's `sub` (or `client_id`), or `anonymous`."),
    tenant: z.string(),
    scopes: z.array(z.string()),
    groups: z.array(z.string()),
    admin: z
      .boolean()
      .describe('Whether it holds the admin or platform admin scope: the registry, credentials, settings, API keys and ledger.'),
    platformAdmin: z.boolean().describe('Whether it holds the platform admin scope: every tenant.'),
    expiresAt: z.string().describe('RFC 3339 expiry of an OAuth access token (its `exp`).'),
  })
  .partial({ expiresAt: true })
  .register(apiComponents, { id: 'Caller' });

/**
 * What the dashboard needs before anyone signs in (`GET /ui/config.json`, public): whether to ask for a token at
 * all and, with `PUNK_DASHBOARD_OAUTH_CLIENT_ID`, the authorization server to sign in with (RFC 6749 §4.1 with
 * RFC 7636 PKCE; the dashboard reads the server's RFC 8414 metadata itself).
 */
export const dashboardConfigSchema = z.object({
  authentication: z.boolean(),
  oauth: z
    .object({
      issuer: z.string().describe('`PUNK_AUTH_ISSUER`.'),
      clientId: z.string().describe('`PUNK_DASHBOARD_OAUTH_CLIENT_ID`, a public client.'),
      scopes: z.array(z.string()),
      resource: z.string().describe('RFC 8707 resource to ask a token for: `PUNK_PUBLIC_URL`, an audience Punk accepts.'),
    })
    .optional(),
});

// ---------------------------------------------------------------- ledger

/** One run of the ledger (the events of one call, or of one server's lifecycle). */
export const runSummarySchema = z
  .object({
    runId: z.string(),
    tenant: z.string(),
    firstAt: z.string().describe('RFC 3339 time of its first event.'),
    lastAt: z.string().describe('RFC 3339 time of its last event.'),
    eventCount: z.number().int().min(1),
    types: z.array(z.string()).describe('Distinct event types, sorted.'),
    server: z.string().optional(),
    tool: z.string().describe('The tool called, when the run is a tools/call.').optional(),
    subject: z
      .string()
      .describe('Who ran it: the principal subject of its first event that names one (for a workflow run, the caller the agent acts for).')
      .optional(),
    outcome: z.string().describe('`ok`, `error`, `denied`, `approval_required`, or the outcome a completion event states.').optional(),
    trigger: z
      .string()
      .describe(
        'What started it: the `trigger` its first event stating one names (`hook`: a prompt posted by a hook; `mcp` or `api`: a workflow run).',
      )
      .optional(),
  })
  .register(apiComponents, {
    id: 'RunSummary',
    description: "One run of the ledger (the events of one call, or of one server's lifecycle).",
  });

/** The answer of `GET /runs`: a page of runs, most recently active first, and the cursor of the next one. */
export const runsPageSchema = z
  .object({
    runs: z.array(runSummarySchema),
    nextCursor: z.string().describe('The `cursor` of the next page (opaque); absent on the last page.').optional(),
  })
  .register(apiComponents, { id: 'RunsPage' });

/** The answer of `GET /runs/{id}`. */
export const runSchema = z
  .object({
    run: runSummarySchema,
    events: z.array(z.looseObject({}).describe('A stored event with its chain position (`tenantSeq`), `prevHash` and `hash`.')),
  })
  .register(apiComponents, { id: 'Run' });

/** The answer of `GET /ledger/verify`. */
const chainPositionSchema = z.object({
  tenantSeq: integer.describe('Position in the chain (0: before the first event).'),
  hash: z.string(),
});
export const verificationSchema = z
  .object({
    ok: z.boolean().describe('No broken event found.'),
    tenant: z.string(),
    events: integer.describe(
      'Ok: the chain position verified up to (events checked, from the first). Broken: the position of the first broken event.',
    ),
    head: z.string().describe('Hash of the event at `events` (ok chains).').optional(),
    complete: z
      .boolean()
      .describe(
        'Ok: true when `events` reached the head record (the whole chain is verified); false when this request stopped early: call again to go on.',
      ),
    checked: integer.describe(
      'Events this request checked, each counted once: the new ones since the last verification (every one with `from=genesis`), then the stretch of the sweep over older ones.',
    ),
    chainHead: chainPositionSchema
      .nullable()
      .describe("The head record: the chain's last position and hash, written with every append (null for a tenant without events)."),
    sweep: z
      .object({
        tenantSeq: integer.describe('How far the sweep re-checking already verified events has come (0: a new pass starts next).'),
        sweptAt: z.string().nullable().meta({ format: 'date-time' }).describe('When the sweep last went over every verified event.'),
      })
      .describe('The sweep that checks verified events again, a stretch per request.'),
    firstBroken: z
      .object({
        id: z.string().describe('The broken event; absent when it is missing (a deleted tail).').optional(),
        runId: z.string().describe('The run of the broken event, as stored; absent when the event is missing.').optional(),
        tenantSeq: z.number().int(),
        reason: choice(['HashMismatch', 'BrokenLink', 'TruncatedTail', 'HeadMismatch']),
        message: z.string(),
      })
      .describe('The first event whose link or hash does not match, or where the chain ends short of its head record (broken chains).')
      .optional(),
  })
  .register(apiComponents, { id: 'Verification', description: "The outcome of recomputing the tenant's hash chain." });

// ---------------------------------------------------------------- approvals

/** The body of `POST /approvals/{id}/approve` and `/deny` (optional). */
export const approvalDecisionBodySchema = z
  .object({ reason: z.string().max(1024, 'must be at most 1024 characters').describe('Why (recorded on the ledger).').optional() })
  .strict()
  .register(apiComponents, { id: 'ApprovalDecision' });

/** An approval request as the API shows it. */
export const approvalViewSchema = approvalSchema
  .extend({
    mayDecide: z
      .boolean()
      .describe(
        "Whether the caller may approve or deny it now: it is pending and the caller is one who decides it (governance's rule: not the caller of the call unless the rule sets `approval.allowSelf`; the rule's approvers, or admins when it names none).",
      ),
    decideRefusal: z.string().optional().describe('When the request is pending and the caller may not decide it: why not, naming who may.'),
  })
  .register(apiComponents, {
    id: 'Approval',
    description: 'An approval request, bound to one exact call (principal, server, tool, arguments digest) and usable once.',
  });
/** An approval request as the approvals API answers it: with whether the caller may decide it. */
export type ApprovalView = z.infer<typeof approvalViewSchema>;

// ---------------------------------------------------------------- ingest

/** Longest prompt `POST /ingest/prompt` records whole, in characters (UTF-16 code units); a longer one is recorded truncated to it. */
export const MAX_INGESTED_PROMPT_CHARS = 100_000;

/**
 * The body of `POST /ingest/prompt`: Claude Code's UserPromptSubmit hook input as the hook gets it on stdin
 * (`prompt`, `session_id`, `cwd`, `prompt_id`, `hook_event_name`, …; other fields it adds are ignored) plus `time`,
 * when the prompt was typed (the hook adds it; default: when the request arrives).
 */
export const promptIngestBodySchema = z
  .looseObject({
    prompt: z
      .string()
      .describe(
        `The prompt as typed. One longer than ${String(MAX_INGESTED_PROMPT_CHARS)} characters is recorded as its first ${String(MAX_INGESTED_PROMPT_CHARS)}, marked \`truncated\`.`,
      ),
    session_id: z.string().min(1).max(200).describe("Claude Code's session id.").optional(),
    cwd: z.string().max(4096).describe('Working directory of the session.').optional(),
    prompt_id: z.string().min(1).max(200).describe("Claude Code's id of the prompt, when it gives one.").optional(),
    hook_event_name: z.string().max(100).describe('`UserPromptSubmit`.').optional(),
    time: dateTime
      .describe(
        "When the prompt was submitted (RFC 3339; default: when the request arrives); within the last 24 hours and at most 5 minutes ahead of Punk's clock.",
      )
      .optional(),
  })
  .register(apiComponents, { id: 'PromptIngest' });

/** The answer of `POST /ingest/prompt`. */
export const promptIngestAnswerSchema = z
  .object({
    runId: z.string().describe('The observed run recorded for the prompt.'),
    truncated: z
      .literal(true)
      .describe(`Present when the prompt was longer than ${String(MAX_INGESTED_PROMPT_CHARS)} characters: only its beginning is recorded.`)
      .optional(),
  })
  .register(apiComponents, { id: 'PromptIngestAnswer' });

// ---------------------------------------------------------------- workflows

/** Longest a `POST /workflows/{name}/runs` waits for its run to end, in seconds (below the gateway admin deadline). */
export const MAX_WORKFLOW_WAIT_SECONDS = 30;

/** One workflow of the tenant as the API shows it (`GET /workflows`). */
export const workflowViewSchema = z
  .object({
    name: z.string().describe("The McpWorkflow's metadata.name."),
    namespace: z.string().describe('Its namespace: the tenant.'),
    description: z.string(),
    tool: z.string().describe('Its tool on the aggregated endpoint /mcp (`punk_workflow__<name>`, docs/naming.md).'),
    inputSchema: z.record(z.string(), z.unknown()).describe("JSON Schema of the run's arguments (spec.input)."),
    sideEffectLevel: z
      .number()
      .int()
      .min(0)
      .max(4)
      .nullable()
      .describe(
        "The highest side-effect level of its tool_call nodes (0 without any); `null` (unknown) while a node's tool is not in the tenant's catalog (its server missing or not started, or the tool unknown), as the workflow is then not ready.",
      ),
    readOnly: z.boolean().describe('Whether every tool_call node is read-only (level 0 or 1); false while the level is unknown.'),
    ready: z.boolean().describe('Whether it checks against the tenant’s servers and tools (then it is served as a tool and may run).'),
    errors: z.array(z.string()).describe('What keeps it from being ready, each naming the node and field.'),
  })
  .register(apiComponents, { id: 'Workflow', description: 'One McpWorkflow of the tenant.' });
export type WorkflowView = z.infer<typeof workflowViewSchema>;

/** `GET /workflows/{name}`: the view and the spec. */
export const workflowDetailSchema = workflowViewSchema
  .extend({ spec: z.record(z.string(), z.unknown()).describe('The McpWorkflow spec as served.') })
  .register(apiComponents, { id: 'WorkflowDetail', description: 'One McpWorkflow with its spec.' });
export type WorkflowDetail = z.infer<typeof workflowDetailSchema>;

/** Body of `POST /workflows/{name}/runs`. */
export const workflowRunBodySchema = z
  .object({
    arguments: z.record(z.string(), z.unknown()).default({}).describe('The arguments, checked against the inputSchema.'),
    waitSeconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_WORKFLOW_WAIT_SECONDS)
      .default(10)
      .describe(`How long to wait for the run to end before answering 202 (0 to ${String(MAX_WORKFLOW_WAIT_SECONDS)}, default 10).`),
  })
  .strict()
  .register(apiComponents, { id: 'WorkflowRunRequest', description: 'Starts a run of a workflow.' });
export type WorkflowRunBody = z.infer<typeof workflowRunBodySchema>;

/** States of a workflow run as the runs API answers them. */
export const workflowRunStateSchema = z.enum(['running', 'completed', 'failed', 'cancelled']);
export type WorkflowRunState = z.infer<typeof workflowRunStateSchema>;

/** Answer of `POST /workflows/{name}/runs`: 201 when the run ended within the wait, 202 while it runs. */
export const workflowRunReplySchema = z
  .object({
    runId: z.string().describe('The run on the ledger: GET /runs/{runId}.'),
    state: workflowRunStateSchema,
    result: z.unknown().optional().describe('The result of a completed run.'),
    error: z
      .object({ code: z.string(), message: z.string(), node: z.string().optional().describe('The node that failed, when one did.') })
      .optional()
      .describe('Why a failed run failed, or who cancelled a cancelled one.'),
  })
  .register(apiComponents, { id: 'WorkflowRun', description: 'A workflow run and, once it ended, its result or error.' });
export type WorkflowRunReply = z.infer<typeof workflowRunReplySchema>;
